"""The served extractor the LLM frontends are tested against: it answers every extraction
call with the grammar frontend's parse of each record, plus scripted mistakes, and the
alignment call by mapping each `_alt` name back. The grammar parse is the reference a loop
must reproduce: what it adds or loses is then exactly what the mistakes should cause."""
from __future__ import annotations

import json
import re
from pathlib import Path
from typing import TypeVar

from cmc.frontends.grammar import GrammarFrontend
from cmc.frontends.llm import LLMFrontend
from generation.extractor_calls import ExtractorCalls
from readers.openai_api import OpenAIReader
from readers.serve import Completion
from tests.conftest import TEMPLATES

F = TypeVar("F")


class GrammarOracle:
    """A chat backend that extracts like the grammar frontend and makes scripted mistakes
    (statements are numbered 1.. in the corpus, as the extractor sees them).

    - `renamed`: statements after `renamed_after` name this relation `<relation>_alt` in a
      batch answer (a repair names it right), so only alignment or a review can bring it back.
    - `conflicted`: statements at even numbers name this relation `<relation>_x`, in every
      answer, repairs included: the extractor's own inconsistency, which nothing fixes.
    - `misquoted`: the batch answer paraphrases this statement's subject (rejected); the
      repair call, told why, gets it right. A tuple names several.
    - `hopeless`: this statement is never answered, in its batch or on repair. A tuple names several.
    - `doubled`: this statement gets a second object for its slot (its first word), which
      passes validation but must leave it unresolved.
    - `turned`: this statement's subject and object come swapped, in every answer (a small
      model's habit of naming the person first). A tuple names several.
    - `crowded`: this statement is answered only in a call that asks it alone (a small model
      that skips a line of a batch, in the batch and in a batched repair). A tuple names several.
    Replies come in a code fence with chatter after it, braces included. `users` keeps every
    user message received (what the extractor was shown).
    """

    model_id = "grammar-oracle"

    def __init__(self, renamed: str = "", renamed_after: int = 0, conflicted: str = "",
                 misquoted: int | tuple[int, ...] = 0, hopeless: int | tuple[int, ...] = 0, doubled: int = 0,
                 turned: int | tuple[int, ...] = 0, crowded: int | tuple[int, ...] = 0) -> None:
        self.grammar = GrammarFrontend(str(TEMPLATES))
        self.renamed, self.renamed_after, self.conflicted = renamed, renamed_after, conflicted
        self.misquoted, self.hopeless, self.doubled, self.turned = misquoted, hopeless, doubled, turned
        self.crowded = crowded
        self.align_finish = "stop"
        self.calls: list[str] = []
        self.users: list[str] = []

    def complete(self, messages, max_tokens, chat_template_kwargs=None) -> Completion:
        system, user = messages[0]["content"], messages[-1]["content"]
        self.users.append(user)
        if system.startswith("You merge relation names"):
            self.calls.append("align")
            names = re.findall(r"^\d+\. ([a-z0-9_]+): ", user, re.MULTILINE)
            text = json.dumps({"same": {n: n.removesuffix("_alt") for n in names if n.endswith("_alt")}})
            return Completion(text, self.align_finish, len(user), len(text))
        records = [(int(pos), text) for pos, text in re.findall(r"^(\d+)\. (.*)$", user, re.MULTILINE)]
        repair = "was rejected" in user
        self.calls.append("repair" if repair else "batch")
        entries = [self._entry(pos, text, repair) for pos, text in records
                   if not named(pos, self.hopeless) and not (named(pos, self.crowded) and len(records) > 1)]
        if "Write one line for every record" in system:  # reply_format: lines
            text = "Here are the lines:\n" + "\n".join(lines_of(e) for e in entries) + "\n(all checked)"
        else:
            text = "```json\n" + json.dumps({"records": entries}) + "\n```\n(all {} checked)"
        return Completion(text, "stop", len(user), len(text))

    def _entry(self, pos: int, text: str, repair: bool) -> dict:
        parsed = self.grammar.parse(pos, text)
        triples = [[t.subject, t.relation, t.object] for t in parsed.triples]
        for triple in triples:
            if triple[1] == self.renamed and pos > self.renamed_after and not repair:
                triple[1] += "_alt"
            if triple[1] == self.conflicted and pos % 2 == 0:
                triple[1] += "_x"
            if named(pos, self.misquoted) and not repair:
                triple[0] = f"the famous {triple[0]}"
            if named(pos, self.turned):
                triple[0], triple[2] = triple[2], triple[0]
        if pos == self.doubled:
            triples.append([triples[0][0], triples[0][1], text.split()[0]])
        return {"id": pos, "status": parsed.status, "triples": triples}


def named(pos: int, which: int | tuple[int, ...]) -> bool:
    return pos in which if isinstance(which, tuple) else pos == which


def lines_of(entry: dict) -> str:
    """A JSON entry as the compact format's lines: one per triple, or the status alone."""
    if entry["status"] != "facts":
        return f"{entry['id']} | {entry['status']}"
    return "\n".join(f"{entry['id']} | {' | '.join(triple)}" for triple in entry["triples"])


def served_extractor(url: str, max_new_tokens: int = 2048) -> OpenAIReader:
    """The extractor reader for a served oracle (one request at a time, quick retries)."""
    return OpenAIReader(name="oracle", base_url=url, model="grammar-oracle", max_new_tokens=max_new_tokens,
                        timeout_s=30.0, max_retries=1, backoff_s=0.01, max_backoff_s=0.05, concurrency=1)


def work_dirs(tmp: Path) -> dict[str, str]:
    return {"cache_dir": str(tmp / "cache"), "extractions_dir": str(tmp / "extractions")}


def with_generation(frontend: F) -> F:
    """An LLM frontend handed the generation service, as the stage driver hands it
    (harness.runs.build_frontend); a grammar frontend as it is."""
    if isinstance(frontend, LLMFrontend):
        frontend.use_generation(ExtractorCalls)
    return frontend
