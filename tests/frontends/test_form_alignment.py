"""Relation alignment by literal sentence form (`align: forms`, cmc/frontends/alignment.py):
no call; every triple takes the name most triples of its form carry."""
from __future__ import annotations

import json

from hypothesis import given
from hypothesis import strategies as st

from cmc.extraction import RecordExtraction
from cmc.frontends.alignment import align_by_form, literal_form
from cmc.frontends.grammar import GrammarFrontend
from cmc.frontends.llm import LLMFrontend, corpus_of
from cmc.frontends.llm_replies import parse_lines_reply
from cmc.records import History, Record
from tests.conftest import TEMPLATES
from tests.frontends.oracle import GrammarOracle, served_extractor, with_generation, work_dirs
from tests.readers.faulty_server import FaultyServer

PEOPLE = ["Ann Lee", "Bo Chan", "Cy Diaz", "Di Evans"]
COUNTRIES = ["Peru", "Chile", "Ghana"]
FORMS = ["{S} is a citizen of {O}.", "The capital of {S} is {O}."]


def read(lines: str, records: list[Record]) -> list[RecordExtraction]:
    accepted, problems = parse_lines_reply(lines, records)
    assert not problems
    return [accepted[r.pos] for r in records]


def test_the_form_is_the_record_without_its_two_spans():
    (record,) = records = [Record(1, "The capital of Peru is Lima.")]
    (extraction,) = read("1 | Peru | capital | Lima", records)
    assert literal_form(record.text, extraction.triples[0]) == "The capital of {S} is {O}."


def test_spans_that_overlap_cut_nothing():
    records = [Record(1, "The mayor of New York is York.")]
    (extraction,) = read("1 | New York | mayor | York", records)
    assert literal_form(records[0].text, extraction.triples[0]) == records[0].text


def test_the_most_common_name_wins_and_a_tie_goes_to_the_name_used_first():
    texts = ["Ann Lee is a citizen of Peru.", "Bo Chan is a citizen of Chile.", "Cy Diaz is a citizen of Ghana.",
             "The capital of Peru is Lima.", "The capital of Chile is Santiago."]
    records = [Record(i, t) for i, t in enumerate(texts, 1)]
    read_as = read("1 | Ann Lee | citizenship | Peru\n2 | Bo Chan | citizen | Chile\n3 | Cy Diaz | citizen | Ghana\n"
                   "4 | Peru | capital_city | Lima\n5 | Chile | capital | Santiago", records)
    renamed, chosen = align_by_form(History("h", "", tuple(records)), read_as,
                                    ["citizenship", "capital_city", "citizen", "capital"])
    assert [r.triples[0].relation for r in renamed] == ["citizen"] * 3 + ["capital_city"] * 2
    assert chosen == {"{S} is a citizen of {O}.": "citizen", "The capital of {S} is {O}.": "capital_city"}


@given(st.lists(st.tuples(st.sampled_from([0, 1]), st.sampled_from(PEOPLE), st.sampled_from(COUNTRIES),
                          st.sampled_from(["citizen", "citizenship", "capital", "capital_city"])), min_size=1, max_size=12))
def test_every_triple_of_a_form_ends_with_the_forms_most_common_name(statements):
    """Records of one form end under one name, the most common of that form (ties: the
    name used first); a form read under one name only is left as it is."""
    records = [Record(i, FORMS[form].replace("{S}", s).replace("{O}", o))
               for i, (form, s, o, _) in enumerate(statements, 1)]
    read_as = read("\n".join(f"{r.pos} | {s} | {name} | {o}" for r, (_, s, o, name) in zip(records, statements)), records)
    renamed, chosen = align_by_form(History("h", "", tuple(records)), read_as, list(dict.fromkeys(n for *_, n in statements)))
    order = list(dict.fromkeys(n for *_, n in statements))
    for form in (0, 1):
        names = [n for f, *_, n in statements if f == form]
        finals = {t.relation for r, (f, *_) in zip(renamed, statements) if f == form for t in r.triples}
        if names:
            best = max(set(names), key=lambda n: (names.count(n), -order.index(n)))
            assert finals == {best}
            assert (FORMS[form] in chosen) == (len(set(names)) > 1)
    assert [[(t.subject, t.object) for t in r.triples] for r in renamed] == \
        [[(t.subject, t.object) for t in r.triples] for r in read_as]


def test_form_alignment_brings_back_a_renamed_relation_without_a_call(dataset, tmp_path):
    """The oracle names one relation `<name>_alt` in the batch answers after the first batch:
    form alignment gives those statements back their first name, as the grammar reads them,
    and no alignment call is made."""
    full = dataset.histories["factconsolidation_6k"]
    history = History(full.history_id, full.header, full.records[:24])
    reference = GrammarFrontend(str(TEMPLATES)).extract(history)
    triples = reference.triples()
    renamed = next(t.relation for t in triples[:8] if t.relation in {u.relation for u in triples[8:]})
    oracle = GrammarOracle(renamed, renamed_after=8)
    with FaultyServer(oracle) as srv:
        frontend = with_generation(LLMFrontend(served_extractor(srv.url), **work_dirs(tmp_path), batch_records=8,
                                               reply_format="lines", align="forms"))
        extraction = frontend.extract(history)
    assert [[(t.subject, t.relation, t.object) for t in r.triples] for r in extraction.records] == \
        [[(t.subject, t.relation, t.object) for t in r.triples] for r in reference.records]
    assert "align" not in oracle.calls and f"{renamed}_alt" not in extraction.relations
    frozen = json.loads(frontend.frozen_path(corpus_of([history])).read_text())
    assert set(frozen["alignment"].values()) == {renamed}
    assert frontend.decisive()["align"] == "forms" and "align" not in LLMFrontend(
        served_extractor(srv.url), **work_dirs(tmp_path), reply_format="lines").decisive()
