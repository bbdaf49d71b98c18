"""The compiled memory: ordered replay into a latest-value graph plus version chains.

Built once per (history, frontend) and shared, read-only, by every arm and question.
"""
from __future__ import annotations

from dataclasses import dataclass
from functools import cached_property
from typing import Callable, Iterable, TypeVar

from cmc.anchor import AnchorIndex
from cmc.extraction import Extraction
from cmc.normalize import entity_key
from cmc.records import History

Key = tuple[str, str]  # (normalized subject, relation)
T = TypeVar("T")


@dataclass(frozen=True, slots=True)
class Edge:
    """One assertion on the entity-key graph; pos points back to its original record."""

    subject: str
    relation: str
    object: str
    pos: int

    @property
    def key(self) -> Key:
        return (self.subject, self.relation)


class Graph:
    """One value per (subject, relation) with an outgoing-edge index for traversal."""

    def __init__(self, edges: Iterable[Edge]) -> None:
        self.edges: dict[Key, Edge] = {}
        self.out: dict[str, list[Edge]] = {}
        for edge in edges:
            if edge.key in self.edges:
                raise ValueError(f"graph given two edges for key {edge.key}")
            self.edges[edge.key] = edge
            self.out.setdefault(edge.subject, []).append(edge)

    def __len__(self) -> int:
        return len(self.edges)


class Memory:
    """CurrentGraph + VersionChains + unresolved records + the History itself."""

    def __init__(self, history: History, extraction: Extraction) -> None:
        self.history = history
        self.extraction = extraction
        chains: dict[Key, list[Edge]] = {}
        latest: dict[Key, Edge] = {}
        for triple in extraction.triples():  # source order: each occurrence replaces the key's edge
            edge = Edge(entity_key(triple.subject), triple.relation, entity_key(triple.object), triple.pos)
            chains.setdefault(edge.key, []).append(edge)
            latest[edge.key] = edge
        self.chains: dict[Key, tuple[Edge, ...]] = {k: tuple(v) for k, v in chains.items()}
        self.current = Graph(latest.values())
        self.unresolved: tuple[int, ...] = tuple(extraction.positions("unresolved"))
        self.anchors = AnchorIndex(self.current.out)
        self._derived: dict[str, object] = {}

    @cached_property
    def prior(self) -> Graph:
        """Each key's most recent earlier value that differs from its current value
        (the current edge where none exists): a constructed prior graph, not a snapshot."""
        return Graph(self.previous_value(key) or chain[-1] for key, chain in self.chains.items())

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


def compile_memory(history: History, extraction: Extraction) -> Memory:
    return Memory(history, extraction)
