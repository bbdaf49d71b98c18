"""Issue 38's targets, measured from the frontend table: only whole-corpus extractions, repairs
and sweeps together, each against its bound and beside the paper's figure."""
from __future__ import annotations

import pandas as pd

from analysis.frontend_targets import target_table


def test_each_whole_corpus_extraction_is_measured_against_its_targets():
    frontends = pd.DataFrame([
        {"histories": "6k+32k+64k+262k", "frontend": "llm_lines_x", "statements": 18_336, "unresolved": 150,
         "same_triples": 17_000, "calls": 1_000, "calls_by_purpose": "extract 917, repair 60, sweep 50",
         "seconds": 25_200.0},
        {"histories": "6k+32k+64k+262k", "frontend": "hybrid_lines_x", "statements": 18_336, "unresolved": 9,
         "same_triples": 18_000, "calls": 250, "calls_by_purpose": "extract 200, repair 30, review 20", "seconds": 900.0},
        {"histories": "6k+32k", "frontend": "llm_lines_x", "statements": 2_310, "unresolved": 100,
         "same_triples": 10, "calls": 9, "calls_by_purpose": None, "seconds": 1.0},
    ])
    table = target_table(frontends).set_index(["frontend", "target"])
    llm = table.loc["llm_lines_x"]
    assert len(table) == 5 and len(llm) == 4  # the 6K+32K sample is held to nothing
    assert (llm.loc["extraction wall hours (sittings)", "measured"], llm.loc["extraction wall hours (sittings)", "met"]) == (7.0, False)
    assert llm.loc["repair and sweep calls, % of calls", "measured"] == 11.0  # 60 + 50 of 1,000
    assert llm.loc["unresolved, % of statements", "met"] and llm.loc["unresolved, % of statements", "paper"] == 0.016
    assert llm.loc["same triples as the grammar, % of statements", "measured"] == 92.71
    hybrid = table.loc[("hybrid_lines_x", "calls")]
    assert (hybrid["measured"], hybrid["bound"], hybrid["met"], hybrid["paper"]) == (250.0, "<= 300", True, 178)


def test_a_figure_just_over_its_bound_is_missed_and_an_unrecorded_one_is_neither():
    frontends = pd.DataFrame([
        {"histories": "6k+32k+64k+262k", "frontend": "llm_lines_x", "statements": 18_336, "unresolved": 184,
         "same_triples": 17_000, "calls": None, "calls_by_purpose": None, "seconds": None},
        {"histories": "6k+32k+64k+262k", "frontend": "hybrid_lines_x", "statements": 18_336, "unresolved": 9,
         "same_triples": 18_000, "calls": None, "calls_by_purpose": None, "seconds": None},
    ])
    table = target_table(frontends).set_index(["frontend", "target"])
    unresolved = table.loc[("llm_lines_x", "unresolved, % of statements")]
    assert unresolved["measured"] == 1.0 and not unresolved["met"]  # 1.0035% shows as 1.0, and is over 1%
    for row in [("llm_lines_x", "extraction wall hours (sittings)"), ("llm_lines_x", "repair and sweep calls, % of calls"),
                ("hybrid_lines_x", "calls")]:
        assert pd.isna(table.loc[row, "measured"]) and table.loc[row, "met"] is None, row
