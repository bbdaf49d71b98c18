"""G-Walk (MQuAKE-Remastered), as released in `pipeline/gwalk/eval_loop.py`, ported to the
fact bank with the same frozen reader (paper B.2).

Per question: one call extracts the start entity, one breaks the question into relation
phrases, then for each phrase the walk matches it to a bank relation by embedding
similarity (above `relation_threshold`, the sub-question comes from the release's
REL2SUBQ table; below, from one more call), asks the model for a tentative answer, and
continues with the bank's object when the bank holds a fact for (subject, relation),
else with the model's own answer. The answer is the last subject reached.

Changes from the release, all forced by the setting: the bank is the version-resolved
current facts of the history (one per key, original record text); `get_correct_track`
(which reads the gold path) and the answer-alias table behind `fit_subject_on_kg` (gold
data) are dropped, so a subject matches the bank when its normalized key does; the
retriever is a configured embedder (Contriever is not available offline), so the
relation threshold is that embedder's (see conf/arm/gwalk.yaml); decoding is greedy.
"""
from __future__ import annotations

from typing import Any

import numpy as np

from arms.bank import fact_bank
from arms.embedders import cached_vectors
from arms.multicall import Caller, MethodAnswer, prompt_hash
from arms.released import (REL2SUBQ, STOP_BLOCK, STOP_DONE, STOP_FACT, chain_entities, drop_extra_blocks,
                           load_prompt_file)
from cmc.cloze import OBJECT, SUBJECT
from cmc.frontends.grammar import load_patterns
from cmc.graph import Memory
from cmc.records import Question
from common.configurable import configurable

RETRIEVED = "Retrieved fact:"


@configurable
class GWalk:
    """The G-Walk loop over the bank. Token caps are the release's generate_length: 50 for
    the breakdown and answer calls, 20 for the entity and sub-question calls."""

    def __init__(self, embedder: Any, cache_dir: str, prompts_dir: str, templates: str, name: str = "gwalk",
                 relation_threshold: float = 0.845, max_new_tokens: int = 50, short_new_tokens: int = 20,
                 temperature: float = 0.0) -> None:
        self.name, self.embedder, self.cache_dir = name, embedder, cache_dir
        self.relation_threshold, self.temperature = relation_threshold, temperature
        self.max_new_tokens, self.short_new_tokens = max_new_tokens, short_new_tokens
        self.prompts = {key: load_prompt_file(prompts_dir, file) for key, file in (
            ("task", "fill_out_ga_w_blank2.txt"), ("breakdown", "subq_breakdown.txt"),
            ("rel2subq", "relation2subq_prompt2.txt"), ("entity", "extract_entity.txt"))}
        # relation name -> the release's template form: "The capital of [X] is __" -> "The capital of {} is"
        self.templates = {p.relation: p.surface.replace(SUBJECT, "{}").replace(OBJECT, "").strip()
                          for p in load_patterns(templates)}
        self.prompt_version = prompt_hash("gwalk", self.prompts, self.templates, REL2SUBQ, embedder.pin,
                                          relation_threshold)

    def template(self, relation: str) -> str:
        return self.templates.get(relation) or "{} " + relation.replace("_", " ")

    def answer(self, question: Question, memory: Memory, caller: Caller) -> MethodAnswer:
        subject = start = self.start_entity(question.text, caller)
        phrases = self.breakdown(question.text, start, caller)
        text = self.prompts["task"] + "\n\nQuestion: " + question.text + "\n"
        steps: list[dict[str, Any]] = []
        answer, outcome = None, "walked"
        for phrase in phrases:
            step = self.hop(text, subject, phrase, memory, caller)
            if step is None:
                outcome = "no_generated_answer"  # the release's "failed case"
                break
            text, subject, record = step
            steps.append(record)
            answer = subject
        trace = {"outcome": outcome if phrases else "no_relations", "start": start, "relations": phrases,
                 "steps": steps}
        return MethodAnswer(answer, tuple(s["fact_pos"] for s in steps if s["fact_pos"] is not None), trace)

    def hop(self, text: str, subject: str, phrase: str, memory: Memory,
            caller: Caller) -> tuple[str, str, dict[str, Any]] | None:
        """One step of the walk: the new text, the next subject and what the step did; None
        when the model's tentative answer cannot be parsed (the walk stops there)."""
        relation, score = self.match_relation(phrase, memory)
        if relation is not None:
            template = self.template(relation)
            subquestion = REL2SUBQ.get(template, template).format(subject)
        else:
            subquestion = self.subquestion(subject, phrase, caller)
        text += "Subquestion: " + subquestion + "\n"
        text = (text + caller.complete("answer", text, self.max_new_tokens, [STOP_FACT], self.temperature)).strip()
        if text.split("\n")[-1] == RETRIEVED:
            text = text[:-len("\n" + RETRIEVED)]
        text = drop_extra_blocks(text)
        lines = text.strip().split("\n")
        parts = lines[-1][len("Generated answer: "):].strip().split(". ") if len(lines) >= 2 else []
        if len(parts) < 2:
            return None
        fact = fact_bank(memory).lookup(subject, relation) if relation is not None else None
        follow = fact.object if fact is not None else ". ".join(parts[1:])
        verdict = "contradicts" if fact is not None else "does not contradict"
        text += (f"\n{RETRIEVED} {fact.sentence if fact is not None else '<no fact>'}.\n"
                 f"Retrieved fact {verdict} to generated answer, so continue with this subject: {follow}.\n")
        record = {"subject": subject, "phrase": phrase, "relation": relation, "score": round(score, 6),
                  "subquestion": subquestion, "model_object": ". ".join(parts[1:]),
                  "fact_pos": fact.pos if fact is not None else None, "next": follow}
        return text, follow, record

    def match_relation(self, phrase: str, memory: Memory) -> tuple[str | None, float]:
        """mquake_utils.get_relation: the bank relation whose template is most similar to
        the phrase, if the similarity reaches the threshold."""
        relations = sorted({fact.relation for fact in fact_bank(memory).facts})
        if not relations:
            return None, float("nan")
        vectors = cached_vectors(self.embedder, [self.template(r) for r in relations], self.cache_dir)
        scores = vectors @ self.embedder.encode([phrase])[0]
        best = int(np.argmax(scores))
        return (relations[best] if scores[best] >= self.relation_threshold else None), float(scores[best])

    def start_entity(self, question: str, caller: Caller) -> str:
        """mquake_utils.extract_entity for one question: the model's entity, widened over
        initials ("W." -> "W. G. Sebald") when it is found in the question."""
        prompt = self.prompts["entity"] + f'Example 5:\nQuestion: "{question}"\nExtracted entity: ('
        output = (prompt + caller.complete("entity", prompt, self.short_new_tokens, [STOP_DONE], self.temperature)).strip()
        entity = output.split("\n\n")[4].strip().split("\n")[-1][len("Extracted entity: ("):][:-1].strip()
        if not entity or entity not in question:
            return entity
        start = question.find(entity)
        end = start + len(entity) - 1
        while end + 1 < len(question) and question[end + 1] == "." and end + 2 < len(question):
            space = question.find(" ", end + 3)
            end = len(question) - 1 if space == -1 else space - 1
        widened = question[start:end + 1].split("'")[0].replace("?", "")
        return widened if widened in question else entity

    def breakdown(self, question: str, subject: str, caller: Caller) -> list[str]:
        """mquake_utils.break_down_into_subquestions for one question: the relation phrases
        of the chain line the prompt opens ('"S->' plus the generation's first line). The
        release reads the last line of the new block, which is that line only when the model
        ends the block after it; the greedy Qwen readers go on in the same block ("Let's
        solve this step by step: 1."), and that line holds no relation."""
        prompt = (self.prompts["breakdown"] + f"Given this problem:\n{question}\n"
                  f"Extract relations in square parentheses into follows:\n\"{subject}->")
        generated = caller.complete("breakdown", prompt, self.max_new_tokens, [STOP_DONE], self.temperature)
        return chain_entities(prompt.split("\n")[-1] + generated.split("\n")[0])

    def subquestion(self, subject: str, phrase: str, caller: Caller) -> str:
        """mquake_utils.fetch_rel_subj2subq: the model writes the sub-question (the quoted
        text of its answer line; the phrase itself when it wrote none)."""
        prompt = (self.prompts["rel2subq"] + f"Given this relation: \"{phrase}\" and this subject: \"{subject}\",\n"
                  f"The corresponding question is")
        output = (prompt + caller.complete("subquestion", prompt, self.short_new_tokens, [STOP_BLOCK],
                                           self.temperature)).strip()
        try:
            return output.split("\n\n")[5].strip().split("\n")[1].split('"')[1]
        except IndexError:  # the release raises here and loses the whole run
            return phrase
