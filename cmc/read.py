"""CMC's read: anchor the question, traverse the current graph, render the supporting
original records under one budget, with the empty-selection fallback.

`RenderingArm` is what every evidence view shares (the budgeted render, the fallback, the
trace); `GraphRead` the part every closure-style view shares (anchors, fallback, unresolved
records); CMC and the two version controls (arms/controls.py) differ only in which edges
they return.
"""
from __future__ import annotations

from typing import Any, Iterable, Literal

from cmc.evidence import Evidence
from cmc.graph import Edge, Graph, Memory
from cmc.records import Question
from cmc.render import DEFAULT_BUDGET_CHARS, render
from cmc.traverse import DEFAULT_MAX_HOPS, traverse
from common.configurable import configurable

Fallback = Literal["history", "latest_state"]


class RenderingArm:
    """Base for arms that pick record positions and render them under one budget."""

    def __init__(self, name: str, budget_chars: int | None = DEFAULT_BUDGET_CHARS) -> None:
        if budget_chars is not None and (not isinstance(budget_chars, int) or isinstance(budget_chars, bool)
                                         or budget_chars < 1):
            raise ValueError(f"budget_chars must be a positive integer or null, got {budget_chars!r}")
        self.name = name
        self.budget_chars = budget_chars

    def finish(self, question: Question, memory: Memory, positions: Iterable[int], trace: dict[str, Any]) -> Evidence:
        rendered = render(memory.history, positions, self.budget_chars)
        trace = {**trace, "truncated": rendered.truncated, "dropped": rendered.dropped}
        return Evidence(question.qid, self.name, rendered.positions, rendered.text, rendered.truncated, trace)


def state_positions(graph: Graph, memory: Memory) -> list[int]:
    """Every edge of a whole-graph view plus the unresolved records."""
    return [edge.pos for edge in graph.edges.values()] + list(memory.unresolved)


def fallback_positions(memory: Memory, mode: Fallback) -> list[int]:
    """Empty selection: the original history, or the latest state when parsing was complete.

    Incomplete parsing always falls back to the history, since unparsed records may hold
    the answer in a form the graph cannot reach (paper appendix B.1).
    """
    if mode == "history" or memory.unresolved:
        return [record.pos for record in memory.history]
    if mode == "latest_state":
        return state_positions(memory.current, memory)
    raise ValueError(f"unknown empty_fallback {mode!r}; choose 'history' or 'latest_state'")


def edge_trace(edges: Iterable[tuple[Edge, int]]) -> list[list[Any]]:
    return [[e.subject, e.relation, e.object, e.pos, depth] for e, depth in edges]


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


@configurable
class CMCArm(GraphRead):
    """Resolve first (the current graph), then traverse it up to max_hops."""

    def __init__(self, name: str = "cmc", **kwargs: Any) -> None:
        super().__init__(name, **kwargs)

    def closure(self, anchors: tuple[str, ...], memory: Memory) -> list[tuple[Edge, int]]:
        return traverse(memory.current, anchors, self.max_hops)

    def edges(self, anchors: tuple[str, ...], memory: Memory) -> tuple[list[Edge], dict[str, Any]]:
        selected = self.closure(anchors, memory)
        return [e for e, _ in selected], {"edges": edge_trace(selected)}
