"""Evidence recall against ground-truth evidence sets, and the synthetic sweep report."""
from __future__ import annotations

import subprocess
import sys

import pandas as pd
import pytest

from harness.stages import run
from scoring.recall import cell_parts, evidence_recall, pooled, sweep_table
from tests.conftest import ROOT, compose_config


def test_recall_is_the_share_of_ground_truth_serials_in_the_packet():
    packets = [{"arm": "a", "question_id": "q1", "positions": [1, 2, 9]},
               {"arm": "a", "question_id": "q2", "positions": [4]},
               {"arm": "a", "question_id": "q3", "positions": []}]
    rows = evidence_recall(packets, {"q1": (1, 2), "q2": (4, 5, 6, 7), "q3": (3,)})
    assert rows["recall"].tolist() == [1.0, 0.25, 0.0] and rows["complete"].tolist() == [True, False, False]


def test_cell_labels_and_the_sweep_table():
    assert cell_parts("d3u050") == (3, 0.5) and cell_parts("d6u100") == (6, 1.0)
    with pytest.raises(ValueError, match="not a synthetic cell"):
        cell_parts("6k")
    items = pd.DataFrame({"arm": ["b", "b", "a", "a"], "question_id": ["q1", "q2", "q1", "q2"], "depth": [2, 2, 2, 2],
                          "update_rate": [0.5] * 4, "recall": [1.0, 0.5, 1.0, 1.0],
                          "complete": [True, False, True, True], "substring_em": [1, 0, 1, 1]})
    table = sweep_table(items)
    assert table["arm"].tolist() == ["b", "a"]  # first-seen arm order, not alphabetical
    assert table.loc[0, ["recall", "complete", "accuracy"]].tolist() == [75.0, 1, 50.0]
    assert pooled(items, ["arm"]).set_index("arm").loc["a", "recall"] == 100.0


@pytest.mark.slow
def test_sweep_report_from_tiny_reader_bundles(tmp_path, tiny_model_dir):
    """Three views of a small sweep sealed with the tiny reader; the report reads recall
    through the vault, and CMC's cap shows at depth 6 (5 of 6 hop records)."""
    knobs = ["dataset.depths=[1,6]", "dataset.update_rates=[1.0]", "dataset.questions_per_cell=2"]
    for arm in ("cmc", "prior_read_refresh", "cmc_depth6"):
        run(compose_config("experiment=synthetic_sweep", f"arm={arm}", "reader=local",
                           f"reader.model.local_path={tiny_model_dir}", "reader.dtype=float32", *knobs,
                           f"paths.results_dir={tmp_path / 'results'}", f"paths.cache_dir={tmp_path / 'cache'}"))
    out = subprocess.run([sys.executable, "-m", "harness.cli", "synthetic-report", "--reader", "local", "--bundles",
                          str(tmp_path / "results" / "bundles"), "--out", str(tmp_path / "out"), *knobs],
                         cwd=ROOT, capture_output=True, text=True, check=True)
    assert "Synthetic sweep" in out.stdout
    table = pd.read_csv(tmp_path / "out" / "tables" / "synthetic_sweep_recall.csv").set_index(["arm", "depth"])
    assert table.loc[("cmc", 6), "recall"] == pytest.approx(100 * 5 / 6, abs=0.01)
    assert table.loc[("cmc_depth6", 6), "recall"] == 100.0 and table.loc[("cmc", 1), "recall"] == 100.0
    assert table.loc[("prior_read_refresh", 6), "recall"] < 100.0  # every hop updated: the next hop moved
    assert (tmp_path / "out" / "figures" / "synthetic_sweep.png").stat().st_size > 0
    assert "| cmc |" in (tmp_path / "out" / "synthetic_sweep.md").read_text()
