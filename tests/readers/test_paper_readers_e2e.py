"""The user's own command with the paper's reader configs, on tiny checkpoints in the hub
layout of those architectures: `run.py arm=stale_closure reader=qwen35_4b
reader.model.local_path=<it>` must load a qwen3_5 model (linear- and full-attention layers)
through transformers 5, seal, replay and score; likewise Llama 3.1's template path."""
from __future__ import annotations

import json
import subprocess
import sys

import pytest
import torch
from transformers import AutoModelForCausalLM

from provenance.bundle import read_bundle_jsonl, verify_seal
from readers.compute import auto_dtype
from readers.models import folder_sha256
from tests.conftest import ROOT
from tests.readers.hub_models import build_tiny_llama31, build_tiny_qwen35

pytestmark = pytest.mark.slow


def test_the_tiny_qwen35_checkpoint_has_the_hub_layout_and_reloads_as_a_causal_lm(tmp_path):
    from transformers.models.qwen3_5 import Qwen3_5ForConditionalGeneration

    folder = build_tiny_qwen35(tmp_path / "qwen35")
    config = json.loads((folder / "config.json").read_text())
    assert config["model_type"] == "qwen3_5" and config["architectures"] == ["Qwen3_5ForConditionalGeneration"]
    assert sorted(set(config["text_config"]["layer_types"])) == ["full_attention", "linear_attention"]
    causal = AutoModelForCausalLM.from_pretrained(folder)
    assert type(causal).__name__ == "Qwen3_5ForCausalLM"
    whole = Qwen3_5ForConditionalGeneration.from_pretrained(folder)
    ids = torch.tensor([[5, 17, 42, 99, 7]])
    with torch.no_grad():  # the text weights were mapped, not left at a fresh random init
        assert torch.equal(causal(input_ids=ids).logits, whole(input_ids=ids).logits)


@pytest.mark.parametrize("reader, build, arm", [
    ("qwen35_4b", build_tiny_qwen35, "stale_closure"),
    ("llama31_8b", build_tiny_llama31, "cmc"),
])
def test_the_users_command_runs_a_paper_reader_end_to_end(tmp_path, reader, build, arm):
    model = build(tmp_path / "model")
    results = tmp_path / "results"
    command = [sys.executable, "run.py", f"arm={arm}", f"reader={reader}", f"reader.model.local_path={model}",
               "reader.max_new_tokens=8", "population=quick", "population.per_cell=1", "population.name=e2e",
               f"paths.results_dir={results}",
               f"paths.cache_dir={tmp_path / 'cache'}", f"hydra.run.dir={tmp_path / 'hydra'}"]
    done = subprocess.run(command, cwd=ROOT, capture_output=True, text=True, timeout=900)
    assert done.returncode == 0, done.stderr[-3000:]
    print("\n$", " ".join(command[1:]), "\n", done.stderr[-1500:])

    name = f"factconsolidation-grammar-e2e-{arm}-{reader}"
    bundle = results / "bundles" / "adhoc" / name
    verify_seal(bundle)
    manifest = json.loads((bundle / "manifest.json").read_text())
    pin = manifest["reader_pin"]
    # The hub pin says which weights were meant; the content hash says which were loaded.
    assert pin["local_sha256"] == folder_sha256(model) and pin["identity_scheme"] == 2
    assert manifest["config"]["reader"]["dtype"] == "auto" and pin["dtype"] == auto_dtype("cpu")
    predictions = read_bundle_jsonl(bundle, "predictions.jsonl")
    assert len(predictions) == 2 and all(p["error"] is None and p["raw"] is not None for p in predictions)
    assert all(p["runtime"]["transformers"].startswith("5.") for p in predictions)
    summary = json.loads((results / "scores" / "adhoc" / name / "summary.json").read_text())
    assert summary["n"] == 2

    replayed = subprocess.run([sys.executable, "-m", "harness.cli", "replay", str(bundle), f"reader.model.local_path={model}",
                               f"paths.results_dir={results}"], cwd=ROOT, capture_output=True, text=True, timeout=600)
    assert replayed.returncode == 0 and "replay OK" in replayed.stdout, replayed.stdout + replayed.stderr[-2000:]
