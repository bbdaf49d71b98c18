"""docs/own_method.md, run as written: an arm and a multi-call method of the user's own,
outside the package, plugged in by config alone (hydra.searchpath, $CMC_EXTRA_TARGETS,
PYTHONPATH), run through run.py with the tiny reader, sealed, scored and replayed; without
the environment's allow-list the same bundle is refused, not imported."""
from __future__ import annotations

import json
import os
import subprocess
import sys
from pathlib import Path

import pytest

from common.configurable import EXTRA_TARGETS_ENV, UnknownTargetError
from harness.replay import replay
from provenance.bundle import verify_seal
from tests.conftest import ROOT

pytestmark = pytest.mark.slow

EXAMPLE = ROOT / "examples" / "own_method"
CLASSES = "my_memory.KeywordFacts,my_memory.AskThenRead"


def run_example(tmp: Path, model: Path, arm: str) -> subprocess.CompletedProcess:
    env = {**os.environ, EXTRA_TARGETS_ENV: CLASSES, "PYTHONPATH": f"{EXAMPLE}{os.pathsep}{ROOT}"}
    args = [sys.executable, "run.py", f"hydra.searchpath=[file://{EXAMPLE / 'conf'}]", f"arm={arm}",
            "reader=local", f"reader.model.local_path={model}", "reader.dtype=float32", "population=quick",
            "population.per_cell=1", f"paths.results_dir={tmp / 'results'}", f"paths.cache_dir={tmp / 'cache'}",
            f"hydra.run.dir={tmp / 'hydra'}"]
    return subprocess.run(args, cwd=ROOT, env=env, capture_output=True, text=True)


@pytest.fixture(scope="module")
def example_runs(tmp_path_factory, tiny_model_dir):
    tmp = tmp_path_factory.mktemp("own")
    done = {arm: run_example(tmp, tiny_model_dir, arm) for arm in ("keyword_facts", "ask_then_read")}
    return tmp, done


def bundle(tmp: Path, arm: str) -> Path:
    return tmp / "results" / "bundles" / "adhoc" / f"factconsolidation-grammar-quick-{arm}-local"


def rows(path: Path) -> list[dict]:
    return [json.loads(line) for line in path.read_text().splitlines()]


def test_the_users_arm_runs_and_seals_by_config_alone(example_runs):
    tmp, done = example_runs
    assert done["keyword_facts"].returncode == 0, done["keyword_facts"].stderr[-2000:]
    sealed = bundle(tmp, "keyword_facts")
    verify_seal(sealed)
    evidence = rows(sealed / "evidence.jsonl")
    assert len(evidence) == 2 and all(row["arm"] == "keyword_facts" and row["positions"] for row in evidence)
    assert len(rows(sealed / "predictions.jsonl")) == 2  # one call per question


def test_the_users_method_makes_two_calls_per_question_and_replays(example_runs, tiny_model_dir, monkeypatch):
    tmp, done = example_runs
    assert done["ask_then_read"].returncode == 0, done["ask_then_read"].stderr[-2000:]
    sealed = bundle(tmp, "ask_then_read")
    traces, requests = rows(sealed / "evidence.jsonl"), rows(sealed / "requests.jsonl")
    assert [[c["step"] for c in t["calls"]] for t in traces] == [["entity", "answer"]] * 2
    assert [r["completion"] for r in requests] == [True, False, True, False]
    assert (tmp / "results" / "scores" / "adhoc" / sealed.name / "items.jsonl").is_file()

    monkeypatch.setenv(EXTRA_TARGETS_ENV, CLASSES)
    monkeypatch.syspath_prepend(str(EXAMPLE))
    overrides = [f"reader.model.local_path={tiny_model_dir}", f"paths.results_dir={tmp / 'results'}",
                 f"paths.cache_dir={tmp / 'cache'}"]
    report = replay(sealed, overrides, scores_dir=tmp / "results" / "scores" / "adhoc" / sealed.name)
    assert report.ok and report.checked == 2, report.mismatches

    monkeypatch.delenv(EXTRA_TARGETS_ENV)
    with pytest.raises(UnknownTargetError, match=EXTRA_TARGETS_ENV):
        replay(sealed, overrides)
