"""Where an extraction changes a view's packet: strata on hand-made items, and a golden check on
the committed Table 7 bundles (direct LLM extraction against the grammar, same reader)."""
import json

import pandas as pd
import pytest

from analysis.extraction_effect import extraction_effect, stratum, walk_positions
from tests.viewer.bundles import ROOT


def item(arm, qid, positions, walk, correct, gold=True, hop="mh", engine="transformers bfloat16", reader="r"):
    return {"arm": arm, "question_id": qid, "hop": hop, "positions": tuple(positions), "walk": walk,
            "substring_em": correct, "gold_present": gold, "reader": reader, "engine": engine}


def test_walk_positions_read_the_traversal_or_the_prior_read_and_nothing_else():
    edges = [["a", "r", "b", 9, 0], ["b", "s", "c", 4, 1], ["a", "r", "b", 9, 0]]
    assert walk_positions({"trace": {"edges": edges}}) == (4, 9)
    assert walk_positions({"trace": {"prior_edges": edges, "refreshed": 1}}) == (4, 9)
    assert walk_positions({"trace": {"edges": []}}) == ()
    assert walk_positions({"trace": {"ranked": [1, 2]}}) is None and walk_positions({}) is None


@pytest.mark.parametrize("here, grammar, expected", [
    (((1, 2), (1, 2)), ((1, 2), (1, 2)), "same packet"),
    (((1, 2, 7), (1, 2)), ((1, 2), (1, 2)), "same walk"),
    (((1, 3), (1, 3)), ((1, 2), (1, 2)), "walk differs"),
    (((1, 3), None), ((1, 2), None), "packet differs"),
    (((1, 2), None), ((1, 2), None), "same packet"),
])
def test_each_packet_falls_in_one_stratum(here, grammar, expected):
    as_item = lambda pair: {"positions": pair[0], "walk": pair[1]}  # noqa: E731
    assert stratum(as_item(here), as_item(grammar)) == expected


def test_strata_partition_each_view_and_count_both_sides():
    items = pd.DataFrame([
        item("cmc", "q1", (1, 2, 7, 8), (1, 2), 0),        # same walk, two unresolved records added
        item("cmc", "q2", (3, 7, 8), (3,), 1),             # same walk
        item("cmc", "q3", (5, 7, 8), (5,), 0, gold=False),  # walk differs, one record dropped
        item("cmc", "q4", (6,), (6,), 1),                  # same packet
        item("fact_bm25", "q1", (1, 9), None, 1),
        item("latest_state", "q1", (1,), None, 1),          # the reference lacks this view: left out
    ])
    reference = pd.DataFrame([
        item("cmc", "q1", (1, 2), (1, 2), 1), item("cmc", "q2", (3,), (3,), 1),
        item("cmc", "q3", (4, 5, 9), (4, 5), 1), item("cmc", "q4", (6,), (6,), 1),
        item("fact_bm25", "q1", (1, 9), None, 0, engine="transformers float32"),
    ])
    out = extraction_effect(items, reference, ["cmc", "fact_bm25", "latest_state"])
    assert out["arm"].tolist() == ["cmc", "cmc", "cmc", "fact_bm25"]
    rows = out.set_index(["arm", "stratum"])
    assert rows.loc[("cmc", "same walk"), ["n", "records_added", "records_dropped"]].tolist() == [2, 2.0, 0.0]
    assert rows.loc[("cmc", "same walk"), ["correct", "correct_on_grammar"]].tolist() == [1, 2]
    walk = rows.loc[("cmc", "walk differs")]
    assert (walk["n"], walk["records_added"], walk["records_dropped"]) == (1, 2.0, 2.0)
    assert (walk["gold_here"], walk["gold_on_grammar"]) == (0, 1)
    assert out[out["arm"] == "cmc"]["n"].sum() == 4  # every question in exactly one stratum
    # Read by another engine: its gold counts, never its answers.
    bm25 = rows.loc[("fact_bm25", "same packet")]
    assert bm25["gold_on_grammar"] == 1 and pd.isna(bm25["correct_on_grammar"])


EXTRACTION = (ROOT / "results" / "extractions" / "llm_lines_examples_qwen25_coder_15b_llamacpp-64f93b1b2f0e"
              / "corpus-d2603cc5e46b2b10.json")
TABLE7 = ROOT / "results" / "bundles" / "table7"


def test_golden_the_direct_extraction_adds_only_its_unresolved_statements_where_the_walk_is_the_grammars(dataset):
    """On the committed Table 7 CMC bundles (same reader, same engine): the strata, and every
    record the direct extraction adds on a question whose walk is the grammar's is a statement it
    did not resolve to a fact (shown as text by the rendering contract)."""
    from hydra.utils import instantiate

    from analysis.tables import experiment_items
    from provenance.vault import LabelVault
    from tests.conftest import compose_config

    bundles = {name: TABLE7 / f"factconsolidation-{name}-all-cmc-qwen25_coder_15b"
               for name in ("grammar", "llm_lines_examples_qwen25_coder_15b_llamacpp")}
    vault = LabelVault(instantiate(compose_config().dataset).load_labels)
    questions = {q.qid: q for q in dataset.questions}
    grammar, llm = (experiment_items([b], vault, questions, histories=dataset.histories) for b in bundles.values())
    out = extraction_effect(llm, grammar, ["cmc"]).set_index(["hop", "stratum"])
    assert out.groupby("hop")["n"].sum().to_dict() == {"sh": 400, "mh": 400}
    assert out.loc[("mh", "same walk"), ["n", "correct", "correct_on_grammar"]].tolist() == [328, 154, 221]
    assert out.loc[("sh", "same walk"), ["n", "correct", "correct_on_grammar"]].tolist() == [344, 297, 326]

    frozen = json.loads(EXTRACTION.read_text())
    unresolved = {text for text, record in zip(frozen["statements"], frozen["records"]) if record["status"] != "facts"}
    by_question = grammar.set_index("question_id")
    same_walk = 0
    for row in llm.to_dict("records"):
        reference = by_question.loc[row["question_id"]]
        if row["walk"] != reference["walk"]:
            continue
        history = dataset.histories[questions[row["question_id"]].history_id]
        added = set(row["positions"]) - set(reference["positions"])
        assert added and all(history.record(pos).text in unresolved for pos in added)
        same_walk += 1
    assert same_walk == 672


def test_the_tables_command_takes_the_grammar_reference_read_by_the_same_reader_and_engine(tmp_path):
    """`cmc-harness tables table1 --frontend <llm>` on the committed bundles: Table 1's grammar
    views were read in float32, this frontend's in bfloat16, so for CMC the grammar bundle with the
    same view config read in bfloat16 (Tables 7 and 9) stands in and its answers are set beside;
    the prior read exists in float32 only, so its packets are compared and its answers are not."""
    import csv
    import subprocess
    import sys

    subprocess.run([sys.executable, "-m", "harness.cli", "tables", "table1", "--out", str(tmp_path), "--n-boot", "200",
                    "--frontend", "llm_lines_examples_qwen25_coder_15b_llamacpp", "--reader", "qwen25_coder_15b"],
                   cwd=ROOT, capture_output=True, text=True, check=True)
    stem = tmp_path / "tables" / "table1_llm_lines_examples_qwen25_coder_15b_llamacpp"
    rows = list(csv.DictReader(open(f"{stem}_extraction.csv")))
    cmc = [r for r in rows if r["arm"] == "cmc"]
    assert {(r["hop"], r["stratum"]) for r in cmc} == {(h, s) for h in ("sh", "mh") for s in ("same walk", "walk differs")}
    assert sum(int(r["correct_on_grammar"]) for r in cmc) == 629  # the grammar's Table 7 row, same reader and engine
    assert sum(int(r["correct"]) for r in cmc) == 500
    prior = [r for r in rows if r["arm"] == "prior_read_refresh"]
    assert sum(int(r["n"]) for r in prior) == 800 and all(r["correct_on_grammar"] == "" for r in prior)
    assert "where the extraction changes the packet" in open(f"{stem}_extraction.md").read()
