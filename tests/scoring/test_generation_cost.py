"""The generation-cost table (analysis/generation_cost.py) on hand-made bundles and sittings:
sittings are summed per view, a view answered wholly from the store says it sent nothing,
a run whose sittings were never recorded is blank (not zero), and the engine and machine
come from the bundle, not from the machine that makes the table."""
from __future__ import annotations

import json
from pathlib import Path

import pandas as pd
import pytest

from analysis.generation_cost import generation_table
from common.errors import DataError
from tests import valid_rows

AMX = ["avx2", "avx512_bf16", "amx_bf16"]
LLAMA = {"n_threads": 1, "system_info": "CPU : SSE3 = 1 | AVX2 = 1 | AVX512_BF16 = 1 | AMX_INT8 = 0 | OPENMP = 1 |"}


def bundle(root: Path, name: str, pin: dict, runtimes: list[dict | None], ids: list[str] | None = None) -> Path:
    folder = root / "bundles" / name
    folder.mkdir(parents=True)
    (folder / "manifest.json").write_text(json.dumps(valid_rows.manifest(reader_pin=pin)))
    ids = ids or [str(i) for i in range(len(runtimes))]
    rows = [valid_rows.prediction(f"q{n}", i, **({"runtime": r} if r else {}))
            for n, (i, r) in enumerate(zip(ids, runtimes))]
    (folder / "predictions.jsonl").write_text("".join(json.dumps(r) + "\n" for r in rows))
    return folder


def scores(root: Path, name: str, sittings: list[dict] = (), timings: dict | None = None) -> None:
    folder = root / "scores" / name
    folder.mkdir(parents=True)
    if sittings:
        (folder / "sittings.jsonl").write_text("".join(json.dumps(r) + "\n" for r in sittings))
    if timings is not None:
        (folder / "timings.json").write_text(json.dumps(timings))


def test_sittings_are_summed_and_unknowns_stay_blank(tmp_path):
    bf16 = {"backend": "transformers", "dtype": "bfloat16"}
    long = bundle(tmp_path, "long", bf16, [{"cpu_flags": AMX}, {"cpu_flags": AMX}, {"cpu_flags": ["avx2"]}])
    scores(tmp_path, "long", [
        {"started_utc": "a", "requests": 2, "seconds": 3600.0, "cpus": 2, "prefill_tokens_total": 1000,
         "prefill_tokens_saved": 250},
        {"started_utc": "b", "requests": 1, "seconds": 900.0, "cpus": 16}])
    reused = bundle(tmp_path, "reused", {"backend": "llamacpp"}, [LLAMA, LLAMA])
    scores(tmp_path, "reused", timings={"seconds": {"generate": 1.5}, "prefill": {"prefill_tokens_total": 0}})
    old = bundle(tmp_path, "old", {"backend": "transformers", "dtype": "float32"}, [None, None, None],
                 ids=["x", "y", "x"])  # a method may repeat a call: counted once
    scores(tmp_path, "old", timings={"generate": 237.1})  # the flat timings of runs before sittings
    table = generation_table({"long": long, "reused": reused, "old": old}, tmp_path / "scores").set_index("view")
    assert list(table.index) == ["long", "reused", "old"]
    row = table.loc["long"]
    assert (row["requests"], row["requests sent"], row["sittings"]) == (3, 3, 2)
    assert row["wall hours"] == 1.25 and row["s/request"] == 1500.0
    assert row["prefill reused %"] == 25.0  # only the sitting that counted tokens
    assert row["engine"] == "transformers bfloat16" and row["CPUs"] == "2 16"
    assert row["CPU flags"] == "avx2 | avx2 avx512_bf16 amx_bf16"  # both machines named
    store = table.loc["reused"]  # no sittings, and its process counted no prompt token: all from the store
    assert (store["requests sent"], store["sittings"]) == (0, 0) and pd.isna(store["wall hours"])
    assert store["engine"] == "llamacpp" and store["CPU flags"] == "llama.cpp SSE3 AVX2 AVX512_BF16 OPENMP"
    unknown = table.loc["old"]
    assert unknown["requests"] == 2 and pd.isna(unknown["requests sent"]) and pd.isna(unknown["sittings"])
    assert pd.isna(unknown["s/request"]) and pd.isna(unknown["CPUs"]) and unknown["CPU flags"] == "not recorded"


def test_a_bundle_without_a_scores_folder_is_a_named_error(tmp_path):
    lone = bundle(tmp_path, "lone", {}, [None])
    with pytest.raises(DataError, match="no scores folder"):
        generation_table({"lone": lone}, tmp_path / "scores")
