"""The compiled memory: ordered replay into a latest-value graph plus version chains.

Built once per (history, frontend) and shared, read-only, by every arm and question.
"""
from __future__ import annotations

import gc
from contextlib import contextmanager
from functools import cached_property
from typing import TYPE_CHECKING, Callable, Iterator, NamedTuple, TypeVar

from cmc.anchor import AnchorIndex
from cmc.extraction import Extraction
from cmc.normalize import entity_key
from cmc.records import History

if TYPE_CHECKING:
    from cmc.frontends import Frontend
    from cmc.records import Dataset

Key = tuple[str, str]  # (normalized subject, relation)
T = TypeVar("T")


class Edge(NamedTuple):
    """One assertion on the entity-key graph; pos points back to its original record.

    A NamedTuple rather than a dataclass: compile creates one per assertion, and tuple
    construction is several times cheaper than a frozen dataclass's __init__."""

    subject: str
    relation: str
    object: str
    pos: int

    @property
    def key(self) -> Key:
        return (self.subject, self.relation)


class Graph:
    """One value per (subject, relation) with an outgoing-edge index for traversal.

    Built from a key -> edge mapping, so one value per key holds by construction."""

    def __init__(self, edges: dict[Key, Edge]) -> None:
        self.edges = edges
        self.out: dict[str, list[Edge]] = {}
        out_of = self.out.get
        for edge in edges.values():
            out = out_of(edge[0])
            if out is None:
                self.out[edge[0]] = [edge]
            else:
                out.append(edge)

    def __len__(self) -> int:
        return len(self.edges)


class Memory:
    """CurrentGraph + VersionChains + unresolved records + the History itself."""

    def __init__(self, history: History, extraction: Extraction) -> None:
        self.history = history
        self.extraction = extraction
        with _gc_paused():
            self.chains = _replay(extraction)
            self.current = Graph({key: chain[-1] for key, chain in self.chains.items()})
            self.anchors = AnchorIndex(self.current.out)
        self.unresolved: tuple[int, ...] = tuple(extraction.positions("unresolved"))
        self._derived: dict[str, object] = {}

    @cached_property
    def prior(self) -> Graph:
        """Each key's most recent earlier value that differs from its current value
        (the current edge where none exists): a constructed prior graph, not a snapshot."""
        return Graph({key: self.previous_value(key) or chain[-1] for key, chain in self.chains.items()})

    chains: dict[Key, list[Edge]]
    """Every assertion per key in source order (read-only by convention; the last is current)."""

    def previous_value(self, key: Key) -> Edge | None:
        chain = self.chains[key]
        current = chain[-1].object
        for edge in reversed(chain[:-1]):
            if edge.object != current:
                return edge
        return None

    def derived(self, name: str, build: Callable[["Memory"], T]) -> T:
        """Per-memory cache for arm indexes (BM25, embeddings) built on first use."""
        if name not in self._derived:
            self._derived[name] = build(self)
        return self._derived[name]  # type: ignore[return-value]


def _replay(extraction: Extraction) -> dict[Key, list[Edge]]:
    """Ordered replay: append each assertion to its key's chain, in source order.

    The hot loop of compile: names are bound locally, each entity string is normalized
    once per compile (a local memo in front of entity_key), and edges are built with
    tuple.__new__, a third of the cost of the NamedTuple's Python-level constructor."""
    keys: dict[str, str] = {}
    chains: dict[Key, list[Edge]] = {}
    memo, chain_of, new = keys.get, chains.get, tuple.__new__
    for record in extraction.records:
        for t in record.triples:
            subject, obj = memo(t.subject), memo(t.object)
            if subject is None:
                subject = keys[t.subject] = entity_key(t.subject)
            if obj is None:
                obj = keys[t.object] = entity_key(t.object)
            relation = t.relation
            key = (subject, relation)
            edge = new(Edge, (subject, relation, obj, t.pos))
            chain = chain_of(key)
            if chain is None:
                chains[key] = [edge]
            else:
                chain.append(edge)
    return chains


@contextmanager
def _gc_paused() -> Iterator[None]:
    """Compile allocates tens of thousands of small objects in one burst; cyclic GC passes
    over the (large, acyclic) heap meanwhile cost more than the build itself."""
    enabled = gc.isenabled()
    gc.disable()
    try:
        yield
    finally:
        if enabled:
            gc.enable()


def compile_memory(history: History, extraction: Extraction) -> Memory:
    return Memory(history, extraction)


def build_memories(dataset: "Dataset", frontend: "Frontend") -> dict[str, Memory]:
    """Compile each history once; every arm and question shares the result."""
    frontend.prepare(list(dataset.histories.values()))
    return {hid: compile_memory(h, frontend.extract(h)) for hid, h in dataset.histories.items()}
