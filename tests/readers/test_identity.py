"""What a request id holds (identity scheme 2), how runs sealed under scheme 1 keep their
ids, and how `dtype: auto` is chosen from the CPU once and then frozen with the run."""
from __future__ import annotations

import json
from pathlib import Path

import pytest

from common.calls import Request
from common.errors import DataError
from common.prompt import load_prompt
from readers import compute, hf
from readers.compute import auto_dtype, resolve_dtype
from readers.hf import HFReader
from readers.models import HubModel
from tests.readers.tiny_model import EVIDENCE, PROMPT_NAME, QA

PROMPT = load_prompt(PROMPT_NAME)


def tiny_reader(model_dir: Path, dtype: str = "float32") -> HFReader:
    return HFReader("tiny", HubModel("local/tiny", "none", local_path=str(model_dir)), dtype=dtype, device="cpu")


def test_a_library_upgrade_keeps_scheme_2_ids(tiny_model_dir, monkeypatch):
    before = tiny_reader(tiny_model_dir).prepare(PROMPT, EVIDENCE, QA[0][0])
    monkeypatch.setattr(hf.transformers, "__version__", "9.9.9")  # the module the reader reads
    after = tiny_reader(tiny_model_dir).prepare(PROMPT, EVIDENCE, QA[0][0])
    assert after.id == before.id and before.pin["identity_scheme"] == 2
    assert tiny_reader(tiny_model_dir).runtime["transformers"] == "9.9.9"  # recorded, not identity


def test_a_frozen_scheme_1_pin_rebuilds_the_old_ids_and_refuses_to_generate_under_another_version(tiny_model_dir):
    fresh = tiny_reader(tiny_model_dir)
    legacy_pin = {k: v for k, v in fresh.pin.items() if k != "identity_scheme"} | {"transformers": "4.57.6"}
    old = Request("tiny", legacy_pin, PROMPT.version, *_messages_and_ids(fresh))
    frozen = tiny_reader(tiny_model_dir)
    frozen.freeze(legacy_pin)
    rebuilt = frozen.prepare(PROMPT, EVIDENCE, QA[0][0])
    assert rebuilt.pin == legacy_pin and rebuilt.id == old.id != fresh.prepare(PROMPT, EVIDENCE, QA[0][0]).id
    with pytest.raises(DataError, match="identity scheme 1 with transformers 4.57.6"):
        frozen.generate(rebuilt)


def _messages_and_ids(reader: HFReader) -> tuple:
    request = reader.prepare(PROMPT, EVIDENCE, QA[0][0])
    return request.messages, request.generation, request.input_ids


@pytest.mark.parametrize("device, flags, expected", [
    ("cpu", {"avx2", "fma"}, "float32"),
    ("cpu", {"avx2", "avx512f", "avx512_bf16"}, "bfloat16"),
    ("cpu", {"avx2", "amx_bf16"}, "bfloat16"),
    ("cpu", set(), "float32"),
    ("cuda", {"avx2"}, "float16"),
    ("cuda:0", {"avx512_bf16"}, "float16"),
])
def test_auto_dtype_follows_the_device_and_cpu_flags(device, flags, expected):
    assert auto_dtype(device, frozenset(flags)) == expected


def test_explicit_dtypes_pass_and_unknown_ones_are_refused():
    assert resolve_dtype("bfloat16", "cpu") == "bfloat16"
    with pytest.raises(ValueError, match="'fp8' is not one of auto"):
        resolve_dtype("fp8", "cpu")


def test_this_machines_cpu_flags_are_read():
    flags = compute.cpu_flags()
    assert not flags or "sse2" in flags or "fp" in flags  # x86 always has sse2; Arm lists fp


@pytest.mark.slow
def test_a_run_resumed_on_another_cpu_keeps_the_dtype_frozen_in_its_manifest(tmp_path, tiny_model_dir, monkeypatch):
    from harness.generate import run_prepare
    from harness.runs import Run
    from tests.conftest import compose_config

    base = ["reader=local", f"reader.model.local_path={tiny_model_dir}", "arm=cmc", "population=quick",
            "population.per_cell=1", f"paths.results_dir={tmp_path / 'results'}", f"paths.cache_dir={tmp_path / 'cache'}"]
    cfg = compose_config(*base, "population.name=t8")
    monkeypatch.setattr(compute, "cpu_flags", lambda: frozenset({"avx2", "avx512_bf16"}))
    first = Run(cfg)
    manifest = json.loads(run_prepare(cfg, first).read_text())
    assert manifest["reader_pin"]["dtype"] == "bfloat16" and manifest["config"]["reader"]["dtype"] == "auto"

    monkeypatch.setattr(compute, "cpu_flags", lambda: frozenset({"avx2"}))  # the next sitting's machine
    resumed = Run(cfg)
    assert resumed.reader.dtype == "bfloat16"
    assert [r.id for r in resumed.requests] == [r.id for r in first.requests]
    assert Run(compose_config(*base, "population.name=t8b")).reader.dtype == "float32"  # a new run resolves afresh
