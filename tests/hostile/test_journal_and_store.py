"""Journals and stores travel between machines and can be edited or damaged: every row is
checked on read, and a bad one is an error naming the file and line, never a silent seal."""
from __future__ import annotations

import json

import pytest

from common.calls import Prediction
from common.errors import DataError
from generation.journal import PredictionJournal
from generation.store import PredictionStore
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


def _named(folder, name, *rows) -> PredictionJournal:
    folder.mkdir(parents=True, exist_ok=True)
    (folder / name).write_text("".join(json.dumps(r) + "\n" for r in rows))
    return PredictionJournal(folder / name)


def test_journals_and_the_store_that_agree_are_merged(tmp_path):
    from harness.seal import agreed_answers

    store = PredictionStore(tmp_path / "store.sqlite")
    store.put(Prediction.from_json({**GOOD, "request_id": "r2", "raw": None, "error": "HTTP 503"}))  # a failure is retried
    journals = [_named(tmp_path / "w", "predictions.shard-0-of-2.jsonl", GOOD),
                _named(tmp_path / "w", "predictions.shard-1-of-2.jsonl", GOOD, {**GOOD, "request_id": "r2", "raw": "Rome"})]
    assert {k: p.raw for k, p in agreed_answers(journals, store).items()} == {"r1": "Paris", "r2": "Rome"}


@pytest.mark.parametrize("names", [("predictions.jsonl", "predictions.shard-0-of-2.jsonl"),
                                   ("predictions.shard-0-of-2.jsonl", "predictions.shard-1-of-2.jsonl")])
def test_two_journals_answering_one_request_differently_are_refused_naming_both(tmp_path, names):
    from harness.seal import agreed_answers

    first = _named(tmp_path / "w", names[0], GOOD)
    second = _named(tmp_path / "w", names[1], {**GOOD, "raw": "Lyon"})
    with left_unchanged(tmp_path / "w"), pytest.raises(
            DataError, match=rf"{names[1]}: answers request r1 differently from .*{names[0]}; nothing was sealed"):
        agreed_answers([first, second], PredictionStore(tmp_path / "store.sqlite"))


def test_a_store_answer_that_differs_from_the_journal_is_refused(tmp_path):
    from harness.seal import agreed_answers

    store = PredictionStore(tmp_path / "store.sqlite")
    store.put(Prediction.from_json({**GOOD, "raw": "Lyon"}))
    journal = _named(tmp_path / "w", "predictions.jsonl", GOOD)
    with pytest.raises(DataError, match=r"predictions.jsonl: answers request r1 differently from the prediction store"):
        agreed_answers([journal], store)


def test_shard_journals_of_two_splits_are_refused(tmp_path):
    from harness.seal import agreed_answers

    journals = [_named(tmp_path / "w", "predictions.shard-0-of-2.jsonl", GOOD),
                _named(tmp_path / "w", "predictions.shard-1-of-3.jsonl", {**GOOD, "request_id": "r9"})]
    with pytest.raises(DataError, match=r"shard journals of \[2, 3\] shards"):
        agreed_answers(journals, PredictionStore(tmp_path / "store.sqlite"))


@pytest.mark.parametrize("dies_at", ["store", "journal"])
def test_a_process_killed_while_keeping_an_answer_never_kept_one_it_did_not_count(tmp_path, dies_at, monkeypatch):
    """The sittings file counts a generation before the store and the journal keep it: a kill
    in between leaves at least as many counted requests as kept answers (the issue was one
    fewer after SIGKILLs)."""
    from common.prompt import load_prompt
    from generation.service import GenerationService
    from generation.sittings import Sitting, read_sittings, total
    from readers.openai_api import OpenAIReader
    from tests.hostile.servers import LocalServer, chat_reply

    def killed(rows):  # stands in for SIGKILL at that point (an empty backfill is no answer)
        if rows:
            raise KeyboardInterrupt

    with LocalServer(lambda method, *rest: (200, {"data": []} if method == "GET" else chat_reply("m", "Paris"))) as srv:
        reader = OpenAIReader(name="r", base_url=srv.url, model="m", max_retries=0, concurrency=1)
        store, journal = PredictionStore(tmp_path / "store.sqlite"), PredictionJournal(tmp_path / "predictions.jsonl")
        sitting = Sitting(tmp_path / "sittings.jsonl")
        service = GenerationService(reader, store, journal, on_finished=lambda _: sitting.finished())
        monkeypatch.setattr(store if dies_at == "store" else journal, "put" if dies_at == "store" else "append", killed)
        prompt = load_prompt("memoryagentbench_factconsolidation")
        with pytest.raises(KeyboardInterrupt):
            service.generate([reader.prepare(prompt, f"1. A{i} is B.", f"What is A{i}?") for i in range(3)])
    kept = len(PredictionJournal(tmp_path / "predictions.jsonl").read())
    stored = PredictionStore(tmp_path / "store.sqlite")
    assert total(read_sittings(tmp_path / "sittings.jsonl"))["requests"] == 1 >= max(kept, len(stored))
