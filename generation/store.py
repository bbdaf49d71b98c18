"""Crash-safe store of reader predictions keyed by request id.

SQLite in WAL mode: each put (or `put_all`) is one committed transaction, so a SIGKILL loses
at most the generation in flight, and a rerun finds every finished one. A successful prediction is
final: later puts for its id are ignored. A recorded failure (error set) is kept for the
bundle but replaced when a later run retries the request and gets an answer.
"""
from __future__ import annotations

import json
import sqlite3
import threading
from contextlib import contextmanager
from pathlib import Path
from typing import Iterable, Iterator

from common.calls import Prediction
from common.errors import DataError
from common.io import canonical_json, writable_dir

# The store is a cache: every successful answer of a run is also in its journal.
REBUILD_HINT = ("move the file away: the next `stage=generate` refills it from each run's journal "
                "(results/work/.../predictions.jsonl) and sends only what neither holds")


class PredictionStore:
    def __init__(self, path: str | Path) -> None:
        self.path = Path(path)
        writable_dir(self.path.parent)
        self._lock = threading.Lock()
        self._db = sqlite3.connect(self.path, isolation_level=None, check_same_thread=False, timeout=60)
        with self._readable():
            self._db.execute("PRAGMA journal_mode=WAL")
            self._db.execute("PRAGMA synchronous=FULL")
            self._db.execute(
                "CREATE TABLE IF NOT EXISTS predictions "
                "(request_id TEXT PRIMARY KEY, prediction TEXT NOT NULL, failed INTEGER NOT NULL)"
            )

    def get(self, request_id: str) -> Prediction | None:
        with self._lock, self._readable():
            row = self._db.execute("SELECT prediction FROM predictions WHERE request_id = ?", (request_id,)).fetchone()
        if row is None:
            return None
        try:
            return Prediction.from_json(json.loads(row[0]))
        except ValueError as exc:
            raise DataError(f"{self.path}: the row for request {request_id[:12]} is not a prediction ({exc}); "
                            f"{REBUILD_HINT}") from exc

    @contextmanager
    def _readable(self) -> Iterator[None]:
        try:
            yield
        except sqlite3.DatabaseError as exc:
            raise DataError(f"{self.path}: unreadable prediction store ({exc}); {REBUILD_HINT}") from exc

    def put(self, prediction: Prediction) -> None:
        self.put_all([prediction])

    def put_all(self, predictions: Iterable[Prediction]) -> None:
        """Every prediction in one transaction: all are stored or, on any error, none (an
        import that stops half way leaves the store as it was)."""
        rows = [(p.request_id, canonical_json(p.to_json()), int(p.error is not None)) for p in predictions]
        with self._lock, self._readable():
            self._db.execute("BEGIN IMMEDIATE")
            try:
                self._db.executemany(
                    "INSERT INTO predictions (request_id, prediction, failed) VALUES (?, ?, ?) "
                    "ON CONFLICT(request_id) DO UPDATE SET prediction = excluded.prediction, failed = excluded.failed "
                    "WHERE predictions.failed = 1", rows)
            except BaseException:
                self._db.execute("ROLLBACK")
                raise
            self._db.execute("COMMIT")

    def __len__(self) -> int:
        with self._lock:
            return self._db.execute("SELECT COUNT(*) FROM predictions").fetchone()[0]

    def close(self) -> None:
        with self._lock:
            self._db.close()
