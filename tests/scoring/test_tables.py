"""Experiment-level tables on a hand-made item table (the sealed-bundle path is covered by
tests/test_pipeline.py)."""
import pandas as pd
import pytest

from scoring.tables import (accuracy, contrasts, key_change_strata, length_order, reader_grid, selection_vs_reader,
                            view_table)


@pytest.fixture
def items():
    rows = []
    for i in range(8):
        hop = "sh" if i % 2 == 0 else "mh"
        for arm, correct in (("cmc", 1), ("fact_bm25", int(hop == "sh"))):
            rows.append({"arm": arm, "reader": "r", "frontend": "grammar", "question_id": f"q{i}", "hop": hop,
                         "length": ["6k", "262k"][i % 4 // 2], "cluster": f"c{i // 2}", "substring_em": correct,
                         "strict_em": correct, "input_tokens": 100 if arm == "cmc" else 900, "truncated": False})
    return pd.DataFrame(rows)


def test_view_table_reports_hops_tokens_and_intervals(items):
    table = view_table(items, ["cmc", "fact_bm25"]).set_index("view")
    assert table.loc["cmc", "MH"] == 100.0 and table.loc["fact_bm25", "MH"] == 0.0
    assert table.loc["fact_bm25", "Tokens"] == 900.0 and table.loc["cmc", "Trunc."] == 0
    assert table.loc["fact_bm25", "MH 95% CI"].startswith("[0.0,")


def test_contrasts_count_wins_and_mark_unregistered_pairs(items):
    out = contrasts(items, [("cmc", "fact_bm25")], preregistered=[], n_boot=200).set_index("hop")
    assert (out.loc["mh", "wins"], out.loc["mh", "ties"], out.loc["mh", "losses"]) == (4, 0, 0)
    assert out.loc["mh", "mean_diff"] == 100.0 and out.loc["sh", "mean_diff"] == 0.0
    assert set(out["status"]) == {"exploratory"}


def test_key_change_strata_and_reader_grid(items):
    changed = {f"q{i}": i < 4 for i in range(8)}
    strata = key_change_strata(items, changed, ["cmc", "fact_bm25"])
    assert strata["n"].sum() == 16 and set(strata["keys_change"]) == {True, False}
    grid = reader_grid(pd.concat([items, items.assign(reader="s", substring_em=0)]))
    assert list(grid["reader"]) == ["r", "s"] and grid.loc[grid.reader == "s", "cmc MH"].item() == 0.0


def test_length_order_and_accuracy_groups(items):
    assert length_order(["262k", "6k", "64k", "32k"]) == ["6k", "32k", "64k", "262k"]
    acc = accuracy(items, ["arm", "length"])
    assert acc["n"].sum() == len(items)


def test_selection_vs_reader_splits_misses_by_gold_presence(items):
    # fact_bm25 holds the gold string for q0-q3 only; cmc always does
    gold = {(arm, f"q{i}"): arm == "cmc" or i < 4 for arm in ("cmc", "fact_bm25") for i in range(8)}
    out = selection_vs_reader(items, gold).set_index(["arm", "hop"])
    assert out.loc[("cmc", "mh"), ["n", "gold_in_evidence", "correct_with_gold"]].tolist() == [4, 4, 4]
    bm25_mh = out.loc[("fact_bm25", "mh")]  # q1, q3 hold gold, q5, q7 do not; all four answered wrong
    assert (bm25_mh["gold_in_evidence"], bm25_mh["correct_with_gold"], bm25_mh["reader_rate_with_gold"]) == (2, 0, 0.0)
    bm25_sh = out.loc[("fact_bm25", "sh")]  # q0, q2 with gold, q4, q6 without: all answered right
    assert (bm25_sh["correct_with_gold"], bm25_sh["correct_without_gold"]) == (2, 2)
