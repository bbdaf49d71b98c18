"""One process per run at a time.

Two identical runs started together both sent every request, and the second crashed after
the first had sealed. A run now holds an exclusive advisory lock (a file under the
machine-local cache, never under results/) from its first generation to its seal; a second
process asking for the same run stops at once with a message that says so. The lock is
held while a stage runs (generate, seal), not between stages."""
from __future__ import annotations

import fcntl
import os
from pathlib import Path

from common.errors import DataError
from common.io import writable_dir


class RunLock:
    """A context manager; re-entering it in the same process only counts, so a stage that
    calls another keeps one lock. Released when the outermost `with` ends."""

    def __init__(self, path: Path, what: str) -> None:
        self.path, self.what = path, what
        self._handle = None
        self._depth = 0

    def __enter__(self) -> "RunLock":
        if self._depth == 0:
            self._acquire()
        self._depth += 1
        return self

    def __exit__(self, *exc: object) -> None:
        self._depth -= 1
        if self._depth == 0:
            self._release()

    def _acquire(self) -> None:
        writable_dir(self.path.parent)
        handle = open(self.path, "a+")
        try:
            fcntl.flock(handle.fileno(), fcntl.LOCK_EX | fcntl.LOCK_NB)
        except BlockingIOError:
            holder = self.path.read_text().strip() or "another process"
            handle.close()
            raise DataError(f"{self.what} is already running in {holder} (lock {self.path}); "
                            f"wait for it, or stop it, then run again: finished answers are kept") from None
        handle.seek(0)
        handle.truncate()
        handle.write(f"pid {os.getpid()}\n")
        handle.flush()
        self._handle = handle

    def _release(self) -> None:
        if self._handle is not None:
            fcntl.flock(self._handle.fileno(), fcntl.LOCK_UN)
            self._handle.close()
            self._handle = None


class FileLock:
    """A blocking exclusive lock: a second process waits its turn instead of stopping. For
    shared files that parallel views rewrite with identical bytes (an arm's evidence
    packets, when two readers of one experiment run side by side)."""

    def __init__(self, path: Path) -> None:
        self.path = path
        self._handle = None

    def __enter__(self) -> "FileLock":
        writable_dir(self.path.parent)
        self._handle = open(self.path, "a+")
        fcntl.flock(self._handle.fileno(), fcntl.LOCK_EX)
        return self

    def __exit__(self, *exc: object) -> None:
        if self._handle is not None:
            fcntl.flock(self._handle.fileno(), fcntl.LOCK_UN)
            self._handle.close()
            self._handle = None
