"""The per-sitting generation clock: kept across processes, rewritten whole, summed."""
from __future__ import annotations

import pytest

from common.errors import DataError
from generation.sittings import Sitting, read_sittings, total


def test_each_process_adds_its_own_line_and_keeps_the_earlier_ones(tmp_path):
    path = tmp_path / "work" / "sittings.jsonl"
    first = Sitting(path)
    first.finished()
    first.finished(2, prefill_tokens_total=10, prefill_tokens_saved=4)
    # a second sitting (a resumed run, perhaps on another machine) starts from the file
    second = Sitting(path, code={"commit": "abc", "dirty": False})
    second.finished()
    rows = read_sittings(path)
    assert [r["requests"] for r in rows] == [3, 1]
    assert rows[0]["prefill_tokens_saved"] == 4 and "prefill_tokens_saved" not in rows[1]
    assert "git" not in rows[0] and rows[1]["git"] == {"commit": "abc", "dirty": False}  # each sitting's own code
    assert all(r["seconds"] >= 0 and r["cpus"] >= 1 and r["started_utc"].endswith("+00:00") for r in rows)
    assert total(rows) == {"sittings": 2, "requests": 4, "seconds": round(rows[0]["seconds"] + rows[1]["seconds"], 1)}


def test_a_sitting_that_finishes_nothing_writes_nothing(tmp_path):
    Sitting(tmp_path / "sittings.jsonl")
    assert not (tmp_path / "sittings.jsonl").exists() and read_sittings(tmp_path / "sittings.jsonl") == []


@pytest.mark.parametrize("line, named", [("not json", "not JSON"), ('{"requests": 3}', "lacks started_utc")])
def test_a_bad_line_is_a_named_error(tmp_path, line, named):
    path = tmp_path / "sittings.jsonl"
    path.write_text(line + "\n")
    with pytest.raises(DataError, match=rf"sittings.jsonl: line 1 .*{named}"):
        Sitting(path)
