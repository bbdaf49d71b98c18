"""Query-independent views: a whole graph state, or the raw history suffix."""
from __future__ import annotations

from dataclasses import replace
from typing import Literal

from cmc.evidence import Evidence
from cmc.graph import Memory
from cmc.read import RenderingArm, state_positions
from cmc.records import Question
from cmc.render import DEFAULT_BUDGET_CHARS
from common.configurable import configurable


@configurable
class StateView(RenderingArm):
    """Every current edge (latest state) or every constructed prior edge (stale state:
    the whole view rolled back one version), plus unresolved records. budget_chars=None
    gives the untruncated variant."""

    def __init__(
        self,
        name: str = "latest_state",
        graph: Literal["current", "prior"] = "current",
        budget_chars: int | None = DEFAULT_BUDGET_CHARS,
    ) -> None:
        super().__init__(name, budget_chars)
        if graph not in ("current", "prior"):
            raise ValueError(f"graph must be 'current' or 'prior', got {graph!r}")
        self.graph = graph

    def select(self, question: Question, memory: Memory) -> Evidence:
        graph = memory.current if self.graph == "current" else memory.prior
        view = memory.derived(
            f"state:{self.graph}:{self.budget_chars}",
            lambda m: self.finish(question, m, state_positions(graph, m), {"keys": len(graph)}),
        )
        return replace(view, question_id=question.qid, arm=self.name)


@configurable
class RawSuffix(RenderingArm):
    """The original history as written; the budget keeps its newest suffix."""

    def __init__(self, name: str = "raw_suffix", budget_chars: int | None = DEFAULT_BUDGET_CHARS) -> None:
        super().__init__(name, budget_chars)

    def select(self, question: Question, memory: Memory) -> Evidence:
        view = memory.derived(
            f"raw:{self.budget_chars}", lambda m: self.finish(question, m, (r.pos for r in m.history), {})
        )
        return replace(view, question_id=question.qid, arm=self.name)
