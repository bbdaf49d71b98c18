"""A run's durable, committable record of finished predictions: one JSON line each.

The SQLite store (generation.store) is the fast machine-local cache shared by every run; the
journal lives beside the run's frozen manifest under results/work/ and travels with the
repository, so a long run (the full Table 1 on a CPU takes about a day) can stop on one
machine and resume on another without sending any finished request again. Only successful
predictions are journaled: a failure is retried, never resumed.

Appends are line-at-a-time with fsync; a crash can leave at most a torn last line, which
is dropped (and cut off before the next append). Any other unreadable line is an error.

A multi-call method or an extraction reads the journal before every call, so `read` parses
only the lines added since its last read, once the bytes it parsed before are unchanged
(checked by their sha256: hashing is cheap, parsing is not).
"""
from __future__ import annotations

import hashlib
import json
import logging
import os
from dataclasses import dataclass, field
from pathlib import Path

from common.calls import Prediction
from common.errors import DataError
from common.io import jsonl_text, writable_dir

log = logging.getLogger(__name__)


@dataclass
class _Parsed:
    """What earlier reads parsed: the bytes (length, sha256) and their predictions."""

    size: int = 0
    digest: bytes = hashlib.sha256(b"").digest()
    lines: int = 0
    out: dict[str, Prediction] = field(default_factory=dict)
    first_line: dict[str, int] = field(default_factory=dict)


class PredictionJournal:
    def __init__(self, path: str | Path) -> None:
        self.path = Path(path)
        self._parsed = _Parsed()

    def read(self) -> dict[str, Prediction]:
        """Request id -> prediction, for every complete line."""
        if not self.path.is_file():
            return {}
        data = self.path.read_bytes()
        complete, _, torn = data.rpartition(b"\n")
        if torn:
            log.warning("%s: dropping a torn last line (%d bytes) left by an interrupted append", self.path, len(torn))
        done = self._parsed
        if len(complete) < done.size or hashlib.sha256(complete[:done.size]).digest() != done.digest:
            done = _Parsed()  # rewritten, not appended to: parse it all again
        new = complete[done.size + 1 if done.size else 0:]
        try:
            lines = new.decode("utf-8").split("\n") if new else []
        except UnicodeDecodeError as exc:
            raise DataError(f"{self.path}: not UTF-8 text ({exc})") from exc
        out, first_line = dict(done.out), dict(done.first_line)
        for number, line in enumerate(lines, start=done.lines + 1):
            try:
                prediction = Prediction.from_json(json.loads(line))
            except (ValueError, TypeError, KeyError) as exc:
                raise DataError(f"{self.path}: line {number} is not a prediction ({exc})") from exc
            if prediction.error is not None:
                raise DataError(f"{self.path}: line {number} records a failed prediction; journals hold successes only")
            request = prediction.request_id
            if request in out and out[request] != prediction:  # one answer per request, or nothing is sealed
                raise DataError(f"{self.path}: lines {first_line[request]} and {number} give different answers for "
                                f"request {request[:12]}; keep the one that is right and delete the other")
            out.setdefault(request, prediction)
            first_line.setdefault(request, number)
        self._parsed = _Parsed(len(complete), hashlib.sha256(complete).digest(), done.lines + len(lines), out, first_line)
        return dict(out)

    def append(self, predictions: list[Prediction]) -> None:
        """Append successes (failures are skipped), cutting off a torn tail first."""
        text = jsonl_text(p.to_json() for p in predictions if p.error is None)
        if not text:
            return
        writable_dir(self.path.parent)
        with open(self.path, "a+b") as handle:
            size = handle.seek(0, os.SEEK_END)
            if size:
                handle.seek(size - 1)
                if handle.read(1) != b"\n":
                    handle.seek(0)
                    handle.truncate(handle.read().rfind(b"\n") + 1)  # keep every complete line
            handle.write(text.encode("utf-8"))
            handle.flush()
            os.fsync(handle.fileno())
