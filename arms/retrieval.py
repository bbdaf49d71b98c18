"""Ranking baselines over the same current facts CMC reads (paper 4.1, D.2, E, Table 9).

Documents are current edges; each is indexed by its record text, its subject and object,
and its relation name. Ranking ties go to the newer record. Every view restores source
order before rendering and keeps the unresolved records, like the graph views.
"""
from __future__ import annotations

from dataclasses import dataclass
from pathlib import Path
from typing import Any

import numpy as np

from arms.bm25 import BM25Okapi
from arms.embedders import cached_vectors
from arms.ranking import rank
from cmc.evidence import Evidence
from cmc.graph import Edge, Memory
from cmc.normalize import key_tokens
from cmc.read import CMCArm, RenderingArm
from cmc.records import Question
from cmc.render import DEFAULT_BUDGET_CHARS, header_chars, record_chars
from common.configurable import configurable


@dataclass(frozen=True)
class FactIndex:
    facts: tuple[Edge, ...]
    positions: np.ndarray
    bm25: BM25Okapi


def fact_tokens(memory: Memory, edge: Edge) -> list[str]:
    text = memory.history.record(edge.pos).text
    return [*key_tokens(text), *edge.subject.split(), *edge.object.split(), *key_tokens(edge.relation)]


def build_fact_index(memory: Memory) -> FactIndex:
    facts = tuple(memory.current.edges.values())
    corpus = [fact_tokens(memory, e) for e in facts]
    return FactIndex(facts, np.array([e.pos for e in facts], dtype=np.int64), BM25Okapi(corpus))


@configurable
class FactBM25(RenderingArm):
    """BM25 top-k current facts for the question."""

    def __init__(self, name: str = "fact_bm25", top_k: int = 100, budget_chars: int | None = DEFAULT_BUDGET_CHARS) -> None:
        super().__init__(name, budget_chars)
        self.top_k = top_k

    def ranking(self, question: Question, memory: Memory) -> list[Edge]:
        index = memory.derived("fact_bm25", build_fact_index)
        scores = index.bm25.get_scores(key_tokens(question.text))
        return [index.facts[i] for i in rank(scores, index.positions, self.top_k)]

    def select(self, question: Question, memory: Memory) -> Evidence:
        ranked = self.ranking(question, memory)
        trace: dict[str, Any] = {"ranked": [e.pos for e in ranked]}
        return self.finish(question, memory, [e.pos for e in ranked] + list(memory.unresolved), trace)


@configurable
class FactBM25Matched(FactBM25):
    """Whole facts from the BM25 ranking, first-fit in rank order, packed up to the
    character size of the reference (CMC) evidence for the same question."""

    def __init__(self, reference: CMCArm, name: str = "fact_bm25_matched", top_k: int = 100,
                 budget_chars: int | None = DEFAULT_BUDGET_CHARS) -> None:
        super().__init__(name, top_k, budget_chars)
        self.reference = reference

    def select(self, question: Question, memory: Memory) -> Evidence:
        target = self.reference.select(question, memory).chars
        history = memory.history
        used = header_chars(history) + sum(record_chars(history, p) for p in memory.unresolved)
        packed = []
        for edge in self.ranking(question, memory):
            size = record_chars(history, edge.pos)
            if used + size <= target:
                packed.append(edge.pos)
                used += size
        trace = {"target_chars": target, "packed": packed}
        return self.finish(question, memory, packed + list(memory.unresolved), trace)



@configurable
class DenseFacts(RenderingArm):
    """Dense top-k current facts by cosine similarity of record text and question (paper
    Table 9). Fact embeddings are computed once per (embedder, fact set) and kept on disk."""

    def __init__(self, embedder: Any, cache_dir: str, name: str = "dense", top_k: int = 100,
                 budget_chars: int | None = DEFAULT_BUDGET_CHARS) -> None:
        super().__init__(name, budget_chars)
        self.embedder, self.cache_dir, self.top_k = embedder, Path(cache_dir), top_k

    def _index(self, memory: Memory) -> tuple[tuple[Edge, ...], np.ndarray, np.ndarray]:
        facts = tuple(memory.current.edges.values())
        vectors = cached_vectors(self.embedder, [memory.history.record(e.pos).text for e in facts], self.cache_dir)
        return facts, vectors, np.array([e.pos for e in facts], dtype=np.int64)

    def select(self, question: Question, memory: Memory) -> Evidence:
        facts, vectors, positions = memory.derived(f"dense:{self.embedder.name}", self._index)
        top: list[int] = []
        if len(facts):
            scores = vectors @ self.embedder.encode([question.text])[0]
            top = rank(scores, positions, self.top_k)
        ranked = [facts[i] for i in top]
        # the scores beside the ranking: a CPU's kernels move them in the 6th decimal, which can
        # swap near-tied neighbours; a re-check accepts exactly such swaps (harness/recheck.py)
        trace: dict[str, Any] = {"ranked": [e.pos for e in ranked], "scores": [round(float(scores[i]), 6) for i in top]}
        return self.finish(question, memory, [e.pos for e in ranked] + list(memory.unresolved), trace)
