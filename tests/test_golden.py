"""The paper's worked example on the real 262K history (section 4.1): the question about
Christian Abbiati's sport's origin needs a next hop the question never names."""
import pytest

from arms.controls import PriorReadRefresh, StaleClosure
from arms.retrieval import FactBM25
from cmc.read import CMCArm

QID = "factconsolidation_mh_262k_no0"


@pytest.fixture(scope="module")
def case(dataset, memories):
    question = next(q for q in dataset.questions if q.qid == QID)
    return question, memories[question.history_id]


def _pos_with(memory, text):
    (pos,) = [r.pos for r in memory.history if r.text == text]
    return pos


def test_cmc_follows_abbiati_cornerback_field_hockey_philippines(case):
    question, memory = case
    assert question.text == "What is the country of origin of the sport played by Christian Abbiati?"
    evidence = CMCArm().select(question, memory)
    chain = [
        "Christian Abbiati plays the position of cornerback.",
        "cornerback is associated with the sport of field hockey.",
        "field hockey was created in the country of Philippines.",
    ]
    assert {_pos_with(memory, t) for t in chain} <= set(evidence.positions)
    assert evidence.trace["anchors"] == ["christian abbiati"]
    assert [e[:3] for e in evidence.trace["edges"][:3]] == [
        ["christian abbiati", "plays_the_position_of", "cornerback"],
        ["cornerback", "is_associated_with_the_sport_of", "field hockey"],
        ["field hockey", "was_created_in_the_country_of", "philippines"],
    ]
    assert not evidence.truncated


def test_fact_bm25_finds_abbiati_but_misses_the_field_hockey_origin(case):
    question, memory = case
    selected = set(FactBM25().select(question, memory).positions)
    assert _pos_with(memory, "Christian Abbiati plays the position of cornerback.") in selected
    assert _pos_with(memory, "field hockey was created in the country of Philippines.") not in selected


def test_controls_diverge_from_cmc_on_the_example(case):
    question, memory = case
    cmc = CMCArm().select(question, memory)
    stale = StaleClosure().select(question, memory)
    prior = PriorReadRefresh().select(question, memory)
    assert len(stale.trace["substitutions"]) > 0
    assert stale.positions != cmc.positions
    current = {e.pos for e in memory.current.edges.values()}
    assert set(prior.positions) <= current
