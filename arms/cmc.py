"""CMC's read: anchor, traverse the current graph, render the supporting original records.

GraphRead holds the part every closure-style arm shares (anchors, fallback, unresolved
records); CMC and the two version controls differ only in which edges they return.
"""
from __future__ import annotations

from typing import Any

from arms.base import Fallback, RenderingArm, edge_trace, fallback_positions
from cmc.evidence import Evidence
from cmc.graph import Edge, Memory
from cmc.records import Question
from cmc.render import DEFAULT_BUDGET_CHARS
from cmc.traverse import DEFAULT_MAX_HOPS, traverse


class GraphRead(RenderingArm):
    def __init__(
        self,
        name: str,
        max_hops: int = DEFAULT_MAX_HOPS,
        budget_chars: int | None = DEFAULT_BUDGET_CHARS,
        empty_fallback: Fallback = "latest_state",
    ) -> None:
        super().__init__(name, budget_chars)
        if not isinstance(max_hops, int) or isinstance(max_hops, bool) or max_hops < 1:
            raise ValueError(f"max_hops must be an integer >= 1, got {max_hops!r}")
        self.max_hops = max_hops
        self.empty_fallback = empty_fallback

    def edges(self, anchors: tuple[str, ...], memory: Memory) -> tuple[list[Edge], dict[str, Any]]:
        raise NotImplementedError

    def select(self, question: Question, memory: Memory) -> Evidence:
        anchors = memory.anchors.anchors(question.text)
        edges, trace = self.edges(anchors, memory)
        trace = {"anchors": list(anchors), **trace}
        if edges:
            positions = [e.pos for e in edges] + list(memory.unresolved)
            trace["fallback"] = None
        else:
            positions = fallback_positions(memory, self.empty_fallback)
            trace["fallback"] = "history" if memory.unresolved else self.empty_fallback
        return self.finish(question, memory, positions, trace)


class CMCArm(GraphRead):
    """Resolve first (the current graph), then traverse it up to max_hops."""

    def __init__(self, name: str = "cmc", **kwargs: Any) -> None:
        super().__init__(name, **kwargs)

    def closure(self, anchors: tuple[str, ...], memory: Memory) -> list[tuple[Edge, int]]:
        return traverse(memory.current, anchors, self.max_hops)

    def edges(self, anchors: tuple[str, ...], memory: Memory) -> tuple[list[Edge], dict[str, Any]]:
        selected = self.closure(anchors, memory)
        return [e for e, _ in selected], {"edges": edge_trace(selected)}
