"""Journals and stores travel between machines and can be edited or damaged: every row is
checked on read, and a bad one is an error naming the file and line, never a silent seal."""
from __future__ import annotations

import json

import pytest

from cmc.cache import PredictionStore
from cmc.errors import DataError
from cmc.journal import PredictionJournal
from cmc.readers.base import Prediction
from tests.hostile.conftest import left_unchanged

GOOD = {"request_id": "r1", "raw": "Paris", "finish_reason": "stop", "usage": {"prompt_tokens": 3}, "model": "m",
        "error": None}


def _journal(tmp_path, *rows) -> PredictionJournal:
    path = tmp_path / "predictions.jsonl"
    path.write_text("".join(json.dumps(r) + "\n" for r in rows))
    return PredictionJournal(path)


@pytest.mark.parametrize("bad, why", [
    ({**GOOD, "raw": 42}, "field 'raw' is int"),
    ({**GOOD, "raw": ["Paris"]}, "field 'raw' is list"),
    ({**GOOD, "request_id": None}, "field 'request_id' is NoneType"),
    ({k: v for k, v in GOOD.items() if k != "request_id"}, "missing field 'request_id'"),
    ({**GOOD, "usage": {"prompt_tokens": "3"}}, "usage"),
    ({**GOOD, "usage": {"prompt_tokens": True}}, "usage"),
    ({**GOOD, "surprise": 1}, "unknown field"),
    ({**GOOD, "raw": None}, "exactly one of 'raw' and 'error'"),
    ([GOOD], "JSON object"),
])
def test_a_mistyped_journal_line_names_file_and_line(tmp_path, bad, why):
    journal = _journal(tmp_path, GOOD | {"request_id": "r0"}, bad)
    with left_unchanged(tmp_path), pytest.raises(DataError, match=rf"predictions.jsonl: line 2 is not a prediction .*{why}"):
        journal.read()


def test_a_conflicting_duplicate_names_both_lines_and_an_identical_one_is_kept_once(tmp_path):
    assert len(_journal(tmp_path, GOOD, GOOD).read()) == 1
    journal = _journal(tmp_path, GOOD, GOOD | {"request_id": "r2"}, GOOD | {"raw": "Lyon"})
    with left_unchanged(tmp_path), pytest.raises(DataError, match=r"lines 1 and 3 give different answers for request r1"):
        journal.read()


def test_non_utf8_bytes_in_a_journal_are_named(tmp_path):
    path = tmp_path / "predictions.jsonl"
    path.write_bytes(json.dumps(GOOD).encode() + b"\n\xff\xfe\n")
    with left_unchanged(tmp_path), pytest.raises(DataError, match="predictions.jsonl: not UTF-8"):
        PredictionJournal(path).read()


def test_a_corrupt_store_says_how_to_rebuild_it(tmp_path):
    path = tmp_path / "predictions.sqlite"
    path.write_bytes(b"this is not a database" * 100)
    with left_unchanged(path), pytest.raises(DataError, match=r"predictions.sqlite: unreadable prediction store .*journal"):
        PredictionStore(path).get("r1")


def test_an_edited_store_row_is_named(tmp_path):
    store = PredictionStore(tmp_path / "predictions.sqlite")
    store.put(Prediction.from_json(GOOD))
    store._db.execute("UPDATE predictions SET prediction = ? WHERE request_id = 'r1'", (json.dumps({**GOOD, "raw": 7}),))
    with pytest.raises(DataError, match=r"row for request r1 is not a prediction .*field 'raw' is int"):
        store.get("r1")
    before = (tmp_path / "predictions.sqlite").read_bytes()
    with pytest.raises(DataError):
        store.get("r1")
    assert (tmp_path / "predictions.sqlite").read_bytes() == before  # a failed read writes nothing
