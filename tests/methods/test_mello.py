"""MeLLo over the real 6K history's fact bank: driven by the scripted model (whose stale
beliefs the bank contradicts, or not), and on the tiny model through every harness stage."""
from __future__ import annotations

import pytest

from arms.bank import fact_bank
from arms.released import STOP_FACT
from harness.replay import replay
from harness.stages import run
from provenance.bundle import verify_seal
from tests.conftest import compose_config
from tests.methods.conftest import (QIDS, answer_directly, bundle_files, bundle_path, check_method_bundle,
                                    run_overrides, scores_path, tiny_reader)
from tests.methods.scripted import CAPITAL, Q_GOALIE, Q_OMF, SPORT, Hop

CONTRADICTS = "Retrieved fact contradicts to generated answer, so the intermediate answer is: {}"
AGREES = "Retrieved fact does not contradict to generated answer, so the intermediate answer is: {}"


def test_the_bank_corrects_stale_answers_hop_by_hop(scripted, mello, questions, memory_6k):
    result, calls = answer_directly(mello, questions[QIDS[0]], memory_6k, scripted)
    assert result.answer == "Belgium" and result.trace["outcome"] == "final_answer"
    rounds = result.trace["rounds"]
    assert [r["subquestion"] for r in rounds] == ["Who is the author of Our Mutual Friend?",
                                                  "Who is Charles Darwin married to?",  # the bank's author, not Dickens
                                                  "What is the country of citizenship of Amala Paul?"]
    assert [r["tentative"] for r in rounds] == ["Generated answer: The author of Our Mutual Friend is Charles Dickens.",
                                                "Generated answer: Charles Darwin is married to Emma Darwin.",
                                                "Generated answer: Amala Paul is a citizen of Belgium."]
    bank = fact_bank(memory_6k)
    assert [r["fact_pos"] for r in rounds] == [bank.lookup(s, r).pos for s, r in (
        ("Our Mutual Friend", "the_author_of_is"), ("Charles Darwin", "is_married_to"), ("Amala Paul", "is_a_citizen_of"))]
    assert result.positions == (146, 335, 322) and all(0 < r["score"] <= 1 for r in rounds)
    chain = result.trace["chain"]
    assert CONTRADICTS.format("Charles Darwin") in chain and CONTRADICTS.format("Amala Paul") in chain
    assert AGREES.format("Belgium") in chain and chain.endswith("Final answer: Belgium")  # the further block cut
    assert "Retrieved fact: The author of Our Mutual Friend is Charles Darwin.\n" in calls[1].request.completion
    assert [c.step for c in calls] == ["answer"] * 4
    for before, after in zip(calls, calls[1:]):  # one growing text: each answer, its marker line, the bank's fact
        kept = (before.request.completion + before.prediction.raw).strip().removesuffix("\nRetrieved fact:")
        assert after.request.completion.startswith(kept + "\nRetrieved fact: ")
    assert all(c.request.stop == (STOP_FACT,) and c.request.generation["max_tokens"] == 50 for c in calls)
    assert all(c.prediction.raw.endswith(STOP_FACT) for c in calls)  # cut by the client after the stop string


@pytest.mark.parametrize("belief, line", [("ice hockey", CONTRADICTS), ("pesäpallo", AGREES)])
def test_a_retrieved_fact_that_contradicts_or_agrees(scripted, mello, questions, memory_6k, belief, line):
    scripted.backend.beliefs[("goaltender", SPORT)] = belief
    result, calls = answer_directly(mello, questions[QIDS[1]], memory_6k, scripted)
    assert questions[QIDS[1]].text == Q_GOALIE and len(calls) == 2
    assert result.answer == "pesäpallo" and result.positions == (310,)  # the bank's current fact, not ice hockey
    assert result.trace["rounds"][0]["tentative"] == f"Generated answer: goaltender is associated with the sport of {belief}."
    assert line.format("pesäpallo") in result.trace["chain"]
    other = AGREES if line is CONTRADICTS else CONTRADICTS
    assert other.format("pesäpallo") not in result.trace["chain"]


def test_four_rounds_without_a_final_answer_give_none(scripted, mello, questions, memory_6k):
    plan = scripted.backend.plans[Q_OMF]
    scripted.backend.plans[Q_OMF] = type(plan)(plan.start, plan.hops + (Hop("capital", CAPITAL),))
    result, calls = answer_directly(mello, questions[QIDS[0]], memory_6k, scripted)
    assert result.answer is None and result.trace["outcome"] == "rounds_exhausted"
    assert len(calls) == 4 and len(result.trace["rounds"]) == 4
    assert result.trace["rounds"][-1]["subquestion"] == "What is the capital of Belgium?"


def test_the_tiny_model_through_every_stage(tmp_path, tiny_model_dir, embeddings_dir):
    overrides = run_overrides(tmp_path, "mello", tiny_reader(tiny_model_dir), embeddings_dir)
    run(compose_config(*overrides))
    bundle = bundle_path(tmp_path, "mello", "local")
    verify_seal(bundle)
    check_method_bundle(bundle, "mello", ["answer"])
    sealed = bundle_files(bundle)
    run(compose_config(*overrides))  # a sealed bundle: re-executed over its answers, must still reproduce
    assert bundle_files(bundle) == sealed
    report = replay(bundle, [f"arm.cache_dir={embeddings_dir}"], scores_dir=scores_path(tmp_path, "mello", "local"))
    assert report.ok and report.checked == 2, report.mismatches

