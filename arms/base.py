"""What every arm shares: the budgeted render, the empty-selection fallback, the trace."""
from __future__ import annotations

from typing import Any, Iterable, Literal

import numpy as np

from cmc.evidence import Evidence
from cmc.graph import Edge, Graph, Memory
from cmc.records import Question
from cmc.render import DEFAULT_BUDGET_CHARS, render

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


def rank(scores: np.ndarray, positions: np.ndarray, top_k: int) -> list[int]:
    """Indices of the top_k items: score descending (rounded to 1e-9 so float summation
    order cannot reorder ties), then newer source position first."""
    order = np.lexsort((-positions, -np.round(scores, 9)))
    return order[:top_k].tolist()
