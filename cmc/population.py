"""Which questions a run covers. A fixed, documented rule, so every view of an experiment
sees the same questions."""
from __future__ import annotations

from typing import Sequence

from cmc.records import Question


class Population:
    """All questions, or the first `per_cell` of each (hop, length) cell in dataset order
    (the released qa_pair_ids order), which keeps the cells balanced."""

    def __init__(self, name: str = "all", per_cell: int | None = None) -> None:
        if per_cell is not None and per_cell < 1:
            raise ValueError(f"per_cell must be >= 1 or null, got {per_cell}")
        self.name, self.per_cell = name, per_cell

    def select(self, questions: Sequence[Question]) -> list[Question]:
        if self.per_cell is None:
            return list(questions)
        taken: dict[tuple[str, str], int] = {}
        chosen = []
        for question in questions:
            cell = (question.hop, question.length)
            if taken.get(cell, 0) < self.per_cell:
                taken[cell] = taken.get(cell, 0) + 1
                chosen.append(question)
        return chosen
