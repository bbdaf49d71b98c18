"""MeLLo (Zhong et al., 2023), as released in MQuAKE-Remastered `pipeline/mello/eval_loop.py`,
ported to the fact bank with the same frozen reader (paper B.2).

Per question, up to `max_rounds` calls on one growing text: the model writes a
sub-question and a tentative answer and stops at "Retrieved fact:"; the bank fact most
similar to the sub-question line is appended; the next call judges whether it contradicts
the tentative answer and goes on, until a final answer line. Changes from the release,
all forced by the setting: the bank is the version-resolved current facts of the history
(one per key, original record text), not the case's edits; the release's gold-path filter
(`get_edits_without_contamination`) is dropped; the retriever is a configured embedder
(Contriever is not available offline); decoding is greedy by default.
"""
from __future__ import annotations

from typing import Any

from arms.bank import DenseBankRetriever
from arms.multicall import Caller, MethodAnswer, prompt_hash
from arms.released import STOP_FACT, drop_extra_blocks, final_answer, load_prompt_file
from cmc.graph import Memory
from cmc.records import Question
from common.configurable import configurable

RETRIEVED = "Retrieved fact:"


@configurable
class MeLLo:
    """The MeLLo loop over the bank. `max_new_tokens` is the release's generate_length."""

    def __init__(self, embedder: Any, cache_dir: str, prompts_dir: str, name: str = "mello", max_rounds: int = 4,
                 max_new_tokens: int = 50, temperature: float = 0.0, question_newline: bool = False) -> None:
        self.name, self.max_rounds, self.max_new_tokens, self.temperature = name, max_rounds, max_new_tokens, temperature
        self.question_newline = question_newline
        self.task_prompt = load_prompt_file(prompts_dir, "MeLLo-prompt.txt")
        self.retriever = DenseBankRetriever(embedder, cache_dir)
        self.prompt_version = prompt_hash("mello", self.task_prompt, embedder.pin, question_newline)

    def answer(self, question: Question, memory: Memory, caller: Caller) -> MethodAnswer:
        text = self.task_prompt + "\n\nQuestion: " + question.text + ("\n" if self.question_newline else "")
        rounds: list[dict[str, Any]] = []
        answer, outcome = None, "rounds_exhausted"
        for _ in range(self.max_rounds):
            text = (text + caller.complete("answer", text, self.max_new_tokens, [STOP_FACT], self.temperature)).strip()
            if text.split("\n")[-1] == RETRIEVED:
                text = text[:-len("\n" + RETRIEVED)]
            text = drop_extra_blocks(text)
            if (answer := final_answer(text, self.task_prompt)) is not None:
                outcome = "final_answer"
                break
            lines = text.strip().split("\n")
            if len(lines) < 2 or not lines[-2].startswith("Subquestion: "):
                outcome = "no_subquestion"  # the release's "failed case"
                break
            fact, score = self.retriever.top1(lines[-2], memory)
            fact_text = fact.text if fact is not None else "No relevant fact."
            rounds.append({"subquestion": lines[-2][len("Subquestion: "):], "tentative": lines[-1],
                           "fact_pos": fact.pos if fact is not None else None, "score": round(score, 6)})
            text = text + "\n" + RETRIEVED + " " + fact_text + "\n"
            if (answer := final_answer(text, self.task_prompt)) is not None:
                outcome = "final_answer"
                break
        trace = {"outcome": outcome, "rounds": rounds, "chain": text[len(self.task_prompt):].strip()}
        return MethodAnswer(answer, tuple(r["fact_pos"] for r in rounds if r["fact_pos"] is not None), trace)
