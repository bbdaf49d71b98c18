"""A seal that died right after renaming its bundle into place (before retiring the work
folder) is finished by the next run: the bundle is checked, left byte for byte, and the
leftover work folder's sittings move to the scores before it is removed."""
from __future__ import annotations

import shutil

from harness.runs import Run
from harness.stages import run
from tests.conftest import compose_config


def test_a_rerun_finishes_the_clean_up_a_dead_seal_left(tmp_path, tiny_model_dir):
    overrides = ["reader=local", f"reader.model.local_path={tiny_model_dir}", "reader.dtype=float32",
                 "reader.max_new_tokens=4", "arm=cmc", "population=quick", "population.per_cell=1",
                 "population.name=one", f"paths.results_dir={tmp_path / 'results'}", f"paths.cache_dir={tmp_path / 'c'}"]
    cfg = compose_config(*overrides)
    run(cfg)
    done = Run(cfg)
    bundle = {p.name: p.read_bytes() for p in done.bundle_dir.iterdir()}
    sittings = (done.scores_dir / "sittings.jsonl").read_bytes()
    (done.scores_dir / "sittings.jsonl").unlink()
    done.work_dir.mkdir(parents=True)  # what the dead seal left: its work folder, sittings included
    shutil.copyfile(done.bundle_dir / "manifest.json", done.work_dir / "manifest.json")
    (done.work_dir / "sittings.jsonl").write_bytes(sittings)

    run(compose_config(*overrides, "stage=seal"))
    assert not done.work_dir.exists()
    assert (done.scores_dir / "sittings.jsonl").read_bytes() == sittings
    assert {p.name: p.read_bytes() for p in done.bundle_dir.iterdir()} == bundle
