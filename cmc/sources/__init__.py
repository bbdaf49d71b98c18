"""Dataset adapters: histories and questions for the evidence stage, labels kept apart."""
from __future__ import annotations

from dataclasses import dataclass
from typing import Mapping

from cmc.records import History, Question


@dataclass(frozen=True)
class Dataset:
    name: str
    histories: Mapping[str, History]
    questions: tuple[Question, ...]

    def questions_of(self, history_id: str) -> list[Question]:
        return [q for q in self.questions if q.history_id == history_id]
