"""Experiment-level tables on a hand-made item table (the sealed-bundle path is covered by
tests/test_pipeline.py)."""
import math

import pandas as pd
import pytest

from analysis.tables import (accuracy, contrasts, evidence_flags, key_change_strata, length_order, reader_grid,
                             selection_vs_reader, view_table)


@pytest.fixture
def items():
    rows = []
    for i in range(8):
        hop = "sh" if i % 2 == 0 else "mh"
        for arm, correct in (("cmc", 1), ("fact_bm25", int(hop == "sh"))):
            rows.append({"arm": arm, "reader": "r", "engine": "transformers bfloat16", "frontend": "grammar", "question_id": f"q{i}", "hop": hop,
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


def test_a_pooled_contrast_adds_one_row_over_all_shared_questions(items):
    out = contrasts(items, [("cmc", "fact_bm25")], preregistered=[("cmc", "fact_bm25")], n_boot=200, pooled=True)
    assert list(out["hop"]) == ["mh", "sh", "all"]
    pooled = out.set_index("hop").loc["all"]
    assert (pooled["n"], pooled["wins"], pooled["ties"], pooled["losses"]) == (8, 4, 4, 0)
    assert pooled["mean_diff"] == 50.0 and pooled["status"] == "preregistered"


def test_key_change_strata_and_reader_grid(items):
    changed = {f"q{i}": i < 4 for i in range(8)}
    strata = key_change_strata(items, changed, ["cmc", "fact_bm25"])
    assert strata["n"].sum() == 16 and set(strata["keys_change"]) == {True, False}
    grid = reader_grid(pd.concat([items, items.assign(reader="s", substring_em=0)]))
    assert list(grid["reader"]) == ["r", "s"] and grid.loc[grid.reader == "s", "cmc MH"].item() == 0.0
    assert "paper correct" not in grid


def test_reader_grid_never_pools_one_reader_name_run_on_two_engines(items):
    """Table 1's grammar runs are float32, the LLM-frontend runs bfloat16: same reader name,
    different answers, so each engine keeps its own row."""
    fp32 = items.assign(engine="transformers float32", substring_em=0)
    grid = reader_grid(pd.concat([items, fp32])).set_index("engine")
    assert len(grid) == 2 and set(grid["reader"]) == {"r"}
    assert grid.loc["transformers float32", "cmc SH"] == 0.0 and grid.loc["transformers bfloat16", "cmc SH"] == 100.0


def test_reader_grid_counts_correct_answers_beside_the_papers_for_the_same_frontend_kind(items):
    """Table 7 is stated in correct answers per frontend kind; a row over another number of
    questions (a subset of histories) gets no paper count."""
    cmc = items[items["arm"] == "cmc"]
    frontends = pd.concat([cmc.assign(frontend="grammar"), cmc.assign(frontend="hybrid_lines_x", substring_em=0),
                           cmc.head(3).assign(frontend="llm_lines_x")])
    paper = {"view": "cmc", "n": len(cmc), "correct": {"grammar": 7, "hybrid": 6, "llm": 5}}
    grid = reader_grid(frontends, paper).set_index("frontend")
    assert grid.loc["grammar", "cmc correct"] == cmc["substring_em"].sum() and grid.loc["grammar", "n"] == len(cmc)
    assert grid.loc["hybrid_lines_x", "cmc correct"] == 0 and grid.loc["hybrid_lines_x", "paper correct"] == 6
    assert grid.loc["grammar", "paper correct"] == 7
    assert grid.loc["llm_lines_x", "n"] == 3 and pd.isna(grid.loc["llm_lines_x", "paper correct"])


def test_length_order_and_accuracy_groups(items):
    assert length_order(["262k", "6k", "64k", "32k"]) == ["6k", "32k", "64k", "262k"]
    acc = accuracy(items, ["arm", "length"])
    assert acc["n"].sum() == len(items)


def test_selection_vs_reader_splits_answers_by_gold_presence(items):
    # fact_bm25 SH: q0 and q4 hold the gold string, q2 and q6 do not; make q0 and q2 wrong, so
    # a table that paired gold flags with the wrong rows would count differently.
    items.loc[(items.arm == "fact_bm25") & items.question_id.isin(["q0", "q2"]), "substring_em"] = 0
    has_gold = {("cmc", f"q{i}"): True for i in range(8)} | {("fact_bm25", f"q{i}"): i in (0, 4) for i in range(8)}
    items["gold_present"] = [has_gold[(a, q)] for a, q in zip(items.arm, items.question_id)]
    # The wrong answers to q0 (gold shown) and q2 (no gold) and the right one to q4 all stand in
    # the evidence; only q0 is a miss in front of the gold string with a value it was shown.
    items["answer_in_evidence"] = (items.arm == "fact_bm25") & items.question_id.isin(["q0", "q2", "q4"])
    out = selection_vs_reader(items, ["cmc", "fact_bm25"])
    assert list(zip(out.arm, out.hop)) == [("cmc", "sh"), ("cmc", "mh"), ("fact_bm25", "sh"), ("fact_bm25", "mh")]
    out = out.set_index(["arm", "hop"])
    assert out.loc[("cmc", "mh"), ["n", "gold_in_evidence", "correct_with_gold"]].tolist() == [4, 4, 4]
    bm25_sh = out.loc[("fact_bm25", "sh")]  # gold: q0 (wrong), q4 (right); no gold: q2 (wrong), q6 (right)
    assert (bm25_sh["gold_in_evidence"], bm25_sh["correct_with_gold"], bm25_sh["correct_without_gold"]) == (2, 1, 1)
    assert bm25_sh["reader_rate_with_gold"] == 50.0
    assert bm25_sh["wrong_with_gold_answer_shown"] == 1 and out["wrong_with_gold_answer_shown"].sum() == 1
    bm25_mh = out.loc[("fact_bm25", "mh")]  # no gold anywhere: no rate, not a zero
    assert bm25_mh["gold_in_evidence"] == 0 and math.isnan(bm25_mh["reader_rate_with_gold"])


def test_selection_vs_reader_separates_the_extraction_against_the_grammar_reference(items):
    # Here (an LLM frontend) fact_bm25 SH shows gold for q0 and q4; on the grammar's extraction the same
    # view showed it for q0, q2 and q6: q2 and q6 are lost to the extraction, q4 gained.
    items["frontend"] = "llm_lines_x"
    items["gold_present"] = [arm == "cmc" or q in ("q0", "q4") for arm, q in zip(items.arm, items.question_id)]
    items["answer_in_evidence"] = False
    reference = {("cmc", f"q{i}"): True for i in range(8)} | {("fact_bm25", f"q{i}"): i in (0, 2, 6) for i in range(8)}
    out = selection_vs_reader(items, ["cmc", "fact_bm25"], reference).set_index(["arm", "hop"])
    bm25_sh = out.loc[("fact_bm25", "sh")]
    assert (bm25_sh["gold_on_grammar"], bm25_sh["lost_to_extraction"], bm25_sh["gained_by_extraction"]) == (3, 2, 1)
    assert bm25_sh["gold_on_grammar"] - bm25_sh["lost_to_extraction"] + bm25_sh["gained_by_extraction"] \
        == bm25_sh["gold_in_evidence"]
    assert out.loc[("cmc", "mh"), ["gold_on_grammar", "lost_to_extraction", "gained_by_extraction"]].tolist() == [4, 0, 0]
    # A view the reference lacks (or lacks a question of) gets no counts rather than zeros.
    partial = {key: value for key, value in reference.items() if key != ("fact_bm25", "q1")}
    out = selection_vs_reader(items, ["cmc", "fact_bm25"], partial).set_index(["arm", "hop"])
    assert pd.isna(out.loc[("fact_bm25", "mh"), "lost_to_extraction"])
    assert out.loc[("fact_bm25", "sh"), "lost_to_extraction"] == 2
    # counts stay whole numbers beside a blank: "2", never "2.0", in the written table
    csv = out.reset_index().to_csv(index=False).splitlines()
    assert csv[-2].endswith(",3,2,1") and csv[-1].endswith(",,,"), csv
    # Without a reference (the grammar frontend's own table) the columns are absent.
    assert "lost_to_extraction" not in selection_vs_reader(items, ["cmc"]).columns


def test_selection_vs_reader_names_the_missing_gold_column(items):
    with pytest.raises(ValueError, match="histories"):
        selection_vs_reader(items, ["cmc"])


@pytest.mark.parametrize("parsed, shown", [("France", True), ("the France.", True), ("Berlin", False), ("", False),
                                           (None, False), ("The", False)])
def test_evidence_flags_find_the_answer_with_the_released_normalization(parsed, shown):
    # An answer that normalizes to nothing (an article) is never "shown", however often it occurs.
    flags = evidence_flags("12. The capital of France is Paris.", ["Paris"], parsed)
    assert flags == {"gold_present": True, "answer_in_evidence": shown}


def test_markdown_shows_a_missing_value_as_dashes_and_leaves_full_tables_alone():
    from analysis.tables import markdown

    holed = pd.DataFrame({"arm": ["cmc", "bm25"], "rate": [73.82, float("nan")]})
    assert "nan" not in markdown(holed) and "| bm25  |  --    |" in markdown(holed)
    full = pd.DataFrame({"arm": ["cmc"], "rate": [73.82]})
    assert markdown(full) == full.to_markdown(index=False, missingval="--")  # committed tables keep their bytes


def test_only_token_slices_get_a_by_length_figure():
    from analysis.figures import token_slices

    assert token_slices(["6k", "32k", "262k"]) and not token_slices(["6k", "d3u050"])
