"""The evidence an arm hands the reader, and its packet form on disk.

Packets keep positions, size and a hash of the text rather than the text itself: the
history plus the positions rebuild it exactly, and packets stay small enough to commit.
"""
from __future__ import annotations

from dataclasses import dataclass, field
from typing import TYPE_CHECKING, Any, Iterable, Protocol

from cmc.records import History
from cmc.render import render
from common.errors import DataError
from common.io import sha256_text

if TYPE_CHECKING:
    from cmc.graph import Memory
    from cmc.records import Dataset, Question


@dataclass(frozen=True)
class Evidence:
    question_id: str
    arm: str
    positions: tuple[int, ...]
    text: str
    truncated: bool
    trace: dict[str, Any] = field(default_factory=dict)

    @property
    def chars(self) -> int:
        return len(self.text)

    def packet(self) -> dict[str, Any]:
        return {
            "question_id": self.question_id,
            "arm": self.arm,
            "positions": list(self.positions),
            "chars": self.chars,
            "sha256": sha256_text(self.text),
            "truncated": self.truncated,
            "trace": self.trace,
        }


def rebuild_text(history: History, packet: dict[str, Any]) -> str:
    """The exact evidence text of a packet, rebuilt from its history and positions and
    checked against the packet's hash (a packet with no characters is the empty context)."""
    text = "" if packet["chars"] == 0 else render(history, packet["positions"], None).text
    if sha256_text(text) != packet["sha256"]:
        raise DataError(
            f"evidence packet {packet['question_id']}/{packet['arm']}: rebuilt text does not match its sha256"
        )
    return text


class Arm(Protocol):
    """An evidence view: one question and the compiled memory in, one Evidence out. Every
    arm of arms/ (and every multi-call method) shares this signature."""

    name: str

    def select(self, question: "Question", memory: "Memory") -> Evidence: ...


def select_all(arm: Arm, dataset: "Dataset", memories: dict[str, "Memory"],
               questions: Iterable["Question"] | None = None) -> Iterable[Evidence]:
    """Evidence for every question (or the given ones), in dataset order."""
    for question in dataset.questions if questions is None else questions:
        yield arm.select(question, memories[question.history_id])
