"""G-Walk over the real 6K history's fact bank: driven by the scripted model, a hop whose
fact the bank holds continues with the bank's object, one it does not hold with the model's
own answer, and a relation phrase below the similarity threshold takes the sub-question
call; then the tiny model through every harness stage."""
from __future__ import annotations

from arms.released import REL2SUBQ, STOP_BLOCK, STOP_DONE, STOP_FACT
from harness.replay import replay
from harness.stages import run
from provenance.bundle import verify_seal
from tests.conftest import compose_config
from tests.methods.conftest import (QIDS, answer_directly, bundle_files, bundle_path, check_method_bundle,
                                    run_overrides, scores_path, tiny_reader)
from tests.methods.scripted import CAPITAL, CEO, Q_APPLESCRIPT, Q_OMF, Hop, Plan


def steps_of(result) -> list[tuple]:
    return [(s["subject"], s["phrase"], s["relation"], s["model_object"], s["fact_pos"], s["next"])
            for s in result.trace["steps"]]


def test_bank_facts_replace_the_models_answers_and_missing_ones_do_not(scripted, gwalk, questions, memory_6k):
    plan = scripted.backend.plans[Q_OMF]  # one hop too many: the bank knows nothing of Belgium
    scripted.backend.plans[Q_OMF] = Plan(plan.start, plan.hops + (Hop("capital", CAPITAL),))
    result, calls = answer_directly(gwalk, questions[QIDS[0]], memory_6k, scripted)
    assert steps_of(result) == [
        ("Our Mutual Friend", "author", "the_author_of_is", "Charles Dickens", 146, "Charles Darwin"),
        ("Charles Darwin", "spouse", "is_married_to", "Emma Darwin", 335, "Amala Paul"),
        ("Amala Paul", "country of citizenship", "is_a_citizen_of", "Belgium", 322, "Belgium"),
        ("Belgium", "capital", "the_capital_of_is", "Brussels", None, "Brussels"),  # no fact: the model's answer
    ]
    assert result.answer == "Brussels" and result.positions == (146, 335, 322)
    assert result.trace["outcome"] == "walked" and result.trace["start"] == "Our Mutual Friend"
    assert result.trace["relations"] == ["author", "spouse", "country of citizenship", "capital"]
    assert [s["subquestion"] for s in result.trace["steps"]][1:] == [
        "Who is Charles Darwin married to?", "What is the country of citizenship of Amala Paul?",
        "What is the capital of Belgium?"]  # REL2SUBQ's, for the matched relation, on the bank's subject
    assert [c.step for c in calls] == ["entity", "breakdown", "answer", "answer", "answer", "answer"]
    assert [c.request.stop for c in calls] == [(STOP_DONE,), (STOP_DONE,), *[(STOP_FACT,)] * 4]
    last = calls[-1].request.completion
    assert ("Retrieved fact: The author of Our Mutual Friend is Charles Darwin.\nRetrieved fact contradicts to "
            "generated answer, so continue with this subject: Charles Darwin.\n") in last
    assert last.endswith("so continue with this subject: Belgium.\nSubquestion: What is the capital of Belgium?\n")


def test_a_phrase_below_the_threshold_asks_the_model_for_the_subquestion(scripted, gwalk, questions, memory_6k):
    question = questions["factconsolidation_mh_6k_no77"]
    assert question.text == Q_APPLESCRIPT
    result, calls = answer_directly(gwalk, question, memory_6k, scripted)
    first, *rest = result.trace["steps"]
    # "developer" scores 0.327 against "{} was developed by" (MiniLM), under the 0.45 threshold
    assert first["relation"] is None and first["score"] < gwalk.relation_threshold
    assert first["subquestion"] == "Who developed AppleScript?"  # the model's, from the sub-question call
    assert (first["model_object"], first["fact_pos"], first["next"]) == ("Apple Inc.", None, "Apple Inc.")
    # The release splits the answer line at ". ": "... of Apple Inc. is {}. Tim Cook" leaves "is {}. Tim Cook"
    # as the model's object; the bank's fact is used here, so the walk goes on right.
    assert [(s["relation"], s["model_object"], s["next"]) for s in rest] == [
        ("the_chief_executive_officer_of_is", "is {}. Tim Cook", "Vijay Mallya"),
        ("is_a_citizen_of", "India", "Papal States"),
        ("the_capital_of_is", "Vatican City", "Rome"),
    ]
    assert all(s["score"] >= gwalk.relation_threshold and s["fact_pos"] is not None for s in rest)
    assert result.answer == "Rome" and question.hop == "mh"
    assert [c.step for c in calls] == ["entity", "breakdown", "subquestion", "answer", "answer", "answer", "answer"]
    subquestion = calls[2]
    assert subquestion.request.stop == (STOP_BLOCK,) and subquestion.request.generation["max_tokens"] == 20
    assert subquestion.request.completion.endswith(
        'Given this relation: "developer" and this subject: "AppleScript",\nThe corresponding question is')
    no_fact = ("Retrieved fact: <no fact>.\nRetrieved fact does not contradict to generated answer, so continue with "
               "this subject: Apple Inc..\nSubquestion: ")  # the release's format adds its period to "Inc."
    assert no_fact + REL2SUBQ[CEO].format("Apple Inc.") + "\n" in calls[4].request.completion


def test_a_walk_stops_where_the_generated_answer_cannot_be_parsed(scripted, gwalk, questions, memory_6k):
    scripted.backend.beliefs[("Charles Darwin", "{} is married to")] = ""  # 'Generated answer: ... is {}. ' and nothing
    result, calls = answer_directly(gwalk, questions[QIDS[0]], memory_6k, scripted)
    assert result.trace["outcome"] == "no_generated_answer" and len(result.trace["steps"]) == 1
    assert result.answer == "Charles Darwin" and len(calls) == 4  # the last subject reached


def test_the_tiny_model_through_every_stage(tmp_path, tiny_model_dir, embeddings_dir):
    overrides = run_overrides(tmp_path, "gwalk", tiny_reader(tiny_model_dir), embeddings_dir)
    run(compose_config(*overrides))
    bundle = bundle_path(tmp_path, "gwalk", "local")
    verify_seal(bundle)
    check_method_bundle(bundle, "gwalk", ["entity", "breakdown"])
    sealed = bundle_files(bundle)
    run(compose_config(*overrides))  # a sealed bundle: re-executed over its answers, must still reproduce
    assert bundle_files(bundle) == sealed
    report = replay(bundle, [f"arm.cache_dir={embeddings_dir}"], scores_dir=scores_path(tmp_path, "gwalk", "local"))
    assert report.ok and report.checked == 2, report.mismatches
