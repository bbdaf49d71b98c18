"""Without a terminal (nohup, a cluster job's log file) a long generation still reports:
a log line every `every_s` seconds with the count, the rate and the time left."""
from __future__ import annotations

import logging

from cmc.progress import Progress


class FakeClock:
    def __init__(self) -> None:
        self.now = 1000.0

    def __call__(self) -> float:
        return self.now


def test_a_line_every_interval_with_rate_and_time_left(caplog):
    clock = FakeClock()
    progress = Progress("view", 100, every_s=300, clock=clock)
    assert progress.bar.disable  # pytest captures stdout: not a terminal
    with caplog.at_level(logging.INFO, logger="cmc.progress"):
        for _ in range(30):  # 30 requests in 2 minutes: no line yet
            clock.now += 4
            progress.update()
        assert caplog.messages == []
        for _ in range(50):  # 50 more in 5 minutes: one line once 300 s have passed
            clock.now += 6
            progress.update()
    progress.close()
    assert len(caplog.messages) == 1
    # The line came at the 60th request (300 s after the start): 12.0 a minute, 40 left.
    assert caplog.messages[0] == "view: 60 of 100 sent (12.0 a minute, about 3 min left)"


def test_the_last_request_is_not_reported_as_progress(caplog):
    clock = FakeClock()
    progress = Progress("view", 2, every_s=0, clock=clock)
    with caplog.at_level(logging.INFO, logger="cmc.progress"):
        clock.now += 1
        progress.update()
        clock.now += 1
        progress.update()
    assert caplog.messages == ["view: 1 of 2 sent (60.0 a minute, about 0 min left)"]


def test_a_count_that_goes_back_is_reported_as_it_is(caplog):
    """The hybrid frontend's settled statements drop when a rule is rejected."""
    clock = FakeClock()
    progress = Progress("hybrid 6k", 1000, every_s=60, done_word="statements settled", clock=clock)
    with caplog.at_level(logging.INFO, logger="cmc.progress"):
        clock.now += 60
        progress.set(600)
        clock.now += 60
        progress.set(450)
    assert caplog.messages == ["hybrid 6k: 600 of 1000 statements settled (600.0 a minute, about 1 min left)",
                               "hybrid 6k: 450 of 1000 statements settled (no net progress in the last 1 min)"]


def test_the_rate_counts_only_the_interval_since_the_previous_line(caplog):
    """A burst in one interval does not set the rate of the next."""
    clock = FakeClock()
    progress = Progress("extract 262k", 1000, every_s=60, done_word="statements extracted", clock=clock)
    with caplog.at_level(logging.INFO, logger="cmc.progress"):
        clock.now += 60
        progress.set(900)
        clock.now += 60
        progress.set(910)
    assert caplog.messages == ["extract 262k: 900 of 1000 statements extracted (900.0 a minute, about 0 min left)",
                               "extract 262k: 910 of 1000 statements extracted (10.0 a minute, about 9 min left)"]


def test_replayed_moves_count_but_do_not_enter_the_rate(caplog):
    """A resumed extraction replays 900 journaled statements at once, then settles 1 a
    minute: its first line already says 1 a minute, not 901."""
    clock = FakeClock()
    progress = Progress("hybrid 262k", 1000, every_s=60, done_word="statements settled", clock=clock)
    with caplog.at_level(logging.INFO, logger="cmc.progress"):
        progress.set(900, replayed=True)
        clock.now += 60
        progress.set(901)
        clock.now += 60
        progress.update(50, replayed=True)
    assert caplog.messages == ["hybrid 262k: 901 of 1000 statements settled (1.0 a minute, about 99 min left)",
                               "hybrid 262k: 951 of 1000 statements settled (no net progress in the last 1 min)"]
