"""A bundle made with an LLM frontend records its extraction (who made it, the hash of its
records). Replay and the seal check rebuild the extraction, from the frozen file or from the
journal's replies, and compare: a frozen file edited and given a matching hash (a forgery
that passes the load check) is found."""
from __future__ import annotations

import json
from pathlib import Path

import pytest

from cmc.extraction import Extraction
from cmc.frontends.llm import records_sha256
from harness.replay import replay
from harness.runs import Run
from harness.stages import run
from provenance.bundle import SealError
from tests.conftest import compose_config
from tests.frontends.oracle import GrammarOracle
from tests.readers.faulty_server import FaultyServer


@pytest.fixture(scope="module")
def sealed_llm_run(tmp_path_factory, tiny_model_dir):
    tmp = tmp_path_factory.mktemp("llm_bundle")
    with FaultyServer(GrammarOracle()) as server:
        overrides = ["frontend=llm", "reader@frontend.extractor=openai", f"frontend.extractor.base_url={server.url}",
                     "frontend.extractor.model=grammar-oracle", "frontend.extractor.api_key_env=null",
                     "+dataset.lengths=[6k]", "reader=local", f"reader.model.local_path={tiny_model_dir}",
                     "reader.dtype=float32", "reader.max_new_tokens=4", "arm=cmc", "population=quick",
                     "population.per_cell=1", "population.name=one", f"paths.results_dir={tmp / 'results'}",
                     f"paths.cache_dir={tmp / 'cache'}"]
        run(compose_config(*overrides))
    done = Run(compose_config(*overrides))
    return done, overrides


def test_the_manifest_records_the_extraction_and_a_replay_checks_it(sealed_llm_run):
    done, overrides = sealed_llm_run
    recorded = json.loads((done.bundle_dir / "manifest.json").read_text())["extraction"]
    assert recorded == done.extraction_pin() and len(recorded["records_sha256"]) == 64
    report = replay(done.bundle_dir, [o for o in overrides if o.startswith("paths.")])
    assert report.ok, report.mismatches


def test_a_consistently_forged_frozen_extraction_is_found_by_replay_and_the_seal_check(sealed_llm_run):
    done, overrides = sealed_llm_run
    path = next((Path(done.cfg.paths.results_dir) / "extractions").rglob("corpus-*.json"))
    saved = path.read_text()
    data = json.loads(saved)
    record = next(r for r in data["records"] if r["triples"])
    record.update(status="unresolved", triples=[])  # still valid: only the hash can tell
    data["records_sha256"] = records_sha256(Extraction.from_json(data))  # the forger recomputes the hash
    path.write_text(json.dumps(data) + "\n")
    try:
        report = replay(done.bundle_dir, [o for o in overrides if o.startswith("paths.")])
        assert report.mismatches and report.mismatches[0].startswith("extraction: records "), report.mismatches
        with pytest.raises(SealError, match=r"sealed from a different extraction \(records_sha256\)"):
            run(compose_config(*overrides, "stage=seal"))
    finally:
        path.write_text(saved)


def test_a_work_folder_whose_extraction_changed_before_the_seal_is_refused(sealed_llm_run):
    from common.errors import DataError

    done, overrides = sealed_llm_run
    other = [o if not o.startswith("population.name=") else "population.name=two" for o in overrides]
    run(compose_config(*other, "stage=prepare"))
    run(compose_config(*other, "stage=generate"))
    path = next((Path(done.cfg.paths.results_dir) / "extractions").rglob("corpus-*.json"))
    saved = path.read_text()
    data = json.loads(saved)
    next(r for r in data["records"] if r["triples"]).update(status="unresolved", triples=[])
    data["records_sha256"] = records_sha256(Extraction.from_json(data))
    path.write_text(json.dumps(data) + "\n")
    try:
        with pytest.raises(DataError, match=r"manifest\.json: froze another extraction than the one this run now reads"):
            run(compose_config(*other, "stage=seal"))
    finally:
        path.write_text(saved)
