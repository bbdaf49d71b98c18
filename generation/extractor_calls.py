"""The calls one LLM extraction makes, and what they cost (paper appendix D.1 reports calls,
input and output tokens per frontend).

Every call goes through the shared GenerationService: the machine-local prediction store,
plus a journal beside the frozen extraction that is committed with it, so an extraction
stopped on one machine resumes on another without resending a finished call (the journal
seeds the new machine's store). A sittings file beside the journal times the generation
over all its sittings, since no one process sees a resumed extraction whole.
"""
from __future__ import annotations

from collections import Counter
from pathlib import Path
from types import TracebackType
from typing import Any

from common.calls import Prediction, Reader, Request
from common.errors import DataError
from generation.journal import PredictionJournal
from generation.service import GenerationService
from generation.sittings import Sitting, read_sittings, total
from generation.store import PredictionStore


class ExtractorCalls:
    """One extraction's calls: answered from the store or journal, else generated now, each
    counted once by request id, whether it was sent in this process or an earlier one (an
    extraction costs what its answers cost, not what the last sitting happened to send)."""

    def __init__(self, extractor: Reader, store_path: Path, journal_path: Path, sittings_path: Path,
                 name: str) -> None:
        self.name, self.sittings_path = name, sittings_path
        self.store = PredictionStore(store_path)
        sitting = Sitting(sittings_path)
        self.service = GenerationService(extractor, self.store, PredictionJournal(journal_path),
                                         on_finished=lambda _: sitting.finished(), label=name)
        self.used: dict[str, Prediction] = {}
        self.purpose: dict[str, str] = {}  # request id -> why it was first asked (extract, repair, review, align)

    def __enter__(self) -> "ExtractorCalls":
        return self

    def __exit__(self, kind: type[BaseException] | None, value: BaseException | None,
                 trace: TracebackType | None) -> None:
        self.store.close()

    @property
    def sent(self) -> int:
        """Requests this process sent (the rest came from the store or journal)."""
        return self.service.sent

    def answer(self, request: Request, where: str, purpose: str) -> Prediction:
        """The stored answer to this exact request, else a fresh generation. A failed
        generation stops extraction: freezing around it would make the failure part of every
        arm's memory. It is retried on the next run. `purpose` is counted in the cost: where
        the calls go (batches against one-statement repairs and reviews) is what makes an
        extraction cheap or dear."""
        if request.evidence_truncated_tokens:
            raise DataError(f"{self.name}: {where} does not fit the extractor's input cap; lower batch_records")
        prediction = self.service.answer(request)
        if prediction.error is not None:
            raise DataError(f"{self.name}: the extractor failed on {where}: {prediction.error}; rerun to retry")
        self.used[request.id] = prediction
        self.purpose.setdefault(request.id, purpose)
        return prediction

    def cost(self) -> dict[str, Any]:
        """Calls and tokens summed over the predictions this extraction used (the backend's
        usage), the seconds of every sitting that generated them, and how many of the calls
        this process sent (0 on a rerun answered from the journal or store)."""
        usage = [p.usage for p in self.used.values()]
        return {"calls": len(usage), "input_tokens": sum(u.get("prompt_tokens", 0) for u in usage),
                "output_tokens": sum(u.get("completion_tokens", 0) for u in usage),
                "seconds": total(read_sittings(self.sittings_path))["seconds"], "sent": self.service.sent,
                "calls_by_purpose": dict(sorted(Counter(self.purpose.values()).items()))}
