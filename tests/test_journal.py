"""The committable prediction journal: successes only, torn tails dropped, bad lines named."""
from __future__ import annotations

import pytest

from common.calls import Prediction
from common.errors import DataError
from generation.journal import PredictionJournal


def ok(i: int) -> Prediction:
    return Prediction(request_id=f"r{i}", raw=f"answer {i}", finish_reason="stop",
                      usage={"prompt_tokens": 10 + i, "completion_tokens": 2}, model="m")


def test_round_trip_keeps_successes_and_skips_failures(tmp_path):
    journal = PredictionJournal(tmp_path / "w" / "predictions.jsonl")
    assert journal.read() == {}
    failed = Prediction(request_id="bad", raw=None, model="m", error="OutOfMemoryError")
    journal.append([ok(1), failed])
    journal.append([ok(2)])
    assert journal.read() == {"r1": ok(1), "r2": ok(2)}
    assert len(journal.path.read_text().splitlines()) == 2


def test_a_torn_last_line_is_dropped_then_cut_before_the_next_append(tmp_path, caplog):
    journal = PredictionJournal(tmp_path / "predictions.jsonl")
    journal.append([ok(1), ok(2)])
    with open(journal.path, "ab") as handle:
        handle.write(b'{"request_id": "r3", "raw": "ans')  # killed mid-write
    with caplog.at_level("WARNING"):
        assert set(journal.read()) == {"r1", "r2"}
    assert "torn last line" in caplog.text
    journal.append([ok(3)])
    assert journal.read() == {"r1": ok(1), "r2": ok(2), "r3": ok(3)}
    assert journal.path.read_text().count("\n") == 3


def test_a_corrupt_inner_line_is_an_error_naming_file_and_line(tmp_path):
    journal = PredictionJournal(tmp_path / "predictions.jsonl")
    journal.append([ok(1)])
    with open(journal.path, "a") as handle:
        handle.write("not json\n")
    journal.append([ok(2)])
    with pytest.raises(DataError, match=r"predictions.jsonl: line 2 is not a prediction"):
        journal.read()


def test_a_journaled_failure_is_refused(tmp_path):
    path = tmp_path / "predictions.jsonl"
    path.write_text('{"error":"boom","finish_reason":null,"model":"m","raw":null,"request_id":"x","usage":{}}\n')
    with pytest.raises(DataError, match="line 1 records a failed prediction"):
        PredictionJournal(path).read()


def test_rereads_parse_only_appended_lines_yet_notice_a_rewrite(tmp_path, monkeypatch):
    """The incremental read (a method reads the journal before every call) equals a fresh
    read after every append, parses each line once, and starts over when earlier bytes
    change: a corrupted earlier line is still reported with its line number."""
    journal = PredictionJournal(tmp_path / "p.jsonl")
    parsed = []
    original = Prediction.from_json
    monkeypatch.setattr(Prediction, "from_json", classmethod(lambda cls, data: parsed.append(1) or original(data)))
    for batch in ([ok(0)], [ok(1), ok(2)], [], [ok(3)]):
        journal.append(batch)
        assert journal.read() == PredictionJournal(journal.path).read()
    assert len(journal.read()) == 4
    fresh_reads = 1 + 3 + 3 + 4  # each comparison instance parses the whole file
    assert len(parsed) == 4 + fresh_reads  # the long-lived journal parsed each of its 4 lines once
    lines = journal.path.read_text().splitlines()
    journal.path.write_text("\n".join([lines[0], "{not json", *lines[2:]]) + "\n")
    with pytest.raises(DataError, match="line 2 is not a prediction"):
        journal.read()
