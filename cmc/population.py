"""Which questions a run covers. A fixed, documented rule, so every view of an experiment
sees the same questions."""
from __future__ import annotations

from typing import Sequence

from cmc.records import Question


class Population:
    """All questions, optionally only some history lengths, and at most the first `per_cell`
    of each (hop, length) cell in dataset order (the released qa_pair_ids order)."""

    def __init__(self, name: str = "all", per_cell: int | None = None, lengths: Sequence[str] | None = None) -> None:
        if per_cell is not None and per_cell < 1:
            raise ValueError(f"per_cell must be >= 1 or null, got {per_cell}")
        self.name, self.per_cell = name, per_cell
        self.lengths = None if lengths is None else tuple(lengths)

    def select(self, questions: Sequence[Question]) -> list[Question]:
        if self.lengths is not None:
            known = {q.length for q in questions}
            if unknown := set(self.lengths) - known:
                raise ValueError(f"population {self.name!r}: unknown lengths {sorted(unknown)}; have {sorted(known)}")
            questions = [q for q in questions if q.length in self.lengths]
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
