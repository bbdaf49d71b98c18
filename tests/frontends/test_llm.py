"""The direct LLM frontend: its reply and alignment parsers on hand-written replies, and the
whole extraction loop (unique statements, batches, repair, alignment, freezing, the
prediction store, the journal, the cost) against a real OpenAI-compatible HTTP server whose
extractor answers with the grammar frontend's parse of each record, plus scripted mistakes
(tests/frontends/oracle.py). The grammar parse is the reference the loop must reproduce:
what the loop adds or loses is then exactly what the mistakes should cause."""
from __future__ import annotations

import dataclasses
import json
import shutil
from pathlib import Path

import pytest
from hydra.utils import instantiate

from cmc.extraction import Extraction
from cmc.frontends.grammar import GrammarFrontend
from cmc.frontends.llm import LLMFrontend, corpus_of
from cmc.frontends.llm_replies import literal_span, parse_alignment, parse_reply, relation_slug
from cmc.records import History, Record
from common.calls import Prediction
from common.errors import DataError
from generation.journal import PredictionJournal
from generation.sittings import read_sittings, total
from readers.openai_api import OpenAIReader
from tests.conftest import OFFLINE_SMALL, TEMPLATES, compose_config
from tests.frontends.oracle import GrammarOracle, served_extractor, with_generation, work_dirs
from tests.readers.faulty_server import FaultyServer

BATCH = 8


# ---------------------------------------------------------------- parsers, hand-written replies

def test_relation_slug_gives_one_spelling():
    assert relation_slug("Born In") == relation_slug("born-in") == relation_slug(" born_in ") == "born_in"
    assert relation_slug("—") == ""


def test_literal_span_matches_whole_words_only():
    text = "Stanford University was founded by Leland Stanford, not by Ford."
    assert literal_span(text, "Ford") == (text.rindex("Ford"), len(text) - 1)
    assert literal_span(text, "Stan") is None and literal_span(text, "Stanford,") == (text.index("Stanford,"), text.index("Stanford,") + 9)
    assert literal_span("Born in Limassol.", "Lima") is None


def test_literal_span_is_exact_first_then_case_blind_and_avoids_the_subject():
    text = "Lima is the capital; the Capital of Peru is Lima."
    assert literal_span(text, "Lima") == (0, 4)
    second = text.rindex("Lima")
    assert literal_span(text, "Lima", avoid=(0, 4)) == (second, second + 4)  # object equal to subject: next mention
    start = text.index("Capital of Peru")  # case-blind, so the record keeps its own characters
    assert literal_span(text, "capital of peru") == (start, start + len("Capital of Peru"))
    assert literal_span(text, "Quito") is None and literal_span(text, "  ") is None


RECORDS = [Record(3, "The capital of Peru is Lima."), Record(4, "He moved there."), Record(5, "Ok.")]


def test_parse_reply_accepts_literal_triples_and_names_every_other_problem():
    reply = ("Sure! ```json\n" + json.dumps({"records": [
        {"id": 3, "status": "facts", "triples": [["peru", "Capital", "Lima"], ["Peru", "capital", "Lima"]]},
        {"id": 4, "status": "unresolved", "triples": [["He", "moved_to", "there"]]},
        {"id": 99, "status": "no_fact"},  # not in the batch: ignored
    ]}) + "\n```")
    accepted, problems = parse_reply(reply, RECORDS)
    (triple,) = accepted[3].triples  # the case-blind copy keeps the record's spelling, duplicates merge
    assert (triple.subject, triple.relation, triple.object, triple.pos) == ("Peru", "capital", "Lima", 3)
    assert RECORDS[0].text[slice(*triple.subject_span)] == "Peru"
    assert set(accepted) == {3}
    assert "came with triples" in problems[4] and problems[5] == "the record was not answered"


@pytest.mark.parametrize(("entry", "problem"), [
    ({"status": "fact"}, "is not one of"),
    ({"status": "facts", "triples": []}, "needs a list of triples"),
    ({"status": "facts", "triples": [["Peru", "capital"]]}, "is not [subject, relation, object]"),
    ({"status": "facts", "triples": [["Peru", "--", "Lima"]]}, "has no letters or digits"),
    ({"status": "facts", "triples": [["Peru", "capital", "."]]}, "names an entity with no letters or digits"),
    ({"status": "facts", "triples": [["Republic of Peru", "capital", "Lima"]]}, "subject 'Republic of Peru' is not copied"),
    ({"status": "facts", "triples": [["Peru", "capital", "Cusco"]]}, "object 'Cusco' is not copied"),
])
def test_parse_reply_rejects_a_bad_entry_with_its_reason(entry, problem):
    accepted, problems = parse_reply(json.dumps({"records": [{"id": 3, **entry}]}), RECORDS[:1])
    assert accepted == {} and problem in problems[3]


def test_parse_reply_takes_a_bare_list_of_entries_as_the_records():
    """The offline 0.5B answers `[{"id": 1, ...}]` without the wrapper object."""
    reply = '```json\n[{"id": 3, "status": "facts", "triples": [["Peru", "capital", "Lima"]]}]\n```'
    accepted, problems = parse_reply(reply, RECORDS[:1])
    assert problems == {} and [t.object for t in accepted[3].triples] == ["Lima"]


def test_parse_reply_rejects_a_record_answered_twice_and_a_reply_without_json():
    twice = {"records": [{"id": 3, "status": "no_fact"}, {"id": 3, "status": "no_fact"}]}
    assert parse_reply(json.dumps(twice), RECORDS[:1]) == ({}, {3: "the record was answered twice"})
    for raw in ("no JSON here", '{"records": {"id": 3}}', '{"record": [{"id": 3}]}'):
        accepted, problems = parse_reply(raw, RECORDS)
        assert accepted == {} and set(problems) == {3, 4, 5}
        assert all("not a JSON object with a 'records' list" in p for p in problems.values())


def test_parse_alignment_maps_later_names_to_earlier_ones_only():
    names = ["capital", "capital_city", "head_of_state", "chief_city", "leader"]
    reply = json.dumps({"same": {"Capital City": "capital", "chief_city": "capital_city",
                                 "head_of_state": "leader",  # to a later name: dropped
                                 "mayor": "leader", "leader": "unknown"}})  # names not in the catalogue
    assert parse_alignment(reply, names) == {"capital_city": "capital", "chief_city": "capital"}
    assert parse_alignment("I think capital and capital_city are the same", names) == {}
    assert parse_alignment('{"same": ["capital"]}', names) == {}


# ---------------------------------------------------------------- the loop against a served extractor

@pytest.fixture(scope="module")
def history(dataset) -> History:
    """The first 3.5 batches of the real 6K history: enough for every step of the loop."""
    full = dataset.histories["factconsolidation_6k"]
    return History(full.history_id, full.header, full.records[:BATCH * 3 + BATCH // 2])


@pytest.fixture(scope="module")
def reference(history) -> Extraction:
    return GrammarFrontend(str(TEMPLATES)).extract(history)


@pytest.fixture(scope="module")
def oracle(reference) -> GrammarOracle:
    """The history's 28 records are 28 distinct statements, numbered 1..28 in the corpus."""
    triples = reference.triples()
    late = {t.relation for t in triples[BATCH:]}
    renamed = next(t.relation for t in triples[:BATCH] if t.relation in late)  # in the first batch and later
    return GrammarOracle(renamed, renamed_after=BATCH, misquoted=BATCH + 3, hopeless=2 * BATCH + 2,
                         doubled=2 * BATCH + 5)


@pytest.fixture(scope="module")
def server(oracle):
    with FaultyServer(oracle) as srv:
        yield srv


def make_frontend(url: str, tmp: Path, max_new_tokens: int = 2048, **kw) -> LLMFrontend:
    return with_generation(LLMFrontend(served_extractor(url, max_new_tokens), **work_dirs(tmp), **{"batch_records": BATCH, **kw}))


def triples_of(extraction: Extraction) -> list[tuple]:
    return [(r.pos, r.status, [(t.subject, t.relation, t.object) for t in r.triples]) for r in extraction.records]


def test_the_loop_reproduces_the_reference_except_what_its_mistakes_cost(server, oracle, history, reference,
                                                                        tmp_path):
    frontend = make_frontend(server.url, tmp_path)
    extraction = frontend.extract(history)
    unresolved = {history.records[oracle.hopeless - 1].pos, history.records[oracle.doubled - 1].pos}
    expected = [(pos, "unresolved", []) if pos in unresolved else (pos, status, triples)
                for pos, status, triples in triples_of(reference)]
    assert triples_of(extraction) == expected  # renamed relations aligned back, the misquote repaired
    # 28 records in 4 batches; the misquoted and the hopeless record are each asked once more
    assert oracle.calls == ["batch", "batch", "repair", "batch", "repair", "batch", "align"]
    assert oracle.renamed in extraction.relations and f"{oracle.renamed}_alt" not in extraction.relations
    assert set(extraction.relations) == {t.relation for t in extraction.triples()}

    frozen = json.loads(frontend.frozen_path(corpus_of([history])).read_text())
    assert frozen["alignment"] == {f"{oracle.renamed}_alt": oracle.renamed}
    assert frozen["statements"] == [r.text for r in history]
    assert [(r["status"], [t[:3] for t in r["triples"]]) for r in frozen["records"]] == [
        (status, [list(t) for t in triples]) for _, status, triples in triples_of(extraction)]


def test_a_statement_is_extracted_once_and_means_the_same_in_every_history(oracle, history, reference, tmp_path):
    """Two histories overlapping in 10 statements, renumbered: their 28 distinct statements
    are the fixture history's, so the corpus, its 7 calls and its frozen file are the same."""
    first = History("first", history.header, history.records[:20])
    second = History("second", history.header,
                     tuple(Record(100 + r.pos, r.text) for r in history.records[10:]))
    with FaultyServer(oracle) as srv:
        frontend = make_frontend(srv.url, tmp_path)
        frontend.prepare([first, second])
        assert srv.counts.total() == 7
        extractions = [frontend.extract(first), frontend.extract(second)]
        assert srv.counts.total() == 7  # both histories are served from the corpus
    by_text = {r.text: e for r, e in zip(history, make_frontend(srv.url, tmp_path).extract(history).records)}
    for h, extraction in zip((first, second), extractions):
        assert [r.pos for r in extraction.records] == [r.pos for r in h] and extraction.history_id == h.history_id
        for record, got in zip(h, extraction.records):
            assert got.triples == tuple(dataclasses.replace(t, pos=record.pos) for t in by_text[record.text].triples)


def test_a_frozen_extraction_is_reused_without_a_call_and_a_foreign_one_is_refused(oracle, history, tmp_path):
    with FaultyServer(oracle) as srv:  # the extractor's identity includes its URL: reuse needs the same one
        first = make_frontend(srv.url, tmp_path).extract(history)
        path = make_frontend(srv.url, tmp_path).frozen_path(corpus_of([history]))
        path.unlink()  # the prediction store still holds every answer: a rerun sends nothing
        assert make_frontend(srv.url, tmp_path).extract(history) == first and srv.counts.total() == 7
    assert make_frontend(srv.url, tmp_path).extract(history) == first  # the server is gone: only the file answers

    data = json.loads(path.read_text())
    path.write_text(json.dumps({**data, "history_id": "another"}))
    with pytest.raises(DataError, match="holds .* of another"):
        make_frontend(srv.url, tmp_path).extract(history)
    path.write_text("{")
    with pytest.raises(DataError, match="unreadable frozen extraction"):
        make_frontend(srv.url, tmp_path).extract(history)


def test_what_decides_the_extraction_is_in_the_fingerprint(server, tmp_path):
    base = make_frontend(server.url, tmp_path).frontend_id
    assert make_frontend(server.url, tmp_path).frontend_id == base
    assert make_frontend(server.url, tmp_path, repair_rounds=0).frontend_id != base
    assert make_frontend(server.url, tmp_path, batch_records=BATCH + 1).frontend_id != base
    assert make_frontend(server.url, tmp_path, max_new_tokens=1024).frontend_id != base
    reworded = make_frontend(server.url, tmp_path)
    reworded.extract_prompt = dataclasses.replace(reworded.extract_prompt, system="Extract facts.")
    assert reworded.frontend_id != base


def test_a_history_outside_the_prepared_corpus_is_refused(server, history, tmp_path):
    frontend = make_frontend(server.url, tmp_path)
    frontend.prepare([History("part", history.header, history.records[:BATCH])])
    with pytest.raises(DataError, match=f"{len(history) - BATCH} statements outside the prepared corpus"):
        frontend.extract(history)


def test_a_statement_repeated_in_one_history_is_served_at_every_position(server, history, tmp_path):
    repeated = History("repeated", history.header, history.records + (Record(1000, history.records[0].text),))
    frontend = make_frontend(server.url, tmp_path)
    extraction = frontend.extract(repeated)
    first, again = extraction.records[0], extraction.records[-1]
    assert again.pos == 1000 and all(t.pos == 1000 for t in again.triples)
    assert [(t.subject, t.relation, t.object, t.subject_span) for t in again.triples] == [
        (t.subject, t.relation, t.object, t.subject_span) for t in first.triples]
    assert len(json.loads(frontend.frozen_path(corpus_of([repeated])).read_text())["statements"]) == len(history)


def test_an_alignment_cut_at_the_token_cap_stops_extraction(oracle, history, tmp_path):
    oracle.align_finish = "length"
    try:
        with FaultyServer(oracle) as srv:
            frontend = make_frontend(srv.url, tmp_path)
            with pytest.raises(DataError, match="alignment of .* names was cut at the token cap"):
                frontend.extract(history)
    finally:
        oracle.align_finish = "stop"
    assert not frontend.frozen_path(corpus_of([history])).exists()


def test_a_frozen_file_named_in_the_config_is_used_whoever_made_it(server, history, tmp_path):
    made = make_frontend(server.url, tmp_path)
    expected = made.extract(history)
    path = made.frozen_path(corpus_of([history]))
    elsewhere = make_frontend("http://127.0.0.1:9/v1", tmp_path / "other", frozen=str(path))  # never called
    assert elsewhere.extract(history) == expected
    other_data = make_frontend("http://127.0.0.1:9/v1", tmp_path / "other", frozen=str(path))
    with pytest.raises(DataError, match="not of this dataset's 27 statements"):
        other_data.extract(History("shorter", history.header, history.records[1:]))
    with pytest.raises(DataError, match="frontend.frozen names no file"):
        make_frontend(server.url, tmp_path, frozen=str(tmp_path / "missing.json")).extract(history)


def test_a_failed_call_stops_extraction_and_freezes_nothing(server, history, tmp_path):
    with pytest.raises(RuntimeError, match="unreachable"):  # a wrong URL fails before any record is asked
        make_frontend("http://127.0.0.1:9/v1", tmp_path).extract(history)
    frontend = make_frontend(server.url, tmp_path)
    server.inject("500", "500")  # the first batch call fails on both of its tries
    with pytest.raises(DataError, match="the extractor failed on records .* rerun to retry"):
        frontend.extract(history)
    assert not frontend.frozen_path(corpus_of([history])).exists()
    assert frontend.extract(history).history_id == history.history_id  # the rerun asks again and finishes


def test_the_config_composes_an_extractor_and_reads_the_history_when_nothing_is_selected(server, tmp_path):
    cfg = compose_config("frontend=llm", "reader@frontend.extractor=openai",
                         f"frontend.extractor.base_url={server.url}", f"paths.cache_dir={tmp_path}")
    frontend = with_generation(instantiate(cfg.frontend))
    assert isinstance(frontend, LLMFrontend) and isinstance(frontend.extractor, OpenAIReader)
    assert frontend.extractor.max_new_tokens == 2048 and cfg.reader.name != "openai"  # the question reader is untouched
    assert instantiate(cfg.arm).empty_fallback == "history"
    assert compose_config().read.empty_fallback == "latest_state"  # the grammar grid (B.1)


# ---------------------------------------------------------------- cost and the journal

def journaled(frontend: LLMFrontend, corpus: History) -> list[Prediction]:
    return list(PredictionJournal(frontend.work_path(corpus, ".journal.jsonl")).read().values())


def test_the_cost_is_the_sum_of_the_calls_usage_and_is_frozen_with_the_extraction(server, history, tmp_path):
    frontend = make_frontend(server.url, tmp_path)
    frontend.extract(history)
    corpus = corpus_of([history])
    calls = journaled(frontend, corpus)  # every call this extraction answered, one line each
    assert len(calls) == 7 and all(p.usage["prompt_tokens"] > 0 for p in calls)
    cost = json.loads(frontend.frozen_path(corpus).read_text())["cost"]
    assert cost == {"calls": 7, "input_tokens": sum(p.usage["prompt_tokens"] for p in calls),
                    "output_tokens": sum(p.usage["completion_tokens"] for p in calls),
                    "seconds": total(read_sittings(frontend.work_path(corpus, ".sittings.jsonl")))["seconds"],
                    "sent": 7, "calls_by_purpose": {"align": 1, "extract": 4, "repair": 2}}  # the oracle's 7 calls
    assert frontend.metadata["cost"] == cost
    again = make_frontend(server.url, tmp_path)
    again.extract(history)  # from the frozen file: the same figures, nothing recounted
    assert again.metadata == frontend.metadata and again.metadata["alignment"]


def test_an_extraction_stopped_on_one_machine_resumes_on_another_from_the_journal(oracle, history, tmp_path):
    """The first machine answers 3 calls, then its extractor fails; the journal (committed
    with the extractions folder) moves to a machine with an empty prediction store, which
    sends only the 4 calls still missing and freezes what a clean run freezes."""
    with FaultyServer(oracle) as srv:
        clean = make_frontend(srv.url, tmp_path / "clean")
        expected = clean.extract(history)
        srv.inject("ok", "ok", "ok", "500", "500")
        with pytest.raises(DataError, match="the extractor failed"):
            make_frontend(srv.url, tmp_path / "first").extract(history)
        shutil.copytree(tmp_path / "first" / "extractions", tmp_path / "second" / "extractions")
        before = len(oracle.calls)
        resumed = make_frontend(srv.url, tmp_path / "second")
        assert resumed.extract(history) == expected
        assert len(oracle.calls) - before == 4
    corpus = corpus_of([history])
    cost = resumed.metadata["cost"]
    assert (cost["calls"], cost["sent"]) == (7, 4)
    assert [p.usage for p in sorted(journaled(resumed, corpus), key=lambda p: p.request_id)] == [
        p.usage for p in sorted(journaled(clean, corpus), key=lambda p: p.request_id)]
    assert len(read_sittings(resumed.work_path(corpus, ".sittings.jsonl"))) == 2  # both sittings timed


def test_a_rerun_from_the_journal_alone_sends_nothing_and_an_older_frozen_file_still_loads(server, history,
                                                                                         tmp_path):
    frontend = make_frontend(server.url, tmp_path)
    first = frontend.extract(history)
    path = frontend.frozen_path(corpus_of([history]))
    data = json.loads(path.read_text())
    path.unlink()
    shutil.rmtree(tmp_path / "cache")  # no prediction store: only the journal remembers
    sent = server.counts.total()
    rerun = make_frontend(server.url, tmp_path)
    assert rerun.extract(history) == first and server.counts.total() == sent
    assert rerun.metadata["cost"] == {**data["cost"], "sent": 0}
    del data["cost"]  # a file frozen before costs were recorded
    path.write_text(json.dumps(data))
    older = make_frontend(server.url, tmp_path)
    assert older.extract(history) == first and "cost" not in older.metadata


@pytest.mark.slow
@OFFLINE_SMALL
def test_the_offline_05b_extractor_runs_the_loop_on_real_records(dataset, tmp_path):
    """The real offline 0.5B model as extractor (transformers, its chat template, a long JSON
    reply) on 4 real records in one call: whatever it says, every record ends with a validated status,
    the extraction is frozen, and a rerun reuses it. How much it resolved is printed, not
    asserted: the 0.5B is a smoke test of the path, not an extractor to rely on."""
    full = dataset.histories["factconsolidation_6k"]
    history = History(full.history_id, full.header, full.records[:4])
    cfg = compose_config("frontend=llm", "reader@frontend.extractor=qwen25_coder_05b", "frontend.batch_records=4",
                         "frontend.repair_rounds=0", "frontend.extractor.max_new_tokens=384", f"paths.cache_dir={tmp_path / 'cache'}",
                         f"paths.results_dir={tmp_path / 'results'}")
    extraction = with_generation(instantiate(cfg.frontend)).extract(history)
    assert [r.pos for r in extraction.records] == [r.pos for r in history]
    assert with_generation(instantiate(cfg.frontend)).extract(history) == extraction  # frozen: a fresh frontend reads the file
    resolved = [r for r in extraction.records if r.status == "facts"]
    print(f"\nqwen25_coder_05b as extractor: {len(resolved)}/4 records resolved, relations {extraction.relations}")
