"""The documented GPU/API path, as a user types it: serve a model folder over the OpenAI
API (`python -m readers.serve`, the same protocol vLLM serves), then run the harness
against it with `reader=openai` and the two environment variables."""
from __future__ import annotations

import json
import os
import socket
import subprocess
import sys
import time
import urllib.request

import pytest

from provenance.bundle import read_bundle_jsonl, verify_seal
from tests.conftest import ROOT

pytestmark = pytest.mark.slow


def _free_port() -> int:
    with socket.socket() as sock:
        sock.bind(("127.0.0.1", 0))
        return sock.getsockname()[1]


def _wait_ready(url: str, server: subprocess.Popen, seconds: float = 120) -> None:
    deadline = time.monotonic() + seconds
    while time.monotonic() < deadline:
        if server.poll() is not None:
            raise AssertionError(f"server exited: {server.stdout.read()}")
        try:
            with urllib.request.urlopen(f"{url}/models", timeout=2) as reply:
                if reply.status == 200:
                    return
        except OSError:
            time.sleep(0.5)
    raise AssertionError(f"server at {url} not ready after {seconds} s")


def test_serve_then_run_with_the_openai_reader(tmp_path, tiny_model_dir):
    port = _free_port()
    url = f"http://127.0.0.1:{port}/v1"
    server = subprocess.Popen([sys.executable, "-m", "readers.serve", "--model-dir", str(tiny_model_dir),
                               "--port", str(port), "--served-model-name", "tiny", "--dtype", "float32"],
                              cwd=ROOT, stdout=subprocess.PIPE, stderr=subprocess.STDOUT, text=True)
    try:
        _wait_ready(url, server)
        env = {**os.environ, "OPENAI_BASE_URL": url, "OPENAI_MODEL": "tiny"}
        done = subprocess.run([sys.executable, "run.py", "arm=cmc", "reader=openai", "population=quick",
                               "population.per_cell=2", "population.name=served", f"paths.results_dir={tmp_path}",
                               f"paths.cache_dir={tmp_path / 'cache'}", f"hydra.run.dir={tmp_path / 'hydra'}"],
                              cwd=ROOT, env=env, capture_output=True, text=True, timeout=600)
        assert done.returncode == 0, done.stderr[-3000:]
    finally:
        server.terminate()
        server.wait(timeout=30)
    bundle = tmp_path / "bundles" / "adhoc" / "factconsolidation-grammar-served-cmc-openai"
    verify_seal(bundle)
    predictions = read_bundle_jsonl(bundle, "predictions.jsonl")
    assert len(predictions) == 4 and all(p["error"] is None and p["model"] == "tiny" for p in predictions)
    manifest = json.loads((bundle / "manifest.json").read_text())
    assert manifest["reader_pin"]["base_url"] == url and manifest["reader_pin"]["model"] == "tiny"
