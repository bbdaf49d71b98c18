"""An outage must not become a permanent result: a run whose requests failed is not sealed
unless the user says so, keeps its good answers, and a rerun retries only the failures."""
from __future__ import annotations

import json

import pytest

from common.calls import Prediction
from common.errors import DataError
from harness.views import check_failures
from harness.stages import run
from provenance.bundle import read_bundle_jsonl
from readers.hf import HFReader
from readers.models import HubModel
from readers.serve import ReaderBackend
from tests.conftest import compose_config
from tests.readers.faulty_server import FaultyServer

pytestmark = pytest.mark.slow
BUNDLE = ("bundles", "adhoc", "factconsolidation-grammar-down-cmc-openai")


@pytest.fixture
def server(tiny_model_dir):
    local = HFReader("local", HubModel("tiny", "local", local_path=str(tiny_model_dir)), dtype="float32",
                     max_new_tokens=8)
    served = FaultyServer(ReaderBackend(local, model_id="tiny")).start()
    yield served
    served.stop()


def _config(tmp_path, server, *extra):
    return compose_config("reader=openai", f"reader.base_url={server.url}", "reader.model=tiny", "reader.max_retries=0",
                          "reader.concurrency=1", "arm=cmc", "population=quick", "population.per_cell=2",
                          "population.name=down", f"paths.results_dir={tmp_path}", f"paths.cache_dir={tmp_path / 'c'}",
                          *extra)


@pytest.mark.parametrize("faults", [
    ("ok", "500", "503", "ok"), ("502", "ok", "ok", "429"), ("drop", "ok", "badjson", "ok"),
    ("ok", "nochoices", "ok", "500"), ("400", "ok", "401", "ok"), ("ok", "ok", "404", "413"),
], ids="-".join)
def test_an_outage_is_not_sealed_and_a_rerun_retries_only_the_failures(tmp_path, server, faults):
    server.inject(*faults)  # two of four requests fail, whatever the fault
    with pytest.raises(DataError, match=r"2 of 4 requests failed .*nothing was sealed.*retry only"):
        run(_config(tmp_path, server))
    assert not tmp_path.joinpath(*BUNDLE).exists() and not tmp_path.joinpath("scores").exists()
    answered = sum(server.counts.values())
    run(_config(tmp_path, server))  # the server is back
    assert sum(server.counts.values()) == answered + 2  # only the two failures were sent again
    predictions = read_bundle_jsonl(tmp_path.joinpath(*BUNDLE), "predictions.jsonl")
    assert len(predictions) == 4 and all(p["error"] is None for p in predictions)
    assert "sealed_with_errors" not in json.loads(tmp_path.joinpath(*BUNDLE, "manifest.json").read_text())


def test_sealing_failures_is_an_explicit_recorded_choice(tmp_path, server):
    server.inject(*["500"] * 4)
    run(_config(tmp_path, server, "allow_errors=true"))
    manifest = json.loads(tmp_path.joinpath(*BUNDLE, "manifest.json").read_text())
    assert manifest["sealed_with_errors"] == {"allow_errors": True, "failed": 4, "of": 4}
    summary = json.loads(tmp_path.joinpath("scores", *BUNDLE[1:], "summary.json").read_text())
    assert summary["n"] == 4 and sum(h["correct"] for h in summary["by_hop"].values()) == 0


def test_an_error_share_above_the_allowed_one_is_refused():
    good, bad = Prediction("a", "x"), Prediction("b", None, error="HTTP 500")
    assert check_failures([good] * 99 + [bad], 0.01) == {"allow_errors": 0.01, "failed": 1, "of": 100}
    with pytest.raises(DataError, match="2 of 100 requests failed"):
        check_failures([good] * 98 + [bad] * 2, 0.01)
    with pytest.raises(DataError, match="allow_errors must be"):
        check_failures([bad], "yes")
