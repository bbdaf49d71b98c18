"""Without a terminal (nohup, a cluster job's log file) a long generation still reports:
a log line every `every_s` seconds with the count, the rate and the time left."""
from __future__ import annotations

import logging

import pytest

from common.progress import Progress


class FakeClock:
    def __init__(self) -> None:
        self.now = 1000.0

    def __call__(self) -> float:
        return self.now


def test_a_line_every_interval_with_rate_and_time_left(caplog):
    clock = FakeClock()
    progress = Progress("view", 100, every_s=300, clock=clock)
    assert progress.bar.disable  # pytest captures stdout: not a terminal
    with caplog.at_level(logging.INFO, logger="common.progress"):
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
    with caplog.at_level(logging.INFO, logger="common.progress"):
        clock.now += 1
        progress.update()
        clock.now += 1
        progress.update()
    assert caplog.messages == ["view: 1 of 2 sent (60.0 a minute, about 0 min left)"]


@pytest.mark.parametrize("label, steps, expected", [
    pytest.param(  # the hybrid frontend's settled statements drop when a rule is rejected
        "hybrid 6k", [(60, 600, False), (60, 450, False)],
        ["hybrid 6k: 600 of 1000 sent (600.0 a minute, about 1 min left)",
         "hybrid 6k: 450 of 1000 sent (no net progress in the last 1 min)"], id="a count that goes back"),
    pytest.param(  # a burst in one interval does not set the rate of the next
        "extract 262k", [(60, 900, False), (60, 910, False)],
        ["extract 262k: 900 of 1000 sent (900.0 a minute, about 0 min left)",
         "extract 262k: 910 of 1000 sent (10.0 a minute, about 9 min left)"], id="rate since the previous line"),
    pytest.param(  # a resumed extraction replays 900 journaled statements at once, then settles 1 a minute
        "hybrid 262k", [(0, 900, True), (60, 901, False), (60, 951, True)],
        ["hybrid 262k: 901 of 1000 sent (1.0 a minute, about 99 min left)",
         "hybrid 262k: 951 of 1000 sent (no net progress in the last 1 min)"], id="replayed moves are no rate"),
])
def test_each_line_reports_the_count_and_the_rate_of_work_done_since_the_previous_one(caplog, label, steps,
                                                                                       expected):
    clock = FakeClock()
    progress = Progress(label, 1000, every_s=60, clock=clock)
    with caplog.at_level(logging.INFO, logger="common.progress"):
        for advance, done, replayed in steps:
            clock.now += advance
            progress.set(done, replayed=replayed)
    assert caplog.messages == expected
