import json

import pytest

from cmc.frontends.grammar import GrammarFrontend, load_patterns
from common.errors import DataError
from tests.conftest import TEMPLATES


@pytest.fixture(scope="module")
def grammar():
    return GrammarFrontend(str(TEMPLATES))


def test_every_real_fact_line_parses_and_unique_statements_match_the_paper(dataset, frontend):
    unique = set()
    for history in dataset.histories.values():
        extraction = frontend.extract(history)
        assert extraction.positions("unresolved") == [] and extraction.positions("no_fact") == []
        assert all(len(r.triples) == 1 for r in extraction.records)
        unique.update(r.text for r in history)
    assert len(unique) == 18_336  # paper section 4.1


def test_identical_surfaces_merge_into_one_relation():
    patterns = load_patterns(TEMPLATES)
    located = [p for p in patterns if p.surface == "[X] is located in __"]
    assert len(located) == 1 and located[0].property_ids == ("P131", "P276")
    assert len(patterns) == len(json.loads(TEMPLATES.read_text())) - 1


@pytest.mark.parametrize(
    ("text", "subject", "relation", "obj"),
    [
        ("The capital of Peru is Lima.", "Peru", "the_capital_of_is", "Lima"),  # not generic "The [X] is"
        ("The President of Ireland is Mary Robinson.", "President of Ireland", "the_is", "Mary Robinson"),
        ("Bengaluru is located in the continent of Asia.", "Bengaluru", "is_located_in_the_continent_of", "Asia"),
        ("Kyiv is located in Ukraine.", "Kyiv", "is_located_in", "Ukraine"),
        ("Igor of Kiev's child is Sviatoslav I.", "Igor of Kiev", "s_child_is", "Sviatoslav I"),
        ("The author of Hard Times is Martin Luther King Jr.", "Hard Times", "the_author_of_is", "Martin Luther King Jr"),
        ("The univeristy where Ada was educated is Baldwin Wallace University.", "Ada",
         "the_univeristy_where_was_educated_is", "Baldwin Wallace University"),
    ],
)
def test_most_specific_pattern_wins_and_spans_are_literal(grammar, text, subject, relation, obj):
    record = grammar.parse(4, text)
    assert record.status == "facts"
    (triple,) = record.triples
    assert (triple.subject, triple.relation, triple.object, triple.pos) == (subject, relation, obj, 4)
    assert text[slice(*triple.subject_span)] == subject and text[slice(*triple.object_span)] == obj


def test_a_line_no_pattern_matches_is_kept_unresolved(grammar):
    assert grammar.parse(0, "Nothing to see here.").status == "unresolved"


def test_bad_template_files_are_named(tmp_path):
    bad = tmp_path / "t.json"
    bad.write_text(json.dumps({"P1": "no placeholders here"}))
    with pytest.raises(DataError, match="t.json: template P1 must hold one"):
        load_patterns(bad)
    with pytest.raises(DataError, match="cannot read cloze templates"):
        load_patterns(tmp_path / "missing.json")
