"""Span tightening by shared sentence form (`tighten: true`, cmc/frontends/tightening.py): framing
words leave an entity only where the extractor read most statements of that shape without them."""
from __future__ import annotations

import json

from hypothesis import given
from hypothesis import strategies as st

from cmc.extraction import RecordExtraction
from cmc.frontends.grammar import GrammarFrontend
from cmc.frontends.llm import LLMFrontend, corpus_of
from cmc.frontends.llm_replies import parse_lines_reply
from cmc.frontends.tightening import tighten_by_form
from cmc.records import History, Record
from tests.conftest import TEMPLATES
from tests.frontends.oracle import GrammarOracle, served_extractor, with_generation, work_dirs
from tests.readers.faulty_server import FaultyServer


def read(statements: list[tuple[str, str, str]]) -> tuple[History, list[RecordExtraction]]:
    """Records of these texts, each read (validated like a reply line) as the given subject and object."""
    records = [Record(i, text) for i, (text, _, _) in enumerate(statements, 1)]
    lines = "\n".join(f"{r.pos} | {s} | rel | {o}" for r, (_, s, o) in zip(records, statements))
    accepted, problems = parse_lines_reply(lines, records)
    assert not problems
    return History("h", "", tuple(records)), [accepted[r.pos] for r in records]


def pairs(records: list[RecordExtraction]) -> list[list[tuple[str, str]]]:
    return [[(t.subject, t.object) for t in r.triples] for r in records]


def test_framing_copied_into_an_entity_is_dropped_where_the_form_was_read_without_it():
    corpus, records = read([("The chairperson of Fatah is Ann Lee.", "Fatah", "Ann Lee"),
                            ("The chairperson of Likud is Bo Chan.", "Likud", "Bo Chan"),
                            ("The chairperson of Labour is Cy Diaz.", "The chairperson of Labour", "Cy Diaz"),
                            ("Dan Ito is a citizen of the country of Peru.", "Dan Ito", "Peru"),
                            ("Eve Ng is a citizen of the country of Chile.", "Eve Ng", "Chile"),
                            ("Fay Orr is a citizen of the country of Ghana.", "Fay Orr", "the country of Ghana")])
    tightened, changed = tighten_by_form(corpus, records)
    assert pairs(tightened)[2] == [("Labour", "Cy Diaz")] and pairs(tightened)[5] == [("Fay Orr", "Ghana")]
    assert changed == 2 and pairs(tightened)[:2] == pairs(records)[:2]
    triple = tightened[2].triples[0]
    assert corpus.records[2].text[slice(*triple.subject_span)] == "Labour"


def test_a_title_keeps_its_article_where_most_titles_of_the_form_were_read_with_it():
    """Two statements read without "The" make "The {S} was created in ..." a shared form, but
    three read with it: the extractor's majority keeps the article, and nothing is widened back."""
    texts = ["The Beatles", "The Sword", "The Challenge", "The Atlantic", "The Undead"]
    statements = [(f"{t} was created in the country of Peru.", t if i < 3 else t.removeprefix("The "), "Peru")
                  for i, t in enumerate(texts)]
    corpus, records = read(statements)
    tightened, changed = tighten_by_form(corpus, records)
    assert changed == 0 and pairs(tightened) == pairs(records)


def test_one_example_of_a_form_is_no_shared_form_and_a_tie_is_no_majority():
    corpus, records = read([("The chairperson of Fatah is Ann Lee.", "Fatah", "Ann Lee"),
                            ("The chairperson of Labour is Cy Diaz.", "The chairperson of Labour", "Cy Diaz")])
    assert tighten_by_form(corpus, records) == (records, 0)
    assert tighten_by_form(corpus, records, min_support=1) == (records, 0)  # one read each way
    corpus, records = read([*[(r.text, t.subject, t.object) for r, (t,) in zip(corpus.records, (x.triples for x in records))],
                            ("The chairperson of Likud is Bo Chan.", "Likud", "Bo Chan")])
    assert pairs(tighten_by_form(corpus, records)[0])[1] == [("Labour", "Cy Diaz")]


NAMES = ["Fatah", "Likud", "Labour", "Kadima"]
PEOPLE = ["Ann Lee", "Bo Chan", "Cy Diaz"]


@given(st.lists(st.tuples(st.sampled_from(NAMES), st.sampled_from(PEOPLE), st.booleans(), st.booleans()),
                min_size=1, max_size=10))
def test_tightening_only_ever_narrows_a_span_to_text_of_the_record(statements):
    """Whatever the reads, a tightened triple's spans lie inside its own and spell its subject and
    object in the record; every record keeps its status and at least one triple."""
    read_as = []
    for party, person, framed_subject, framed_object in statements:
        text = f"The chairperson of {party} is the person {person}."
        read_as.append((text, f"The chairperson of {party}" if framed_subject else party,
                        f"the person {person}" if framed_object else person))
    corpus, records = read(read_as)
    tightened, changed = tighten_by_form(corpus, records)
    assert changed == sum(a != b for a, b in zip(pairs(tightened), pairs(records)))
    for record, before, after in zip(corpus.records, records, tightened):
        assert after.status == before.status and len(after.triples) == len(before.triples) == 1
        (old,), (new,) = before.triples, after.triples
        for span, outer, value in ((new.subject_span, old.subject_span, new.subject),
                                   (new.object_span, old.object_span, new.object)):
            assert outer[0] <= span[0] and span[1] <= outer[1] and record.text[slice(*span)] == value


def test_tightening_leaves_reads_that_are_already_right_and_joins_the_fingerprint(dataset, tmp_path):
    """The oracle reads as the grammar: with tighten on, the extraction is still the grammar's,
    the frozen file says nothing was tightened, and only the option's own fingerprint moves."""
    full = dataset.histories["factconsolidation_6k"]
    history = History(full.history_id, full.header, full.records[:24])
    reference = GrammarFrontend(str(TEMPLATES)).extract(history)
    with FaultyServer(GrammarOracle()) as srv:
        frontend = with_generation(LLMFrontend(served_extractor(srv.url), **work_dirs(tmp_path), batch_records=8,
                                               reply_format="lines", align="forms", tighten=True))
        extraction = frontend.extract(history)
        plain = LLMFrontend(served_extractor(srv.url), **work_dirs(tmp_path), reply_format="lines", align="forms")
    assert [[(t.subject, t.relation, t.object) for t in r.triples] for r in extraction.records] == \
        [[(t.subject, t.relation, t.object) for t in r.triples] for r in reference.records]
    assert json.loads(frontend.frozen_path(corpus_of([history])).read_text())["spans_tightened"] == 0
    assert "tighten" in frontend.decisive() and "tighten" not in plain.decisive()
    assert {k: v for k, v in frontend.decisive().items() if k != "tighten"} == \
        {k: v for k, v in plain.decisive().items() if k != "tighten"} | {"batch_records": 8}


def test_only_the_statements_named_vote_and_change():
    """The hybrid tightens its direct extractions only: a rule-covered statement (Labour, read
    with its framing) is neither changed nor counted, and covered reads cannot make a form."""
    corpus, records = read([("The chairperson of Fatah is Ann Lee.", "Fatah", "Ann Lee"),
                            ("The chairperson of Likud is Bo Chan.", "Likud", "Bo Chan"),
                            ("The chairperson of Meretz is Eve Ng.", "Meretz", "Eve Ng"),
                            ("The chairperson of Labour is Cy Diaz.", "The chairperson of Labour", "Cy Diaz"),
                            ("The chairperson of Kadima is Di Evans.", "The chairperson of Kadima", "Di Evans")])
    assert tighten_by_form(corpus, records)[1] == 2
    pos = [r.pos for r in corpus.records]
    tightened, changed = tighten_by_form(corpus, records, only=set(pos) - {pos[3]})
    assert changed == 1 and pairs(tightened)[3] == pairs(records)[3] and pairs(tightened)[4] == [("Kadima", "Di Evans")]
    assert tighten_by_form(corpus, records, only={pos[0], pos[3], pos[4]}) == (records, 0)  # one direct read of the form
