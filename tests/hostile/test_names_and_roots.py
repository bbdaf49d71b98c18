"""A name that becomes a path never leads out of the results folder, and no write of a run,
replay or reseal lands outside the configured folders, whichever code path built the path.

Each case runs in a sandbox (`tmp_path/sandbox`) with the results and cache folders two
levels down, so a climbing name would land inside `tmp_path`: every file under `tmp_path`
is hashed before and after."""
from __future__ import annotations

import os
from pathlib import Path

import pytest

from common.errors import DataError
from common.io import atomic_write_text, writable_dir, writes_confined_to
from harness.stages import run
from tests.conftest import compose_config
from tests.hostile.conftest import left_unchanged

CLIMBS = ["../../../X", "cmc/../../../X", "a/b", ".hidden", "x y", "..", ""]
NAMED = ["arm.name", "dataset.name", "population.name", "experiment.name", "reader.name", "frontend.name"]


def sandbox(tmp_path: Path) -> list[str]:
    root = tmp_path / "sandbox" / "deep"
    return [f"paths.results_dir={root / 'results'}", f"paths.cache_dir={root / 'cache'}", "population=quick"]


@pytest.mark.parametrize("key", NAMED)
@pytest.mark.parametrize("name", CLIMBS)
def test_a_name_that_climbs_is_refused_when_the_config_is_checked(tmp_path, key, name):
    with left_unchanged(tmp_path), pytest.raises(DataError, match=rf"config: {key.replace('.', '[.]')} = "):
        run(compose_config(*sandbox(tmp_path), "stage=evidence", f"{key}='{name}'", check=False))


@pytest.mark.parametrize("override", ["frontend.extractor.name='../../../X'", "frontend.extractor.name=a/b"])
def test_the_llm_extractors_name_is_checked_before_its_work_path_exists(tmp_path, override):
    with left_unchanged(tmp_path), pytest.raises(DataError, match=r"config: frontend(\.extractor)?\.name = "):
        run(compose_config(*sandbox(tmp_path), "frontend=llm", "stage=evidence", override, check=False))


def test_a_replayed_bundle_whose_frontend_name_climbs_is_refused_before_any_write(tmp_path):
    from harness.replay import replay
    from tests.hostile.test_replay_untrusted import SOURCE, _tampered_bundle

    def edit(manifest: dict, bundle: Path) -> None:
        manifest["config"]["frontend"]["name"] = "../../../../X"

    bundle = _tampered_bundle(tmp_path / "in", edit)
    with left_unchanged(tmp_path, SOURCE), pytest.raises(DataError, match=r"manifest\.json: frontend\.name = "):
        replay(bundle, sandbox(tmp_path)[:2])


def test_writes_outside_the_roots_are_refused_whoever_builds_the_path(tmp_path):
    root, outside = tmp_path / "results", tmp_path / "outside"
    (root / "ok").mkdir(parents=True)
    outside.mkdir()
    os.symlink(outside, root / "link")  # a symlink inside the root that leads out of it
    with writes_confined_to([root]):
        atomic_write_text(root / "ok" / "a.json", "{}\n")
        writable_dir(root / "new" / "deeper")
        for escape in (root / ".." / "outside" / "b.json", root / "link" / "c.json", Path("/") / "d.json"):
            with pytest.raises(DataError, match="outside the folders this run may write to"):
                atomic_write_text(escape, "{}\n")
    assert sorted(p.name for p in outside.iterdir()) == [] and (root / "ok" / "a.json").is_file()
    atomic_write_text(outside / "e.json", "{}\n")  # unconfined (a library user's own call) it writes
    assert (outside / "e.json").is_file()


def test_a_run_writes_only_under_its_configured_folders(tmp_path):
    """The evidence stage of a real config, with writes confined to the configured paths: a
    path built from the config outside them would raise; everything lands under results/."""
    overrides = [*sandbox(tmp_path), "stage=evidence", "arm=stale_closure"]
    run(compose_config(*overrides))
    written = [p for p in tmp_path.rglob("*") if p.is_file()]
    results = tmp_path / "sandbox" / "deep"
    assert written and all(p.is_relative_to(results / "results") or p.is_relative_to(results / "cache")
                           for p in written), written



@pytest.mark.parametrize("key, value", [
    ("arm.cache_dir", "${paths.cache_dir}/../../../../escape"),
    ("arm.cache_dir", "${paths.cache_dir}/embeddings/../../../escape"),
    ("arm.cache_dir", "${paths.data_dir}/embeddings"),  # the data folder is read, never written
])
def test_a_recorded_write_location_cannot_climb_out_or_into_the_data(tmp_path, key, value):
    from harness.replay import replay
    from tests.hostile.test_replay_untrusted import SOURCE, _tampered_bundle

    def edit(manifest: dict, bundle: Path) -> None:
        manifest["config"]["arm"]["cache_dir"] = value

    bundle = _tampered_bundle(tmp_path / "in", edit)
    with left_unchanged(tmp_path, SOURCE), pytest.raises(DataError, match=rf"config\.{key} = .*a bundle cannot choose it"):
        replay(bundle, sandbox(tmp_path)[:2])
