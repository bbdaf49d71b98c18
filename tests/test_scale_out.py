"""Scale-out changes nothing measured: views run in parallel by the joblib launcher seal the
same bundles, byte for byte, as the basic launcher, and a run generated in shards (on
separate machines: separate stores, journals carried over) seals the bundle an unsharded
run seals."""
from __future__ import annotations

import subprocess
import sys
from pathlib import Path

import pytest
from hypothesis import given
from hypothesis import strategies as st

from common.errors import DataError
from harness.stages import run
from sources.population import Population, parse_shard, shard_slice
from tests.conftest import ROOT, compose_config

TINY = ["reader=local", "reader.dtype=float32", "population=quick", "population.name=s8", "population.per_cell=2",
        "population.lengths=[6k,32k]"]
# Parallel views need several views, not many questions: one per hop of the 6K history.
TINY_VIEWS = ["reader=local", "reader.dtype=float32", "population=quick", "population.name=v2", "population.per_cell=1",
              "population.lengths=[6k]"]


def _bundles(results: Path) -> dict[str, dict[str, bytes]]:
    folder = results / "bundles" / "adhoc"
    return {b.name: {p.name: p.read_bytes() for p in sorted(b.iterdir())} for b in sorted(folder.iterdir())}


@given(st.lists(st.integers(), max_size=60), st.integers(min_value=1, max_value=9))
def test_shards_cover_every_item_once_in_order_and_near_equal(items, count):
    shards = [shard_slice(items, (i, count)) for i in range(count)]
    assert [x for shard in shards for x in shard] == items
    assert max(map(len, shards)) - min(map(len, shards)) <= 1


@pytest.mark.parametrize("bad", ["2/2", "-1/3", "1", "a/b", "1/0"])
def test_a_malformed_shard_is_refused(bad):
    with pytest.raises(ValueError, match="shard must be 'i/n'"):
        parse_shard(bad)
    assert Population(shard="1/3").shard == (1, 3)


@pytest.mark.slow
def test_shards_on_separate_machines_seal_the_unsharded_bundle(tmp_path, tiny_model_dir):
    common = [*TINY, f"reader.model.local_path={tiny_model_dir}", "arm=cmc"]
    whole = run(compose_config(*common, f"paths.results_dir={tmp_path / 'one'}", f"paths.cache_dir={tmp_path / 'c1'}"))
    shared = f"paths.results_dir={tmp_path / 'sharded'}"  # the work folder travels (it is committed)
    for index in range(3):  # each shard on its own "machine": its own prediction store
        run(compose_config(*common, shared, f"paths.cache_dir={tmp_path / f'm{index}'}",
                           f"population.shard={index}/3"))
    journals = sorted(p.name for p in (tmp_path / "sharded" / "work" / "adhoc").rglob("predictions*.jsonl"))
    assert journals == [f"predictions.shard-{i}-of-3.jsonl" for i in range(3)]
    with pytest.raises(DataError, match="a shard only generates"):
        run(compose_config(*common, shared, f"paths.cache_dir={tmp_path / 'm0'}", "population.shard=0/3",
                           "stage=seal"))
    run(compose_config(*common, shared, f"paths.cache_dir={tmp_path / 'sealer'}"))  # an empty store: journals only
    assert _bundles(tmp_path / "sharded") == _bundles(tmp_path / "one") and whole.is_dir()
    sittings = (tmp_path / "sharded" / "scores" / "adhoc").rglob("sittings.jsonl")
    assert sum(len(p.read_text().splitlines()) for p in sittings) == 3  # one sitting per shard, merged


@pytest.mark.slow
def test_parallel_views_on_joblib_seal_the_basic_launchers_bundles(tmp_path, tiny_model_dir):
    def multirun(name: str, *launcher: str) -> None:
        done = subprocess.run(
            [sys.executable, "run.py", "-m", "arm=cmc,stale_closure,latest_state,fact_bm25", *TINY_VIEWS,
             f"reader.model.local_path={tiny_model_dir}", f"paths.results_dir={tmp_path / name}",
             f"paths.cache_dir={tmp_path / 'cache'}", f"hydra.sweep.dir={tmp_path / name / 'sweep'}", *launcher],
            cwd=ROOT, capture_output=True, text=True, timeout=1800)
        assert done.returncode == 0, done.stderr[-3000:]

    multirun("joblib", "hydra/launcher=joblib", "hydra.launcher.n_jobs=2")  # first: it fills the shared store
    multirun("basic")
    parallel, serial = _bundles(tmp_path / "joblib"), _bundles(tmp_path / "basic")
    assert len(serial) == 4 and parallel == serial
