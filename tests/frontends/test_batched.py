"""Batched repair and review (issue 38, cmc/frontends/batched.py): against the served grammar
oracle (tests/frontends/oracle.py) a batch's rejected records are repaired in one call a
round, a rule's dissenters reviewed in one call (in chunks when the extractor's input cap
is too small for them), with the per-record mode's extraction and fewer calls; the default
modes keep every committed fingerprint."""
from __future__ import annotations

import dataclasses
from pathlib import Path
from types import SimpleNamespace

import pytest

from cmc.frontends.batched import span_of
from cmc.frontends.hybrid import HybridFrontend
from cmc.frontends.llm import LLMFrontend
from cmc.frontends.reply_grammar import lines_grammar
from cmc.records import History, Record
from common.configurable import instantiate_known
from readers.openai_api import OpenAIReader
from tests.conftest import OFFLINE_SMALL, compose_config
from tests.frontends.oracle import GrammarOracle, served_extractor, with_generation, work_dirs
from tests.frontends.test_hybrid import CORPUS
from tests.readers.faulty_server import FaultyServer

BATCH = 8
MISQUOTED, HOPELESS = (2, 3, 5, 7, 11, 13), (6, 18)  # 2 to 7 share the first batch, 11 and 13 the second


# ---------------------------------------------------------------- fingerprints

# conf/frontend/*.yaml over the llama.cpp 0.5B (which `make test` installs), computed with the
# code before batched repair existed (5cc0c4d): the default modes must keep every fingerprint,
# or the committed extractions (made by the 1.5B; their table7 bundles replay) would be lost.
BEFORE_IDS = {("llm", "json"): "llm_qwen25_coder_05b_llamacpp@947736583c29",
              ("llm", "lines"): "llm_lines_qwen25_coder_05b_llamacpp@2b6238afaf8d",
              ("hybrid", "json"): "hybrid_qwen25_coder_05b_llamacpp@4ad10693bbc7",
              ("hybrid", "lines"): "hybrid_lines_qwen25_coder_05b_llamacpp@fc11364a4c2c"}


def configured(frontend: str, reply_format: str, *overrides: str):
    cfg = compose_config(f"frontend={frontend}", "reader@frontend.extractor=qwen25_coder_05b_llamacpp",
                         f"frontend.reply_format={reply_format}", *overrides)
    return instantiate_known(cfg.frontend)


@OFFLINE_SMALL
@pytest.mark.parametrize(("frontend", "reply_format"), sorted(BEFORE_IDS))
def test_the_default_fingerprints_are_unchanged_and_batched_modes_get_their_own(frontend, reply_format):
    base = configured(frontend, reply_format)
    assert base.frontend_id == BEFORE_IDS[frontend, reply_format] and base.repair == "per_record"
    batched = configured(frontend, reply_format, "frontend.repair=batched")
    assert batched.repair == "batched" and batched.frontend_id != base.frontend_id
    if frontend == "hybrid":
        review = configured(frontend, reply_format, "frontend.review=batched")
        assert review.review == "batched" and review.frontend_id not in (base.frontend_id, batched.frontend_id)


def test_an_unknown_mode_is_refused(tmp_path):
    with pytest.raises(ValueError, match="repair must be one of per_record, batched"):
        LLMFrontend(served_extractor("http://127.0.0.1:9"), **work_dirs(tmp_path), repair="all")
    with pytest.raises(ValueError, match="review must be one of per_statement, batched"):
        HybridFrontend(extractor=served_extractor("http://127.0.0.1:9"), **work_dirs(tmp_path), review="all")


def test_a_request_names_records_apart_only_when_they_do_not_follow_each_other():
    records = [Record(p, "x") for p in (3, 4, 5, 9)]
    assert span_of(records[:1]) == "record 3" and span_of(records[:3]) == "records 3 to 5"
    assert span_of(records) == "records 3, 4, 5 and 9" and span_of(records[2:]) == "records 5 and 9"


# ---------------------------------------------------------------- batched repair, direct LLM

@pytest.fixture(scope="module")
def history(dataset) -> History:
    full = dataset.histories["factconsolidation_6k"]
    return History(full.history_id, full.header, full.records[:BATCH * 3 + BATCH // 2])


def extract(history: History, tmp: Path, oracle: GrammarOracle, **kw):
    with FaultyServer(oracle) as srv:
        frontend = with_generation(LLMFrontend(served_extractor(srv.url), **work_dirs(tmp),
                                               batch_records=BATCH, repair_rounds=2, **kw))
        return frontend.extract(history), frontend.metadata["cost"]["calls_by_purpose"]


def test_batched_repair_fixes_a_batch_in_one_call_a_round_as_per_record_repair_does(history, tmp_path):
    per_record, per_record_calls = extract(history, tmp_path / "a", GrammarOracle(misquoted=MISQUOTED, hopeless=HOPELESS))
    oracle = GrammarOracle(misquoted=MISQUOTED, hopeless=HOPELESS)
    batched, batched_calls = extract(history, tmp_path / "b", oracle, repair="batched")
    assert batched.records == per_record.records and batched.relations == per_record.relations
    positions = {r.pos: i for i, r in enumerate(history.records, 1)}  # corpus number of each record
    unresolved = [positions[r.pos] for r in batched.records if r.status == "unresolved"]
    assert unresolved == list(HOPELESS)  # the misquotes repaired; the hopeless after both rounds
    # per record: batch 1 asks 2, 3, 5, 6, 7; batch 2 asks 11, 13; batch 3 asks 18. A hopeless
    # record's second round is the very request of its first: the store answers it, no call.
    assert per_record_calls == {"align": 1, "extract": 4, "repair": 8}
    # batched: batch 1 asks 2 to 7, then 6 alone; batch 2 asks 11 and 13; batch 3 asks 18
    assert batched_calls == {"align": 1, "extract": 4, "repair": 4}
    assert oracle.calls == ["batch", "repair", "repair", "batch", "repair", "batch", "repair", "batch", "align"]
    first_repair, second_round = oracle.users[1:3]
    assert first_repair.endswith("records 2, 3, 5, 6 and 7.") and first_repair.count("was rejected") == 5
    assert second_round.endswith("record 6.") and second_round.count("was rejected") == 1


CROWDED = (2, 3, 11)  # 2 and 3 share the first batch and its batched repair; 11 is alone in the second's


def test_the_sweep_asks_each_statement_left_unresolved_alone_after_the_pass(history, tmp_path):
    """A statement a small model skips whenever it shares a call (`crowded`) stays unresolved
    through batched repair when a neighbour is rejected with it, and is read on the sweep,
    asked alone; the pass's own calls are the same with and without the sweep."""
    positions = {r.pos: i for i, r in enumerate(history.records, 1)}
    plain, plain_calls = extract(history, tmp_path / "a", GrammarOracle(crowded=CROWDED, hopeless=HOPELESS),
                                 repair="batched")
    oracle = GrammarOracle(crowded=CROWDED, hopeless=HOPELESS)
    swept, swept_calls = extract(history, tmp_path / "b", oracle, repair="batched", sweep=True)
    assert sorted(positions[r.pos] for r in plain.records if r.status == "unresolved") == sorted([2, 3, *HOPELESS])
    assert sorted(positions[r.pos] for r in swept.records if r.status == "unresolved") == list(HOPELESS)
    fixed = {r.pos for r in plain.records if r.status == "unresolved"} - {r.pos for r in swept.records if r.status == "unresolved"}
    assert all(a == b for a, b in zip(plain.records, swept.records) if a.pos not in fixed)
    # the sweep asks 2, 3, 6 and 18 alone (two of them hopeless): four calls after the pass's own
    assert swept_calls == {**plain_calls, "sweep": 4}
    assert oracle.calls[-5:] == ["repair"] * 4 + ["align"]  # a sweep request is worded as a repair
    assert oracle.users[-2].endswith("record 18.") and "no line for this record" not in oracle.users[-2]


class FakeCalls:
    """ExtractorCalls that keep each request and answer it with nothing (every record rejected)."""

    def __init__(self) -> None:
        self.requests: list[tuple[object, str]] = []
        self.sent = 0

    def answer(self, request, where, purpose):
        self.requests.append((request, purpose))
        return SimpleNamespace(raw="", finish_reason="stop")


def test_a_constrained_batched_repair_is_decoded_under_the_grammar_of_exactly_its_records(tmp_path):
    frontend = LLMFrontend(served_extractor("http://127.0.0.1:9"), **work_dirs(tmp_path), reply_format="lines",
                           constrained=True, repair="batched")
    batch = [Record(p, f"The capital of Land{p} is City{p}.") for p in range(1, 7)]
    calls = FakeCalls()
    fixed, still = frontend.repair_round(calls, batch, {}, {2: "bad", 5: "worse"})
    (request, purpose), = calls.requests
    assert purpose == "repair" and fixed == {} and set(still) == {2, 5}
    assert request.constraint == lines_grammar([batch[1], batch[4]])
    assert "Your last answer for record 5 was rejected: worse." in request.messages[-1]["content"]


# ---------------------------------------------------------------- batched review, hybrid

def hybrid(history: History, tmp: Path, oracle: GrammarOracle, extractor=served_extractor, **kw):
    with FaultyServer(oracle) as srv:
        frontend = with_generation(HybridFrontend(extractor=extractor(srv.url), **work_dirs(tmp),
                                                  **{"batch_records": 4, "checks": 0, **kw}))
        return frontend.extract(history), frontend.metadata


def test_a_batched_review_asks_all_dissenters_of_a_rule_in_one_call(tmp_path):
    """test_hybrid's corpus: the married rule has one dissenter (9), the written rule is a
    tie (4 and 8 asked): three review calls per statement, two batched, the same extraction."""
    history = History("synthetic", "", tuple(Record(i, t) for i, t in enumerate(CORPUS, 1)))
    oracle_args = {"renamed": "was_written_in_the_language_of", "renamed_after": 4, "conflicted": "is_married_to",
                   "hopeless": 11}
    per_statement, before = hybrid(history, tmp_path / "a", GrammarOracle(**oracle_args))
    oracle = GrammarOracle(**oracle_args)
    batched, after = hybrid(history, tmp_path / "b", oracle, review="batched")
    assert batched.records == per_statement.records and after["hybrid"] == before["hybrid"]
    assert before["cost"]["calls_by_purpose"] == {"align": 1, "extract": 3, "repair": 1, "review": 3}
    assert after["cost"]["calls_by_purpose"] == {"align": 1, "extract": 3, "repair": 1, "review": 2}
    reviews = [user for user in oracle.users if "records of this same form" in user]
    assert [r.count("was rejected") for r in reviews] == [1, 2] and reviews[1].endswith("records 4 and 8.")


def test_the_hybrid_sweeps_its_rejected_statements_alone_too(tmp_path):
    """The hybrid's direct extraction leaves crowded statements (both in one batch and its
    repair) unresolved; its sweep reads them, each told why its last answer was rejected."""
    history = History("synthetic", "", tuple(Record(i, t) for i, t in enumerate(CORPUS, 1)))
    plain, before = hybrid(history, tmp_path / "a", GrammarOracle(crowded=(1, 2)), repair="batched")
    oracle = GrammarOracle(crowded=(1, 2))
    swept, after = hybrid(history, tmp_path / "b", oracle, repair="batched", sweep=True)
    assert [r.pos for r in plain.records if r.status == "unresolved"] == [1, 2]
    assert [r.pos for r in swept.records if r.status == "unresolved"] == []
    assert after["cost"]["calls_by_purpose"] == {**before["cost"]["calls_by_purpose"], "sweep": 2}
    sweeps = oracle.users[-3:-1]  # the two calls before the alignment's
    assert [u.rsplit(" ", 1)[1] for u in sweeps] == ["1.", "2."]
    assert all("Your last answer for record" in u and u.count("was rejected") == 1 for u in sweeps)


def test_the_sweep_leaves_a_statement_the_extractor_itself_called_unresolved(tmp_path):
    """"Alice is not married to Bob." answered `unresolved` (the prompt's use of the status for a
    negation) was the extractor's answer, not a rejected one: the sweep never asks it again."""
    texts = ["The capital of Peru is Lima.", "Alice is not married to Bob.", "The capital of Chile is Santiago.",
             "Zed is a citizen of Peru."]
    history = History("negation", "", tuple(Record(i, t) for i, t in enumerate(texts, 1)))
    oracle = GrammarOracle(crowded=(3, 4))
    extraction, calls = extract(history, tmp_path, oracle, repair="batched", sweep=True)
    assert [r.status for r in extraction.records] == ["facts", "unresolved", "facts", "facts"]
    assert calls["sweep"] == 2 and not any(u.endswith("record 2.") for u in oracle.users)


class CappedExtractor(OpenAIReader):
    """A served extractor whose input cap holds `max_lines` lines of records and rejection
    notes: a longer request reports its evidence cut, as a tokenizing reader does."""

    max_lines = 6

    def prepare(self, prompt, evidence, question):
        request = super().prepare(prompt, evidence, question)
        lines = evidence.count("\n") + 1 + question.count("was rejected")
        return dataclasses.replace(request, evidence_truncated_tokens=max(0, lines - self.max_lines))


def capped(url: str) -> CappedExtractor:
    reader = served_extractor(url)
    reader.__class__ = CappedExtractor
    return reader


def test_a_batched_review_over_the_input_cap_is_asked_in_chunks_that_fit(tmp_path):
    """Four statements of one form read two ways two each (a tie: all four reviewed, with
    four rejection notes: 8 lines over a cap of 6), so the review goes in two calls of two."""
    texts = ["Alice is married to Bob.", "Carol is married to Dan.", "Erin is married to Frank.",
             "Gina is married to Hal."]
    history = History("tie", "", tuple(Record(i, t) for i, t in enumerate(texts, 1)))
    oracle = GrammarOracle(conflicted="is_married_to")
    extraction, metadata = hybrid(history, tmp_path, oracle, extractor=capped, review="batched")
    reviews = [user for user in oracle.users if "records of this same form" in user]
    assert [r.count("was rejected") for r in reviews] == [2, 2]
    assert [r.splitlines()[-1] for r in reviews] == ["Give the JSON for records 1 to 2.", "Give the JSON for records 3 to 4."]
    assert metadata["cost"]["calls_by_purpose"]["review"] == 2 and len(extraction.records) == 4


def test_batched_repair_and_review_together_give_the_per_record_extraction(tmp_path):
    history = History("synthetic", "", tuple(Record(i, t) for i, t in enumerate(CORPUS, 1)))
    args = {"renamed": "was_written_in_the_language_of", "renamed_after": 4, "conflicted": "is_married_to",
            "hopeless": (11, 12), "misquoted": (1, 2, 3)}
    per_record, before = hybrid(history, tmp_path / "a", GrammarOracle(**args))
    batched, after = hybrid(history, tmp_path / "b", GrammarOracle(**args), repair="batched", review="batched")
    assert batched.records == per_record.records and after["hybrid"] == before["hybrid"]
    calls = before["cost"]["calls_by_purpose"], after["cost"]["calls_by_purpose"]
    # batch 1 (1 to 4) rejects 1, 2, 3; batch 3 rejects 11, 12: five repairs per record, two batched
    assert calls == ({"align": 1, "extract": 3, "repair": 5, "review": 3},
                     {"align": 1, "extract": 3, "repair": 2, "review": 2})
