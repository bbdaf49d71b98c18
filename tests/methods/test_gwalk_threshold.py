"""What the offline MiniLM embedder makes of G-Walk's relation matching (conf/arm/gwalk.yaml,
relation_threshold 0.45), on the release's own breakdown phrases (subq_breakdown.txt) and
the templates GWalk builds for the bank's relations.

Measured (cosine, phrase vs its template; the highest wrong template in brackets):
    place of birth 0.632 [0.342]   continent 0.698 [0.311]   creator 0.514 [0.359]
    country of citizenship 0.548 [0.330]   official language 0.705 [0.488 speaks the language of]
    performer 0.451 [0.300]   chief executive officer 0.794 [0.456 The chairperson of {} is]
    developer 0.327 [0.296]   capital 0.756 [0.331]   director / manager 0.543 [0.477 The chief executive officer of {} is]
So the config's claim (right templates 0.51-0.79, every wrong one under 0.41) does not hold:
"developer" never reaches 0.45 and falls back to the sub-question call; "performer" clears it
by 0.001; three phrases have a wrong template above 0.45. What does hold, and is asserted
here: the matching template ranks first for every phrase, and the threshold separates right
from wrong for the six phrases named in SPLIT."""
from __future__ import annotations

import numpy as np
import pytest

from arms.bank import fact_bank
from arms.embedders import cached_vectors
from cmc.frontends.grammar import load_patterns
from tests.conftest import TEMPLATES

PHRASES = {  # the release prompt's relation phrase -> the bank relation it means
    "place of birth": "was_born_in_the_city_of", "continent": "is_located_in_the_continent_of",
    "creator": "was_created_by", "country of citizenship": "is_a_citizen_of",
    "official language": "the_official_language_of_is", "performer": "was_performed_by",
    "chief executive officer": "the_chief_executive_officer_of_is", "developer": "was_developed_by",
    "capital": "the_capital_of_is", "director / manager": "the_director_of_is",
}
SPLIT = {"place of birth", "continent", "creator", "country of citizenship", "performer", "capital"}
BELOW = {"developer"}  # the right template itself scores under the threshold
WRONG_ABOVE = {"official language": "speaks_the_language_of", "chief executive officer": "the_chairperson_of_is",
               "director / manager": "the_chief_executive_officer_of_is"}  # phrase -> its best wrong relation, over 0.45


@pytest.fixture(scope="module")
def relations(memories) -> list[str]:
    """Every relation any history's bank holds (a superset of each bank's)."""
    found = sorted({f.relation for memory in memories.values() for f in fact_bank(memory).facts})
    assert set(PHRASES.values()) <= set(found) and len(found) >= 30
    return found


@pytest.fixture(scope="module")
def scores(gwalk, relations, embeddings_dir) -> dict[str, dict[str, float]]:
    """phrase -> relation -> cosine of the phrase with GWalk's template for the relation."""
    templates = cached_vectors(gwalk.embedder, [gwalk.template(r) for r in relations], embeddings_dir)
    phrases = gwalk.embedder.encode(list(PHRASES))
    return {p: dict(zip(relations, map(float, templates @ v))) for p, v in zip(PHRASES, phrases)}


def test_gwalk_maps_each_relation_to_the_release_template(gwalk, relations):
    assert {r: gwalk.template(r) for r in PHRASES.values()} == {
        "was_born_in_the_city_of": "{} was born in the city of", "is_located_in_the_continent_of":
        "{} is located in the continent of", "was_created_by": "{} was created by", "is_a_citizen_of":
        "{} is a citizen of", "the_official_language_of_is": "The official language of {} is", "was_performed_by":
        "{} was performed by", "the_chief_executive_officer_of_is": "The chief executive officer of {} is",
        "was_developed_by": "{} was developed by", "the_capital_of_is": "The capital of {} is",
        "the_director_of_is": "The director of {} is"}
    patterns = {p.relation for p in load_patterns(TEMPLATES)}
    assert set(relations) <= patterns  # every bank relation has its release template, none the fallback form


def test_the_matching_template_ranks_first_for_every_release_phrase(scores):
    assert {p: max(s, key=s.get) for p, s in scores.items()} == PHRASES


def test_the_threshold_reaches_every_right_template_but_developers(scores, gwalk):
    threshold = gwalk.relation_threshold
    assert threshold == 0.45
    assert {p for p, r in PHRASES.items() if scores[p][r] < threshold} == BELOW
    assert scores["developer"][PHRASES["developer"]] == pytest.approx(0.327, abs=0.01)


def test_the_threshold_splits_right_from_wrong_only_for_some_phrases(scores, gwalk):
    threshold = gwalk.relation_threshold
    splits = {p for p, r in PHRASES.items()
              if scores[p][r] >= threshold > max(s for rel, s in scores[p].items() if rel != r)}
    assert splits == SPLIT
    above = {p: max((rel for rel in scores[p] if rel != r), key=scores[p].get) for p, r in PHRASES.items()
             if max(s for rel, s in scores[p].items() if rel != r) >= threshold}
    assert above == WRONG_ABOVE


def test_the_walk_matches_what_the_scores_say(gwalk, memory_6k, scores):
    """GWalk.match_relation on the real 6K bank: the right relation above the threshold,
    none (the sub-question call) for "developer"."""
    for phrase, relation in PHRASES.items():
        matched, score = gwalk.match_relation(phrase, memory_6k)
        assert score == pytest.approx(scores[phrase][relation], abs=1e-5)
        assert matched == (None if phrase in BELOW else relation)
    assert np.isfinite(score)
