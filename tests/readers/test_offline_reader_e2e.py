"""The real offline default reader family end to end: Qwen2.5-Coder-0.5B-Instruct rebuilt
from its PyPI carriers, on 4 FactConsolidation questions (6K history, 2 sh + 2 mh) with
CMC evidence. Every prediction must parse; accuracy and speed are printed for the record."""
from __future__ import annotations

import json
import time

import pytest

from harness.stages import run
from scoring.metrics import parse_answer
from tests.conftest import OFFLINE_SMALL, compose_config

pytestmark = [pytest.mark.slow, OFFLINE_SMALL]


def test_offline_05b_reader_answers_four_questions_with_cmc_evidence(tmp_path):
    cfg = compose_config("reader=qwen25_coder_05b", "arm=cmc", "population=quick", "population.per_cell=2",
                         "population.name=ci4", f"paths.results_dir={tmp_path / 'results'}",
                         f"paths.cache_dir={tmp_path / 'cache'}")
    start = time.perf_counter()
    scores = run(cfg)
    seconds = time.perf_counter() - start
    bundle = tmp_path / "results" / "bundles" / "adhoc" / "factconsolidation-grammar-ci4-cmc-qwen25_coder_05b"
    predictions = [json.loads(line) for line in (bundle / "predictions.jsonl").read_text().splitlines()]
    assert len(predictions) == 4
    assert all(p["error"] is None and parse_answer(p["raw"]) for p in predictions)
    summary = json.loads((scores / "summary.json").read_text())
    correct = sum(h["correct"] for h in summary["by_hop"].values())
    print(f"\nqwen25_coder_05b, CMC evidence, 4 questions: {correct}/4 correct "
          f"({summary['by_hop']}); {seconds:.1f} s total including model load/conversion")
