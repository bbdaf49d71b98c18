"""Progress of a long generation: a bar on a terminal, a log line in a log.

A view on a CPU generates for an hour or more, most often under nohup or a cluster job
whose output is a file, where tqdm (rightly) stays silent. There the user still needs to
know that it moves and when it ends, so every `every_s` seconds one INFO line gives the
count, the rate and the time left. The rate is measured over the interval since the previous
line, not since the start, and counts only work done now: a resumed extraction replays its
journaled calls in seconds, and a rate that counts them promises an end minutes away when
hours are left (the caller says which moves were replayed).
"""
from __future__ import annotations

import logging
import time
from typing import Callable

from tqdm import tqdm

log = logging.getLogger(__name__)


class Progress:
    """Count finished items of one batch; report as a bar or as periodic log lines."""

    def __init__(self, label: str, total: int, every_s: float = 300.0, done_word: str = "sent",
                 clock: Callable[[], float] = time.monotonic) -> None:
        self.label, self.total, self.every_s, self.done_word, self.clock = label, total, every_s, done_word, clock
        self.bar = tqdm(total=total, desc=label, disable=None, mininterval=2)  # None: off when not a terminal
        self.done = self.done_at_report = 0
        self.reported = clock()

    def update(self, count: int = 1, replayed: bool = False) -> None:
        self.set(self.done + count, replayed)

    def set(self, done: int, replayed: bool = False) -> None:
        """Move to `done` (it may go back: a rejected rule gives statements back). A
        `replayed` move (answers read back from a journal) shifts the count without entering
        the rate."""
        if replayed:
            self.done_at_report += done - self.done
        self.done = done
        self.bar.n = done
        self.bar.refresh()
        now = self.clock()
        if self.bar.disable and self.done < self.total and now - self.reported >= self.every_s:
            log.info("%s", self.line(now))
            self.reported, self.done_at_report = now, self.done

    def line(self, now: float) -> str:
        """'label: 120 of 400 sent (15.0 a minute, about 19 min left)', the rate over the
        interval since the previous line."""
        interval = max(now - self.reported, 1e-9)
        moved = self.done - self.done_at_report
        if moved <= 0:
            return (f"{self.label}: {self.done} of {self.total} {self.done_word} "
                    f"(no net progress in the last {interval / 60:.0f} min)")
        per_minute = 60.0 * moved / interval
        left = (self.total - self.done) / per_minute
        return (f"{self.label}: {self.done} of {self.total} {self.done_word} "
                f"({per_minute:.1f} a minute, about {left:.0f} min left)")

    def close(self) -> None:
        self.bar.close()
