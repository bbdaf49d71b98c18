"""A run refuses names that would escape results/, runs in one process at a time, and
reports bad input as one line (exit 2) rather than a traceback."""
from __future__ import annotations

import subprocess
import sys

import pytest

from common.errors import DataError
from harness.runs import Run
from tests.conftest import ROOT, compose_config


def _base(tmp_path, model) -> list[str]:
    return ["reader=local", f"reader.model.local_path={model}", "arm=cmc", "population=quick", "population.per_cell=1",
            f"paths.results_dir={tmp_path / 'results'}", f"paths.cache_dir={tmp_path / 'cache'}"]


@pytest.mark.parametrize("override", ["population.name=../../../escape", "arm.name=.hidden", "reader.name=a/b",
                                      "experiment.name=x y"])
def test_a_name_that_would_escape_results_is_refused(tmp_path, tiny_model_dir, override):
    with pytest.raises(DataError, match=r"\.name = .*use letters, digits"):  # when the config is checked
        compose_config(*_base(tmp_path, tiny_model_dir), override)
    unchecked = compose_config(*_base(tmp_path, tiny_model_dir), override, check=False)
    with pytest.raises(DataError, match=r"\.name = .*use letters, digits"):  # and again where it becomes a path
        Run(unchecked)


def test_bad_input_is_one_line_with_exit_status_2(tmp_path, tiny_model_dir):
    done = subprocess.run([sys.executable, "run.py", *_base(tmp_path, tiny_model_dir), "population.name=../escape",
                           f"hydra.run.dir={tmp_path / 'h'}"], cwd=ROOT, capture_output=True, text=True, timeout=300)
    assert done.returncode == 2 and "Traceback" not in done.stderr
    assert done.stderr.strip().splitlines()[-1].startswith("cmc: error: config: population.name = '../escape'")
    assert not (tmp_path / "escape").exists() and not (tmp_path / "results").exists()


def test_a_config_typo_stops_run_py_before_anything_is_written(tmp_path, tiny_model_dir):
    done = subprocess.run([sys.executable, "run.py", *_base(tmp_path, tiny_model_dir), "arm.empty_fallback=latst_state",
                           f"hydra.run.dir={tmp_path / 'h'}"], cwd=ROOT, capture_output=True, text=True, timeout=300)
    assert done.returncode == 2 and "Traceback" not in done.stderr
    assert done.stderr.strip().splitlines()[-1].startswith("cmc: error: config: arm.empty_fallback = 'latst_state'")
    assert not (tmp_path / "results").exists() and not (tmp_path / "cache").exists()


@pytest.mark.slow
def test_a_second_process_on_the_same_run_stops_at_once(tmp_path, tiny_model_dir):
    overrides = _base(tmp_path, tiny_model_dir)
    with Run(compose_config(*overrides)).lock:
        done = subprocess.run([sys.executable, "run.py", *overrides, "stage=generate", f"hydra.run.dir={tmp_path / 'h'}"],
                              cwd=ROOT, capture_output=True, text=True, timeout=300)
    assert done.returncode == 2 and "is already running in pid" in done.stderr, done.stderr[-2000:]
    assert not (tmp_path / "results" / "work").exists()  # it stopped before freezing anything


def test_replaying_a_hostile_bundle_prints_one_line(tmp_path):
    from tests.hostile.test_replay_untrusted import _tampered_bundle

    def edit(manifest: dict, bundle) -> None:
        manifest["config"]["arm"]["_target_"] = "os.system"

    bundle = _tampered_bundle(tmp_path, edit)
    done = subprocess.run([sys.executable, "-m", "harness.cli", "replay", str(bundle)], cwd=ROOT, capture_output=True, text=True,
                          timeout=300)
    assert done.returncode == 2 and "Traceback" not in done.stderr
    assert done.stderr.strip().splitlines()[-1].startswith("cmc: error: ") and "'os.system'" in done.stderr
