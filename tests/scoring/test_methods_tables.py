"""The cost and outcome tables of multi-call methods (analysis/method_costs.py), on hand-made
bundle rows: calls and tokens are averaged per question, an arm's bundle has no outcome
rows, and outcomes split by hop with their correct / unanswered counts and steps."""
from __future__ import annotations

import json
from pathlib import Path

import pandas as pd

from analysis.method_costs import cost_table, outcome_table
from tests import valid_rows


def items(arm: str, rows: list[tuple[str, str, float, int, int, int]]) -> pd.DataFrame:
    return pd.DataFrame([{"arm": arm, "question_id": q, "hop": hop, "substring_em": em, "calls": calls,
                          "input_tokens": tokens_in, "output_tokens": tokens_out}
                         for q, hop, em, calls, tokens_in, tokens_out in rows])


def write_evidence(folder: Path, rows: list[dict]) -> Path:
    folder.mkdir(parents=True)
    rows = [valid_rows.trace(**r) if "calls" in r else valid_rows.packet(**r) for r in rows]
    (folder / "evidence.jsonl").write_text("".join(json.dumps(r) + "\n" for r in rows))
    return folder


def test_cost_table_averages_calls_and_tokens_per_question():
    frame = pd.concat([items("cmc", [("a", "sh", 1, 1, 300, 5), ("b", "mh", 0, 1, 500, 7)]),
                       items("gwalk", [("a", "sh", 0, 4, 3000, 90), ("b", "mh", 1, 6, 5000, 130)])])
    table = cost_table(frame, ["cmc", "gwalk", "mello"]).set_index("view")
    assert list(table.index) == ["cmc", "gwalk"]  # a view without items is left out
    assert table.loc["gwalk", "calls/q"] == 5 and table.loc["gwalk", "max calls"] == 6
    assert table.loc["gwalk", "input tokens/q"] == 4000 and table.loc["cmc", "output tokens/q"] == 6


def test_outcome_table_places_each_method_question_and_skips_arms(tmp_path):
    method = write_evidence(tmp_path / "gwalk", [
        {"question_id": "a", "answer": "Paris", "calls": [], "trace": {"outcome": "walked", "steps": [
            {"fact_pos": 3}, {"fact_pos": None}]}},
        {"question_id": "b", "answer": None, "calls": [], "trace": {"outcome": "no_relations", "steps": []}},
        {"question_id": "c", "answer": "Rome", "calls": [], "trace": {"outcome": "walked", "steps": [{"fact_pos": 9}]}},
    ])
    arm = write_evidence(tmp_path / "cmc", [{"question_id": "a", "positions": [1], "trace": {}}])
    frame = pd.concat([items("gwalk", [("a", "mh", 1, 4, 0, 0), ("b", "mh", 0, 2, 0, 0), ("c", "mh", 0, 3, 0, 0)]),
                       items("cmc", [("a", "mh", 1, 1, 0, 0)])])
    table = outcome_table(frame, {"gwalk": method, "cmc": arm})
    assert set(table["view"]) == {"gwalk"}
    walked = table.set_index("outcome").loc["walked"]
    assert (walked["n"], walked["correct"], walked["no answer"]) == (2, 1, 0)
    assert (walked["steps"], walked["steps reading a bank fact"], walked["steps/q"]) == (3, 2, 1.5)
    none = table.set_index("outcome").loc["no_relations"]
    assert (none["n"], none["no answer"], none["steps"]) == (1, 1, 0)
