"""The hybrid frontend: its rules on hand-made extractions, its loop against the served
grammar oracle (tests/frontends/oracle.py) on a corpus written so that every step happens
(a consistent rule induced and applied to statements never sent, a conflict resolved by
review, a conflict rejected after review, direct extraction where no rule decides, a record
left unresolved, an over-general rule caught by its checks), on real FactConsolidation
records through the entry point every run uses (no question read), and on the tiny model
through the real transformers reader path."""
from __future__ import annotations

import json
import re
import shutil
from collections import Counter
from pathlib import Path

import pytest

from cmc.extraction import STATUSES, Extraction, RecordExtraction, Triple
from cmc.frontends.grammar import GrammarFrontend
from cmc.frontends.hybrid import HybridFrontend, dissenters
from cmc.frontends.llm import LLMFrontend, corpus_of
from cmc.frontends.rules import Rule, RuleBook, rule_of
from cmc.graph import build_memories
from cmc.records import History, Record
from common.configurable import instantiate_known
from common.errors import DataError
from generation.journal import PredictionJournal
from readers.hf import HFReader
from readers.models import LocalModel
from tests.conftest import TEMPLATES, compose_config
from tests.frontends.oracle import GrammarOracle, served_extractor, with_generation, work_dirs
from tests.readers.faulty_server import FaultyServer

GRAMMAR = GrammarFrontend(str(TEMPLATES))


def facts(pos: int, text: str, relation: str | None = None) -> RecordExtraction:
    """The grammar parse of a statement, its relation renamed if asked."""
    (t,) = GRAMMAR.parse(pos, text).triples
    return RecordExtraction(pos, "facts", (Triple(t.subject, relation or t.relation, t.object, pos,
                                                  t.subject_span, t.object_span),))


# ---------------------------------------------------------------- rules, hand-made extractions

def test_a_rule_is_the_statement_with_its_spans_as_slots_and_reads_them_back():
    text = "The capital of Peru is Lima."
    rule = rule_of(text, facts(1, text).triples[0])
    assert rule == Rule("The capital of {S} is {O}.")
    assert rule.match("The capital of Isle of Man is Douglas.") == ((15, 26), (30, 37))
    assert rule.match("The capital of Peru is Lima") is None  # the literal end differs
    assert rule.match("The capital of  is Lima.") is None  # an empty slot holds no entity
    owner = "Lima is owned by Peru."  # object before subject: the slots keep their roles
    rule = rule_of(owner, Triple("Peru", "owner", "Lima", 1, (17, 21), (0, 4)))
    assert rule == Rule("{O} is owned by {S}.") and rule.match("Acme is owned by Bob.") == ((17, 20), (0, 4))


@pytest.mark.parametrize(("text", "subject", "obj"), [
    ("Peru Lima", (0, 4), (5, 9)),  # no literal letter left
    ("The capital of Peru is Lima.", (15, 19), (15, 27)),  # overlapping spans
    ("Lima is Peru is Chile.", (0, 12), (16, 21)),  # the rule would read other spans back
    ("A {S} is {O}.", (2, 5), (9, 12)),  # the text holds slot markers
])
def test_no_rule_comes_from_a_form_it_could_not_read_back(text, subject, obj):
    triple = Triple(text[slice(*subject)], "r", text[slice(*obj)], 1, subject, obj)
    assert rule_of(text, triple) is None


LOCATED = ["Acme is located in Lima.", "Bolt is located in Rome.", "Cray is located in the country of Peru.",
           "Dell is located in Oslo.", "Eon is located in the country of Italy.", "Fiat is located in Kyiv.",
           "Gap is located in the country of Chile."]


def test_a_statement_a_rule_misreads_is_evidence_against_it():
    """Two examples keep "{S} is located in {O}.", which reads the country form too (object
    "the country of Peru"); its checks, spread over what it matches, land on that form, and
    once extracted directly they contradict it."""
    book = RuleBook(History("c", "", tuple(Record(i, t) for i, t in enumerate(LOCATED, 1))), min_support=2, checks=2)
    direct = {pos: facts(pos, LOCATED[pos - 1]) for pos in (1, 2)}
    (general,) = book.kept(book.evidence(direct))
    assert general == Rule("{S} is located in {O}.") and set(book.cover(direct)) == {3, 4, 5, 6, 7}
    assert book.cover(direct)[3][1].triples[0].object == "the country of Peru"  # what the checks are for
    assert book.due_checks(direct) == [3, 5]  # the 2nd and 4th of its 7 statements
    direct.update({pos: facts(pos, LOCATED[pos - 1]) for pos in (3, 5)})
    evidence = book.evidence(direct)
    assert evidence[general] == {1: "is_located_in", 2: "is_located_in", 3: None, 5: None}
    assert book.conflicts(evidence) == [general]
    book.settle(evidence)
    (country,) = book.kept(book.evidence(direct))
    assert country == Rule("{S} is located in the country of {O}.")
    covered = book.cover(direct)
    assert set(covered) == {7} and covered[7][1].triples[0].object == "Chile"  # 4 and 6: no kept rule
    assert book.due_checks(direct) == [7]


def read_as(pos: int, text: str, subject: str, relation: str, obj: str) -> RecordExtraction:
    """A direct extraction naming its subject and object by their first occurrences."""
    s0, o0 = text.index(subject), text.index(obj)
    return RecordExtraction(pos, "facts", (Triple(subject, relation, obj, pos, (s0, s0 + len(subject)),
                                                  (o0, o0 + len(obj))),))


def test_a_statement_two_kept_rules_match_is_not_covered():
    texts = ["The president of Peru is Dina.", "The mayor of Peru is Rafael.", "The capital of Chile is Santiago.",
             "The capital of Japan is Tokyo.", "The capital of Peru is Lima.", "The capital of France is Paris."]
    book = RuleBook(History("c", "", tuple(Record(i, t) for i, t in enumerate(texts, 1))), min_support=2, checks=0)
    direct = {1: read_as(1, texts[0], "president", "office_in_peru", "Dina"),
              2: read_as(2, texts[1], "mayor", "office_in_peru", "Rafael"),
              3: read_as(3, texts[2], "Chile", "capital", "Santiago"), 4: read_as(4, texts[3], "Japan", "capital", "Tokyo")}
    assert {r.template for r in book.kept(book.evidence(direct))} == {"The {S} of Peru is {O}.",
                                                                      "The capital of {S} is {O}."}
    covered = book.cover(direct)  # both read statement 5, each its own way: neither decides
    assert set(covered) == {6} and covered[6][1].triples[0].subject == "France"


def test_a_rule_is_kept_on_enough_agreeing_support_and_rejected_once_settled_in_conflict():
    texts = ["The capital of Peru is Lima.", "The capital of Chile is Santiago.", "The capital of Japan is Tokyo."]
    book = RuleBook(History("c", "", tuple(Record(i, t) for i, t in enumerate(texts, 1))), min_support=2, checks=0)
    one = {1: facts(1, texts[0])}
    assert book.kept(book.evidence(one)) == {} and book.cover(one) == {}  # one example shows no consistency
    split = {**one, 2: facts(2, texts[1], relation="capital_city")}
    evidence = book.evidence(split)
    (rule,) = book.conflicts(evidence)
    assert book.kept(evidence) == {} and evidence[rule] == {1: "the_capital_of_is", 2: "capital_city"}
    book.reviewed.add(rule)
    assert book.conflicts(evidence) == []  # reviewed once only
    book.settle(evidence)
    agreed = {**one, 2: facts(2, texts[1])}  # agreeing now, but rejected for good
    assert book.kept(book.evidence(agreed)) == {} and book.cover(agreed) == {}
    assert book.summary(agreed, {})["rejected"] == [
        {"rule": rule.template, "evidence": 2, "readings": {"the_capital_of_is": 2}}]
    assert book.kept(book.evidence(agreed | {3: RecordExtraction(3, "unresolved")})) == {}


def test_a_review_asks_the_dissenters_or_everyone_on_a_tie():
    assert dissenters({1: "a", 2: "a", 3: "b", 4: "c"}) == [3, 4]
    assert dissenters({1: "a", 2: "b"}) == [1, 2]
    assert dissenters({5: "a", 2: "b", 3: "b", 4: "a"}) == [2, 3, 4, 5]
    assert dissenters({1: "a", 2: None, 3: None}) == [1]  # another reading can be the majority


# ---------------------------------------------------------------- the loop against a served extractor

BATCH = 4
CAPITAL, MARRIED, WRITTEN = "the_capital_of_is", "is_married_to", "was_written_in_the_language_of"
CORPUS = [
    "The capital of Peru is Lima.",                       # 1  round 1: capital kept (1, 3)
    "Alice is married to Bob.",                           # 2  married: the oracle says _x at even numbers
    "The capital of Chile is Santiago.",                  # 3
    "Hamlet was written in the language of English.",     # 4  written: one example after round 1
    "The capital of France is Paris.",                    # 5  covered, never sent
    "Carol is married to Dan.",                           # 6  round 2
    "Acme was founded by Eve.",                           # 7  a form seen once: direct extraction only
    "Faust was written in the language of German.",      # 8  named _alt in its batch: a tie, reviewed
    "Erin is married to Frank.",                          # 9  the married dissenter: reviewed, still odd
    "The capital of Japan is Tokyo.",                     # 10 covered, never sent
    "Zed is a citizen of Peru.",                          # 11 never answered: unresolved (round 3)
    "Gina is married to Hal.",                            # 12 its rule was rejected: extracted directly
    "Ulysses was written in the language of Greek.",      # 13 covered by the reviewed rule, never sent
]
COVERED = {5, 10, 13}


@pytest.fixture()
def oracle() -> GrammarOracle:
    return GrammarOracle(renamed=WRITTEN, renamed_after=4, conflicted=MARRIED, hopeless=11)


@pytest.fixture()
def server(oracle):
    with FaultyServer(oracle) as srv:
        yield srv


def make_hybrid(url: str, tmp: Path, **kw) -> HybridFrontend:
    """Checks off unless asked for: the loop's other steps are then exactly the corpus's notes."""
    return with_generation(HybridFrontend(extractor=served_extractor(url), **work_dirs(tmp), **{"batch_records": BATCH, "checks": 0, **kw}))


def expected_records() -> list[tuple]:
    out = []
    for pos, text in enumerate(CORPUS, 1):
        if pos == 11:
            out.append((pos, "unresolved", []))
            continue
        (t,) = GRAMMAR.parse(pos, text).triples
        relation = f"{MARRIED}_x" if t.relation == MARRIED and pos % 2 == 0 else t.relation
        out.append((pos, "facts", [(t.subject, relation, t.object, t.subject_span, t.object_span)]))
    return out


def records_of(extraction: Extraction) -> list[tuple]:
    return [(r.pos, r.status, [(t.subject, t.relation, t.object, t.subject_span, t.object_span) for t in r.triples])
            for r in extraction.records]


def test_rules_are_induced_reviewed_applied_and_the_rest_extracted_directly(server, oracle, tmp_path):
    history = History("synthetic", "", tuple(Record(i, t) for i, t in enumerate(CORPUS, 1)))
    frontend = make_hybrid(server.url, tmp_path)
    extraction = frontend.extract(history)
    assert records_of(extraction) == expected_records()
    # round 1 batch; round 2 batch, the married dissenter (9), the written tie (4, 8);
    # round 3 batch (11, 12), the hopeless 11 repaired in vain; one alignment
    assert oracle.calls == ["batch", "batch", "repair", "repair", "repair", "batch", "repair", "align"]
    shown = "\n".join(oracle.users)
    assert [pos for pos, text in enumerate(CORPUS, 1) if text not in shown] == sorted(COVERED)
    assert sum("records of this same form" in user for user in oracle.users) == 3
    summary = frontend.metadata["hybrid"]
    assert summary == {
        "kept": [{"rule": "The capital of {S} is {O}.", "relation": CAPITAL, "support": 2, "covers": 2},
                 {"rule": "{S} was written in the language of {O}.", "relation": WRITTEN, "support": 2, "covers": 1}],
        "rejected": [{"rule": "{S} is married to {O}.", "evidence": 4,
                      "readings": {MARRIED: 1, f"{MARRIED}_x": 3}}],
        "candidates": 1, "reviewed": 2, "statements": 13, "rounds": 3,
        "extracted_directly": 10, "covered_by_rules": 3, "unresolved": 1}
    calls = PredictionJournal(frontend.work_path(corpus_of([history]), ".journal.jsonl")).read().values()
    cost = frontend.metadata["cost"]
    assert (cost["calls"], cost["sent"]) == (len(calls), 8) == (8, 8)
    # the oracle's "repair" calls after batch 2 are the three conflict reviews
    assert cost["calls_by_purpose"] == {"align": 1, "extract": 3, "repair": 1, "review": 3}
    assert cost["input_tokens"] == sum(p.usage["prompt_tokens"] for p in calls) > 0
    assert cost["output_tokens"] == sum(p.usage["completion_tokens"] for p in calls) > 0
    frozen = json.loads(frontend.frozen_path(corpus_of([history])).read_text())
    assert frozen["hybrid"] == summary and frozen["cost"] == cost


def named_records(oracle: GrammarOracle) -> list[tuple[list[int], list[int]]]:
    """Per extraction request: the records it shows, in order, and those its last line names
    ("records 3 to 6": each of them; "records 2, 4 and 7": those)."""
    out = []
    for user, call in zip(oracle.users, oracle.calls):
        if call == "batch":
            shown = [int(pos) for pos in re.findall(r"^(\d+)\. ", user, re.MULTILINE)]
            last = user.rstrip().splitlines()[-1]
            numbers = [int(n) for n in re.findall(r"\d+", last)]
            out.append((shown, list(range(numbers[0], numbers[1] + 1)) if " to " in last else numbers))
    return out


def test_checks_find_the_forms_an_over_general_rule_misreads(server, oracle, tmp_path):
    history = History("located", "", tuple(Record(i, t) for i, t in enumerate(LOCATED, 1)))
    read = lambda e: [(t.subject, t.relation, t.object) for t in e.triples()]  # noqa: E731
    unchecked = make_hybrid(server.url, tmp_path / "unchecked", batch_records=2).extract(history)
    assert read(unchecked)[2] == ("Cray", "is_located_in", "the country of Peru")  # what checks=0 costs
    frontend = make_hybrid(server.url, tmp_path / "checked", batch_records=2, checks=2)
    assert read(frontend.extract(history)) == read(GRAMMAR.extract(history))
    summary = frontend.metadata["hybrid"]
    assert [(r["rule"], r["readings"]) for r in summary["rejected"]] == [
        ("{S} is located in {O}.", {"is_located_in": 4, "null": 3})]
    assert [r["rule"] for r in summary["kept"]] == ["{S} is located in the country of {O}."]
    # a round's due checks go first, yet each request shows its records in order and names them
    requests = named_records(oracle)
    assert any(shown != list(range(shown[0], shown[-1] + 1)) for shown, _ in requests)  # gaps happen
    assert all(shown == sorted(shown) == named for shown, named in requests), requests


def test_a_frozen_hybrid_extraction_reloads_identically_and_a_rerun_sends_nothing(server, tmp_path):
    history = History("synthetic", "", tuple(Record(i, t) for i, t in enumerate(CORPUS, 1)))
    first = make_hybrid(server.url, tmp_path)
    extraction = first.extract(history)
    sent = server.counts.total()
    again = make_hybrid(server.url, tmp_path)
    assert again.extract(history) == extraction and again.metadata == first.metadata
    path = first.frozen_path(corpus_of([history]))
    path.unlink()
    shutil.rmtree(tmp_path / "cache")  # another machine: only the committed journal remembers
    rerun = make_hybrid(server.url, tmp_path)
    assert rerun.extract(history) == extraction and server.counts.total() == sent
    assert rerun.metadata["hybrid"] == first.metadata["hybrid"]
    assert rerun.metadata["cost"] == {**first.metadata["cost"], "sent": 0}


def test_what_decides_the_hybrid_is_in_its_fingerprint(server, tmp_path):
    base = make_hybrid(server.url, tmp_path).frontend_id
    assert base.startswith("hybrid@") and make_hybrid(server.url, tmp_path).frontend_id == base
    assert make_hybrid(server.url, tmp_path, min_support=3).frontend_id != base
    assert make_hybrid(server.url, tmp_path, round_batches=2).frontend_id != base
    assert make_hybrid(server.url, tmp_path, checks=1).frontend_id != base
    direct = with_generation(LLMFrontend(served_extractor(server.url), **work_dirs(tmp_path), batch_records=BATCH, name="hybrid"))
    assert direct.frontend_id != base  # same name and calls, another loop


class SourceOnly:
    """A dataset as a frontend may see it: histories. Touching its questions fails the test."""

    def __init__(self, histories: dict[str, History]) -> None:
        self.histories = histories

    @property
    def questions(self):
        raise AssertionError("a frontend read the questions")


def test_every_real_statement_comes_out_as_the_grammar_parse_and_no_question_is_read(dataset, tmp_path):
    """All four FactConsolidation histories through build_memories (the entry point every
    run uses) with a dataset whose questions cannot be read: no request shows a question,
    and with an extractor that answers like the grammar frontend the hybrid's 18,336
    statements are the grammar parse, most of them read by rules (the figures docs/frontends.md quotes)."""
    oracle = GrammarOracle()
    with FaultyServer(oracle) as srv:
        frontend = make_hybrid(srv.url, tmp_path, batch_records=20, checks=2)
        memories = build_memories(SourceOnly(dict(dataset.histories)), frontend)
    assert set(memories) == set(dataset.histories)
    shown = "\n".join(oracle.users)
    assert not [q.text for q in dataset.questions if q.text in shown]
    corpus = corpus_of(dataset.histories.values())
    read = lambda e: [(r.pos, r.status, [(t.subject, t.relation, t.object) for t in r.triples])  # noqa: E731
                      for r in e.records]  # spans differ where the direct path finds an earlier copy
    assert read(frontend.extract(corpus)) == read(GRAMMAR.extract(corpus))
    summary = frontend.metadata["hybrid"]
    assert (summary["statements"], summary["extracted_directly"], summary["covered_by_rules"]) == (18336, 297, 18039)
    assert summary["covered_by_rules"] == sum(rule["covers"] for rule in summary["kept"])
    assert (len(summary["kept"]), frontend.metadata["cost"]["calls"]) == (36, 17)
    assert [r["rule"] for r in summary["rejected"]] == ["The {S} is {O}."]  # P1308's form reads every "The X of Y is Z."


def test_the_config_composes_the_hybrid(server, tmp_path):
    cfg = compose_config("frontend=hybrid", "reader@frontend.extractor=openai", f"frontend.extractor.base_url={server.url}",
                         f"paths.cache_dir={tmp_path}", "frontend.min_support=3")
    frontend = with_generation(instantiate_known(cfg.frontend))
    assert isinstance(frontend, HybridFrontend) and frontend.min_support == 3 and frontend.batch_records == 20
    assert frontend.name == "hybrid_openai" and cfg.read.empty_fallback == "history"
    with pytest.raises(DataError, match=r"frontend\.min_suport is not a parameter of cmc\.frontends\.hybrid"):
        compose_config("frontend=hybrid", "+frontend.min_suport=3")  # the schema follows **kwargs to LLMFrontend
    with pytest.raises(DataError, match=r"frontend\.batch_records = 'x'"):
        compose_config("frontend=hybrid", "frontend.batch_records=x")


def test_the_tiny_model_runs_the_hybrid_through_the_real_reader(tiny_model_dir, tmp_path):
    """The real transformers path (chat template, tokenizer, generate) as extractor. Its
    replies are noise: the structure is checked, not what it read."""
    reader = HFReader("tiny", LocalModel(str(tiny_model_dir)), dtype="float32", device="cpu", max_new_tokens=24)
    history = History("tiny", "", tuple(Record(i, t) for i, t in enumerate(CORPUS[:6], 1)))
    frontend = with_generation(HybridFrontend(extractor=reader, **work_dirs(tmp_path), batch_records=3))
    extraction = frontend.extract(history)
    assert [r.pos for r in extraction.records] == list(range(1, 7))
    assert all(r.status in STATUSES for r in extraction.records)
    summary, cost = frontend.metadata["hybrid"], frontend.metadata["cost"]
    assert summary["extracted_directly"] + summary["covered_by_rules"] == 6 == summary["statements"]
    calls = PredictionJournal(frontend.work_path(corpus_of([history]), ".journal.jsonl")).read().values()
    assert cost["calls"] == len(calls) >= 2 and all(p.runtime for p in calls)
    assert cost["input_tokens"] == sum(p.usage["prompt_tokens"] for p in calls)
    assert cost["output_tokens"] == sum(p.usage["completion_tokens"] for p in calls) <= 24 * len(calls)
    assert with_generation(HybridFrontend(extractor=reader, **work_dirs(tmp_path), batch_records=3)).extract(history) == extraction
    print(f"\ntiny model as hybrid extractor: {Counter(r.status for r in extraction.records)}, {cost}")
