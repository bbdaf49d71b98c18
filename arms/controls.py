"""Controls that perturb one factor of CMC's read at a time (paper 4.1, B.1, G).

- prior read + refresh: choose keys by traversing the constructed prior graph, then
  refresh each selected key to its current record (selection before resolution);
- stale closure: CMC's keys exactly, each with its previous differing value where one
  exists (version choice within fixed keys);
- disjoint random: current keys outside CMC's, same cardinality, token count matched as
  closely as a seeded swap search gets it (negative control), counted with the reader's
  own tokenizer when the reader has one (whitespace tokens otherwise);
- no context: the reader sees no evidence at all.
"""
from __future__ import annotations

import bisect
import random
from dataclasses import dataclass
from functools import cached_property
from typing import Any, Iterable, Sequence

from cmc.evidence import Evidence
from cmc.graph import Edge, Memory
from cmc.read import CMCArm, GraphRead, RenderingArm, edge_trace
from cmc.records import Question
from cmc.render import DEFAULT_BUDGET_CHARS
from cmc.traverse import traverse
from common.configurable import configurable
from common.io import canonical_json
from readers.models import ModelSource


@configurable
class PriorReadRefresh(GraphRead):
    def __init__(self, name: str = "prior_read_refresh", **kwargs: Any) -> None:
        super().__init__(name, **kwargs)

    def edges(self, anchors: tuple[str, ...], memory: Memory) -> tuple[list[Edge], dict[str, Any]]:
        prior = traverse(memory.prior, anchors, self.max_hops)
        refreshed = [memory.current.edges[e.key] for e, _ in prior]
        changed = sum(1 for (old, _), new in zip(prior, refreshed) if old.pos != new.pos)
        return refreshed, {"prior_edges": edge_trace(prior), "refreshed": changed}


@configurable
class StaleClosure(CMCArm):
    def __init__(self, name: str = "stale_closure", **kwargs: Any) -> None:
        super().__init__(name, **kwargs)

    def edges(self, anchors: tuple[str, ...], memory: Memory) -> tuple[list[Edge], dict[str, Any]]:
        selected = self.closure(anchors, memory)
        stale, substitutions = [], []
        for edge, _ in selected:
            previous = memory.previous_value(edge.key)
            stale.append(previous or edge)
            if previous is not None:
                substitutions.append([edge.subject, edge.relation, edge.pos, previous.pos])
        return stale, {"edges": edge_trace(selected), "substitutions": substitutions}


def record_tokens(memory: Memory, pos: int) -> int:
    """Reader-agnostic size of one rendered record: whitespace tokens of 'N. text'."""
    return len(memory.history.record(pos).line().split())


class ReaderTokens:
    """Sizes of rendered records ('N. text' and its newline) in a reader's own tokens: the
    paper matches the control's token count as the reader counts it. Records do not merge
    across the newline in byte-level BPE, so per-record counts add up to the evidence's."""

    def __init__(self, model: ModelSource) -> None:
        self.source = model

    @cached_property
    def tokenizer(self) -> Any:
        from transformers import AutoTokenizer

        return AutoTokenizer.from_pretrained(self.source.resolve())

    @property
    def name(self) -> str:
        return canonical_json(self.source.pin)

    def sizes(self, memory: Memory, positions: Sequence[int]) -> tuple[int, ...]:
        lines = [memory.history.record(pos).line() + "\n" for pos in positions]
        return tuple(len(ids) for ids in self.tokenizer(lines, add_special_tokens=False)["input_ids"]) if lines else ()


@dataclass(frozen=True)
class KeySizes:
    """Current edges in key order with their token sizes, sorted once per memory."""

    edges: tuple[Edge, ...]
    index: dict[tuple[str, str], int]
    sizes: tuple[int, ...]
    by_size: tuple[tuple[int, int], ...]  # (size, edge index), ascending


def build_key_sizes(memory: Memory, counter: ReaderTokens | None = None) -> KeySizes:
    edges = tuple(memory.current.edges.values())
    if counter is None:
        sizes = tuple(record_tokens(memory, e.pos) for e in edges)
    else:
        sizes = counter.sizes(memory, [e.pos for e in edges])
    return KeySizes(edges, {e.key: i for i, e in enumerate(edges)}, sizes, tuple(sorted((s, i) for i, s in enumerate(sizes))))


@configurable
class DisjointRandom(RenderingArm):
    """Current keys CMC did not select, as many as CMC selected, near CMC's token count
    (the reader's tokens when `tokenizer` names its model, else whitespace tokens)."""

    def __init__(
        self,
        reference: CMCArm,
        seed: int = 20260907,
        name: str = "disjoint_random",
        budget_chars: int | None = DEFAULT_BUDGET_CHARS,
        tokenizer: ModelSource | None = None,
    ) -> None:
        super().__init__(name, budget_chars)
        self.reference = reference
        self.seed = seed
        self.counter = ReaderTokens(tokenizer) if tokenizer is not None else None

    def select(self, question: Question, memory: Memory) -> Evidence:
        counter = self.counter
        name = "key_sizes" if counter is None else f"key_sizes:{counter.name}"
        keys = memory.derived(name, lambda m: build_key_sizes(m, counter))
        anchors = memory.anchors.anchors(question.text)
        taken = {keys.index[e.key] for e, _ in self.reference.closure(anchors, memory)}
        pool = [i for i in range(len(keys.edges)) if i not in taken]
        rng = random.Random(f"{self.seed}:{question.qid}")
        chosen = rng.sample(pool, min(len(taken), len(pool)))
        target = sum(keys.sizes[i] for i in taken)
        chosen = match_token_total(chosen, keys.sizes, keys.by_size, target, excluded=taken)
        positions = sorted(keys.edges[i].pos for i in chosen) + list(memory.unresolved)
        trace = {"anchors": list(anchors), "keys": len(chosen), "reference_keys": len(taken),
                 "target_tokens": target, "tokens": sum(keys.sizes[i] for i in chosen)}
        return self.finish(question, memory, positions, trace)


def match_token_total(
    chosen: list[int], sizes: Sequence[int], by_size: Iterable[tuple[int, int]], target: int, excluded: set[int]
) -> list[int]:
    """Swap chosen items for unchosen ones while that brings the size total closer to target.

    Deterministic given the seeded start: each pass visits chosen items in order and takes
    the unchosen size nearest the ideal replacement (smallest index among equals).
    """
    chosen = list(chosen)
    blocked = excluded | set(chosen)
    free = [pair for pair in by_size if pair[1] not in blocked]
    total = sum(sizes[i] for i in chosen)
    improved = True
    while improved and total != target:
        improved = False
        for slot, item in enumerate(chosen):
            gap = total - target
            want = sizes[item] - gap
            at = bisect.bisect_left(free, (want, -1))
            candidates = [free[j] for j in (at - 1, at) if 0 <= j < len(free)]
            if not candidates:
                continue
            size, new = min(candidates, key=lambda c: (abs(c[0] - want), c[1]))
            if abs(total - sizes[item] + size - target) < abs(gap):
                free.remove((size, new))
                bisect.insort(free, (sizes[item], item))
                chosen[slot] = new
                total += size - sizes[item]
                improved = True
                if total == target:
                    break
    return chosen


@configurable
class NoContext(RenderingArm):
    def __init__(self, name: str = "no_context") -> None:
        super().__init__(name, None)

    def select(self, question: Question, memory: Memory) -> Evidence:
        return Evidence(question.qid, self.name, (), "", False, {"truncated": False, "dropped": 0})
