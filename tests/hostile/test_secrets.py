"""No secret reaches disk: URLs lose their userinfo, and stored error bodies lose header
echoes and key-like strings, in manifests, request pins and predictions."""
from __future__ import annotations

import json
import os
import subprocess
import sys

import pytest

from common.secrets import REDACTED, scrub
from provenance.bundle import read_bundle_jsonl
from readers.openai_api import OpenAIReader
from tests.conftest import ROOT, compose_config

SECRET = "hunter2-Sup3rSecret"


@pytest.mark.parametrize("text, kept", [
    (f"https://alice:{SECRET}@api.example.com/v1", "https://api.example.com/v1"),
    (f"http://{SECRET}@127.0.0.1:8000/v1/models", "http://127.0.0.1:8000/v1/models"),
    (f'{{"error": "bad", "headers": {{"Authorization": "Bearer {SECRET}"}}}}', '"Authorization": "<redacted>"'),
    (f"authorization: Bearer {SECRET}\nx-api-key: {SECRET}", "x-api-key: <redacted>"),
    (f"invalid key sk-proj-{SECRET} for this org", f"invalid key {REDACTED} for this org"),
    (f"token hf_{SECRET.replace('-', '')} rejected", f"token {REDACTED} rejected"),
    (f"Cookie={SECRET}; path=/", "Cookie=<redacted>"),
])
def test_scrub_removes_credentials(text, kept):
    assert SECRET not in scrub(text) and kept in scrub(text)


def test_ordinary_text_is_untouched():
    text = "The capital of France is Paris. http://127.0.0.1:8000/v1 answered HTTP 500: server_error"
    assert scrub(text) == text


def test_a_reader_url_with_userinfo_is_recorded_without_it():
    reader = OpenAIReader(name="r", base_url=f"https://bob:{SECRET}@api.example.com/v1", model="m")
    assert reader.pin["base_url"] == "https://api.example.com/v1" and SECRET not in json.dumps(reader.pin)
    assert SECRET in reader._connect_url  # the connection still authenticates


@pytest.mark.slow
def test_no_secret_in_any_file_a_failed_api_run_writes(tmp_path, tiny_model_dir):
    from harness.stages import run
    from readers.hf import HFReader
    from readers.models import HubModel
    from readers.serve import ReaderBackend
    from tests.readers.faulty_server import FaultyServer

    local = HFReader("local", HubModel("tiny", "local", local_path=str(tiny_model_dir)), dtype="float32")
    server = FaultyServer(ReaderBackend(local, model_id="tiny")).start()
    server.inject(*["400"] * 4)
    url = server.url.replace("http://", f"http://user:{SECRET}@")
    try:
        run(compose_config("reader=openai", f"reader.base_url={url}", "reader.model=tiny", "reader.max_retries=0",
                           "arm=cmc", "population=quick", "population.per_cell=2", "population.name=s", "allow_errors=true",
                           f"paths.results_dir={tmp_path}", f"paths.cache_dir={tmp_path / 'cache'}"))
    finally:
        server.stop()
    bundle = tmp_path / "bundles" / "adhoc" / "factconsolidation-grammar-s-cmc-openai"
    assert all(p["error"] for p in read_bundle_jsonl(bundle, "predictions.jsonl"))
    for path in tmp_path.rglob("*"):
        if path.is_file():
            assert SECRET.encode() not in path.read_bytes(), path


@pytest.mark.parametrize("override", [
    f"reader.base_url=https://alice:{SECRET}@api.example.com/v1",
    f"reader.api_key=sk-{SECRET}",
    f"+reader.headers.Authorization=Bearer {SECRET}",
])
def test_a_credential_on_the_command_line_is_refused_before_hydra_writes(tmp_path, override):
    done = subprocess.run([sys.executable, str(ROOT / "run.py"), "reader=openai", override], cwd=tmp_path,
                          capture_output=True, text=True, timeout=120)
    assert done.returncode == 2 and "Traceback" not in done.stderr
    assert done.stderr.strip().startswith("cmc: error: ") and "oc.env" in done.stderr
    assert SECRET not in done.stderr and list(tmp_path.iterdir()) == []  # no outputs/ folder, nothing written


@pytest.mark.slow
def test_a_credential_passed_through_the_environment_reaches_no_file(tmp_path, tiny_model_dir):
    """The documented route: Hydra records `${oc.env:...}` unresolved, the manifest records
    the URL without its userinfo, and the connection still carries it."""
    from readers.hf import HFReader
    from readers.models import HubModel
    from readers.serve import ReaderBackend
    from tests.readers.faulty_server import FaultyServer

    local = HFReader("local", HubModel("tiny", "local", local_path=str(tiny_model_dir)), dtype="float32",
                     max_new_tokens=4)
    with FaultyServer(ReaderBackend(local, model_id="tiny")) as server:
        env = os.environ | {"CMC_TEST_URL": server.url.replace("http://", f"http://user:{SECRET}@")}
        done = subprocess.run([sys.executable, str(ROOT / "run.py"), "reader=openai", "reader.base_url=${oc.env:CMC_TEST_URL}",
                               "reader.model=tiny", "arm=cmc", "population=quick", "population.per_cell=1",
                               "population.name=env", f"paths.results_dir={tmp_path / 'results'}",
                               f"paths.cache_dir={tmp_path / 'cache'}"],
                              cwd=tmp_path, env=env, capture_output=True, text=True, timeout=600)
    assert done.returncode == 0, done.stderr[-2000:]
    written = [p for p in tmp_path.rglob("*") if p.is_file()]
    assert any(p.name == "overrides.yaml" for p in written) and any(p.name == "SEAL" for p in written)
    for path in written:
        assert SECRET.encode() not in path.read_bytes(), path
