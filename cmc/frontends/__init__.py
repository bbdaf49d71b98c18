"""Source frontends: turn a History into a validated Extraction before any question."""
from __future__ import annotations

from pathlib import Path
from typing import Any, Callable, ContextManager, Protocol, Sequence

from cmc.extraction import Extraction
from cmc.records import History
from common.calls import Reader, Request


def frontend_kind(name: str) -> str:
    """The kind of extraction a frontend's name stands for (grammar, llm, hybrid): its name up
    to the first '_', as `harness.config` builds it (llm_lines_examples_<extractor> is an llm
    frontend). Tables set a frontend beside the paper's figures for the same kind."""
    return name.split("_", 1)[0]


class Frontend(Protocol):
    name: str

    @property
    def frontend_id(self) -> str:
        """Name plus a fingerprint of everything that changes its output."""

    def prepare(self, histories: Sequence[History]) -> None:
        """See every history before any is extracted: a frontend that reads each unique
        statement once (the LLM frontend) extracts here; a pattern frontend has nothing to do."""

    def extract(self, history: History) -> Extraction: ...


class ExtractorCalls(Protocol):
    """What extraction asks of the generation service it is handed (generation/extractor_calls.py):
    an answer per request, the cost of those used, how many were sent by this process."""

    sent: int

    def answer(self, request: Request, where: str, purpose: str) -> Any: ...

    def cost(self) -> dict[str, Any]: ...


# Opens the calls of one corpus: (extractor, store, journal, sittings, name) -> a context manager.
OpenCalls = Callable[[Reader, Path, Path, Path, str], ContextManager[ExtractorCalls]]
