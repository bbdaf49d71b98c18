"""Wall-clock cost of generating a run, one JSON line per sitting.

A long CPU run (the full Table 1) is generated over several sittings, often on several
machines, so no single process can time it. Each sitting's line says when it started, how
many requests it finished, in how many seconds, on how many CPUs, with which commit (plus
the reader's prefix-cache counters). The line is rewritten atomically after every finished request, so a
sitting that is killed still counts up to its last prediction. The file lives beside the
prediction journal under results/work/ and moves to the run's scores folder at seal: timings
vary from machine to machine and so stay out of the sealed, byte-deterministic bundle.
"""
from __future__ import annotations

import json
import os
import time
from datetime import datetime, timezone
from pathlib import Path
from typing import Any

from common.errors import DataError
from common.io import atomic_write_text, jsonl_text

FIELDS = ("started_utc", "requests", "seconds", "cpus")


def read_sittings(path: str | Path) -> list[dict[str, Any]]:
    """Every recorded sitting, oldest first; a line without the fields is a named error."""
    path = Path(path)
    if not path.is_file():
        return []
    rows = []
    for number, line in enumerate(path.read_text(encoding="utf-8").splitlines(), start=1):
        try:
            row = json.loads(line)
            missing = [f for f in FIELDS if f not in row]
        except (ValueError, TypeError) as exc:
            raise DataError(f"{path}: line {number} is not JSON ({exc})") from exc
        if missing:
            raise DataError(f"{path}: line {number} lacks {', '.join(missing)}")
        rows.append(row)
    return rows


def usable_cpus() -> int:
    """CPUs this process may run on (a container's share, not the host's count)."""
    return len(os.sched_getaffinity(0)) if hasattr(os, "sched_getaffinity") else os.cpu_count() or 1


def total(sittings: list[dict[str, Any]]) -> dict[str, Any]:
    """The whole generation cost of a run: sittings, requests and seconds summed."""
    return {"sittings": len(sittings), "requests": sum(s["requests"] for s in sittings),
            "seconds": round(sum(s["seconds"] for s in sittings), 1)}


class Sitting:
    """This process's line of the sittings file; earlier sittings' lines are kept as read."""

    def __init__(self, path: str | Path, code: dict[str, Any] | None = None) -> None:
        self.path = Path(path)
        self.code = code  # the git state this sitting generated with (the manifest keeps the first one's)
        self.earlier = read_sittings(self.path)
        self.started_utc = datetime.now(timezone.utc).isoformat(timespec="seconds")
        self.clock = time.perf_counter()
        self.cpus = usable_cpus()  # fixed for the process; not re-read on every prediction
        self.requests = 0

    def finished(self, requests: int = 1, **counters: int) -> None:
        """Count finished requests and rewrite the file with this sitting's line up to date."""
        self.requests += requests
        line = {"started_utc": self.started_utc, "requests": self.requests,
                "seconds": round(time.perf_counter() - self.clock, 1), "cpus": self.cpus,
                **({"git": self.code} if self.code else {}), **counters}
        atomic_write_text(self.path, jsonl_text([*self.earlier, line]))
