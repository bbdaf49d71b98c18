"""Source frontends: turn a History into a validated Extraction before any question."""
from __future__ import annotations

from typing import Protocol, Sequence

from cmc.extraction import Extraction
from cmc.records import History


class Frontend(Protocol):
    name: str

    @property
    def frontend_id(self) -> str:
        """Name plus a fingerprint of everything that changes its output."""

    def prepare(self, histories: Sequence[History]) -> None:
        """See every history before any is extracted: a frontend that reads each unique
        statement once (the LLM frontend) extracts here; a pattern frontend has nothing to do."""

    def extract(self, history: History) -> Extraction: ...
