"""Two views of your own, plugged into cmc-harness by config alone (docs/own_method.md):
an arm (one reader call per question over the evidence it selects) and a multi-call
method (any number of reader calls; each one cached, journaled, resumable, replayable).

Nothing here is imported by the project: the configs in conf/arm/ name these classes,
$CMC_EXTRA_TARGETS allows them, and `hydra.searchpath` finds the configs.
"""
from __future__ import annotations

from arms.multicall import Caller, MethodAnswer, prompt_hash
from cmc.evidence import Evidence
from cmc.graph import Memory
from cmc.normalize import entity_key, key_tokens
from cmc.read import RenderingArm
from cmc.records import Question
from cmc.render import render
from common.prompt import load_prompt

ENTITY_PROMPT = ("Name the entity the question starts from, exactly as written in it.\n"
                 "Question: Who is the spouse of the author of Hamlet?\nEntity: Hamlet\n"
                 "Question: {question}\nEntity:")


class KeywordFacts(RenderingArm):
    """An arm: the current facts whose record shares a content word with the question."""

    def __init__(self, name: str = "keyword_facts", min_chars: int = 4, budget_chars: int | None = 60_000) -> None:
        super().__init__(name, budget_chars)
        self.min_chars = min_chars

    def select(self, question: Question, memory: Memory) -> Evidence:
        words = {w for w in key_tokens(question.text) if len(w) >= self.min_chars}
        positions = [edge.pos for edge in memory.current.edges.values()
                     if words & set(key_tokens(memory.history.record(edge.pos).text))]
        return self.finish(question, memory, positions, {"words": sorted(words)})


class AskThenRead:
    """A two-call method: ask the reader where the question starts (a completion), then
    answer it over the current facts about that entity (a chat call in the reader prompt's
    shape, as every arm's)."""

    def __init__(self, prompt: str, name: str = "ask_then_read", max_new_tokens: int = 16) -> None:
        self.name, self.max_new_tokens = name, max_new_tokens
        self.prompt = load_prompt(prompt)
        self.prompt_version = prompt_hash(name, ENTITY_PROMPT)  # what shapes the text it sends

    def answer(self, question: Question, memory: Memory, caller: Caller) -> MethodAnswer:
        said = caller.complete("entity", ENTITY_PROMPT.format(question=question.text), self.max_new_tokens, ["\n"])
        entity = said.strip()
        facts = sorted(edge.pos for edge in memory.current.out.get(entity_key(entity), []))
        evidence = render(memory.history, facts, None).text if facts else ""
        answer = caller.chat("answer", self.prompt, evidence, question.text)
        return MethodAnswer(answer, tuple(facts), {"entity": entity, "facts": len(facts)})
