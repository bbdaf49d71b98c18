"""Recall at k for the ranked arms, on a hand-made history and on the committed QUICK bundles."""
from __future__ import annotations

import pytest

from analysis.retrieval_curves import curve, first_gold_rank, question_rows, ranking, selected_records, selection_rows
from cmc.records import History, Question
from common.errors import DataError
from provenance.bundle import read_bundle_jsonl
from tests.viewer.bundles import quick

HISTORY = History.parse("h", "Facts:\n1. The capital of France is Paris.\n2. Lyon is in France.\n"
                              "3. The Eiffel Tower is in Paris.\n4. Paris, Texas is a film.\n")
QUESTION = Question("q1", "Where is the Eiffel Tower?", "h", "sh", "6k")


def test_first_gold_rank_follows_the_ranking_and_the_scorers_normalization():
    assert first_gold_rank(HISTORY, [2, 4, 3], ["paris"]) == 2
    assert first_gold_rank(HISTORY, [2, 1], ["PARIS!"]) == 2
    assert first_gold_rank(HISTORY, [2], ["paris"]) is None
    assert first_gold_rank(HISTORY, [4], ["the"]) is None  # a gold that normalizes to "" never matches


def test_rows_and_curve_on_a_hand_made_ranking():
    packet = {"question_id": "q1", "trace": {"ranked": [2, 4, 3, 1]}}
    reference = {"q1": {"trace": {"edges": [["eiffel tower", "is_in", "paris", 3, 0], ["x", "y", "z", 1, 1]]}}}
    rows = question_rows("bm25", [packet], {"q1": QUESTION}, {"h": HISTORY}, {"q1": ("Paris",)}, reference, ks=(1, 2, 3, 4))
    assert rows["gold_at_k"].tolist() == [False, True, True, True]
    assert rows["cmc_recall_at_k"].tolist() == [0.0, 0.0, 0.5, 1.0]
    table = curve(rows, ("arm",))
    assert table["all_cmc_records"].tolist() == [0.0, 0.0, 0.0, 100.0]
    with pytest.raises(DataError, match="not a list of record positions"):
        ranking({"trace": {"ranked": [1, "2"]}})
    with pytest.raises(DataError, match="not a ranked arm"):
        question_rows("cmc", [{"question_id": "q1", "trace": {}}], {"q1": QUESTION}, {"h": HISTORY}, {"q1": ("x",)})


def test_committed_quick_bundles(dataset):
    """Golden: fact BM25's ranking vs CMC's selection on the 8 QUICK questions."""
    from hydra.utils import instantiate

    from provenance.vault import LabelVault
    from tests.conftest import compose_config

    labels = LabelVault(instantiate(compose_config().dataset).load_labels).open(quick("cmc"))
    questions = {q.qid: q for q in dataset.questions}
    cmc = {p["question_id"]: p for p in read_bundle_jsonl(quick("cmc"), "evidence.jsonl")}
    bm25 = read_bundle_jsonl(quick("fact_bm25"), "evidence.jsonl")
    rows = question_rows("fact_bm25", bm25, questions, dataset.histories, labels, cmc)
    table = curve(rows.assign(hop="all")).set_index("k")
    assert table.loc[1, "gold_at_k"] == 50.0 and table.loc[100, "gold_at_k"] == 87.5
    assert table.loc[100, "cmc_records_recall"] == 71.88 and table.loc[100, "all_cmc_records"] == 37.5
    assert selected_records(cmc["factconsolidation_mh_6k_no0"]) == [146, 335, 322]
    own = selection_rows("cmc", cmc.values(), questions, dataset.histories, labels)
    assert own["gold_at_k"].all() and own["records"].sum() == 21


def test_gold_at_full_depth_agrees_with_the_rendered_evidence(dataset):
    """Per question of the full committed fact BM25 bundle: gold among all its ranked records
    (per-record test) equals gold in the evidence text the reader saw (analysis.diagnostics)."""
    from hydra.utils import instantiate

    from analysis.diagnostics import gold_in_evidence
    from provenance.vault import LabelVault
    from tests.conftest import compose_config
    from tests.viewer.bundles import TABLE1

    bundle = TABLE1 / "factconsolidation-grammar-all-fact_bm25-qwen25_coder_15b"
    labels = LabelVault(instantiate(compose_config().dataset).load_labels).open(bundle)
    questions = {q.qid: q for q in dataset.questions}
    packets = read_bundle_jsonl(bundle, "evidence.jsonl")
    assert not any(p["truncated"] for p in packets)  # else the reader saw fewer records than were ranked
    rows = question_rows("fact_bm25", packets, questions, dataset.histories, labels, ks=(100,))
    seen = [gold_in_evidence(dataset.histories[questions[p["question_id"]].history_id], p, labels[p["question_id"]])
            for p in packets]
    assert rows["gold_at_k"].tolist() == seen and sum(seen) == 631  # 396 SH + 235 MH (table1_selection.md)
