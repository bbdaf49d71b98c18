"""The version-resolved fact bank the multi-call method ports read (paper B.2): one fact per
current (subject, relation) key, each its original record. The released G-Walk and MeLLo
need one object per subject-relation key; handing them the bank holds version choice fixed,
so a comparison with CMC isolates the read, not update resolution. Nothing here reads a
question's gold answer or path."""
from __future__ import annotations

from dataclasses import dataclass
from functools import cached_property
from pathlib import Path
from typing import Any

import numpy as np

from arms.embedders import cached_vectors
from arms.ranking import rank
from cmc.graph import Key, Memory
from cmc.normalize import entity_key


@dataclass(frozen=True)
class BankFact:
    pos: int
    subject: str  # as written in the record
    relation: str
    object: str  # as written in the record
    text: str  # the record's original text

    @property
    def sentence(self) -> str:
        """The record text without its final period (the released prompts add their own)."""
        return self.text.strip().removesuffix(".")


class FactBank:
    """Current facts in source order, looked up by (subject key, relation)."""

    def __init__(self, memory: Memory) -> None:
        current = memory.current.edges
        self.by_key: dict[Key, BankFact] = {}
        for record in memory.extraction.records:
            for triple in record.triples:
                key = (entity_key(triple.subject), triple.relation)
                edge = current.get(key)
                if edge is not None and edge.pos == triple.pos and key not in self.by_key:  # the key's current record
                    self.by_key[key] = BankFact(triple.pos, triple.subject, triple.relation, triple.object,
                                                memory.history.record(triple.pos).text)
        self.facts: tuple[BankFact, ...] = tuple(sorted(self.by_key.values(), key=lambda f: f.pos))

    def __len__(self) -> int:
        return len(self.facts)

    def lookup(self, subject: str, relation: str) -> BankFact | None:
        return self.by_key.get((entity_key(subject), relation))

    @cached_property
    def subject_keys(self) -> frozenset[str]:
        return frozenset(key for key, _ in self.by_key)


def fact_bank(memory: Memory) -> FactBank:
    """The memory's bank, built once and shared by every method and question."""
    return memory.derived("fact_bank", FactBank)


class DenseBankRetriever:
    """Top-1 bank fact for a query by embedding similarity (MeLLo's retriever). The release
    uses Contriever, whose weights are not available offline; any configured embedder
    serves (default: the offline MiniLM). Ties go to the newer record."""

    def __init__(self, embedder: Any, cache_dir: str | Path) -> None:
        self.embedder, self.cache_dir = embedder, Path(cache_dir)

    def vectors(self, memory: Memory) -> np.ndarray:
        bank = fact_bank(memory)
        key = f"bank_vectors:{self.embedder.name}"
        return memory.derived(key, lambda m: cached_vectors(self.embedder, [f.text for f in bank.facts], self.cache_dir))

    def top1(self, query: str, memory: Memory) -> tuple[BankFact | None, float]:
        bank = fact_bank(memory)
        if not len(bank):
            return None, float("nan")
        scores = self.vectors(memory) @ self.embedder.encode([query])[0]
        best = rank(scores, np.array([f.pos for f in bank.facts], dtype=np.int64), 1)[0]
        return bank.facts[best], float(scores[best])
