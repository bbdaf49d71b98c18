"""Source frontends: turn a History into a validated Extraction before any question."""
from __future__ import annotations

from typing import Protocol

from cmc.extraction import Extraction
from cmc.records import History


class Frontend(Protocol):
    name: str

    @property
    def frontend_id(self) -> str:
        """Name plus a fingerprint of everything that changes its output."""

    def extract(self, history: History) -> Extraction: ...
