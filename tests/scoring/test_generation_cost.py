"""The generation-cost table (scoring/generation_cost.py) on hand-made bundles and sittings:
sittings are summed per view, a view answered wholly from the store says it sent nothing
(no zero time), and the engine and CPU flags come from the bundle, not from the machine
that makes the table."""
from __future__ import annotations

import json
from pathlib import Path

import pandas as pd

from scoring.generation_cost import generation_table

AMX = ["avx2", "avx512_bf16", "amx_bf16"]


def bundle(root: Path, name: str, pin: dict, runtimes: list[dict | None]) -> Path:
    folder = root / "bundles" / name
    folder.mkdir(parents=True)
    (folder / "manifest.json").write_text(json.dumps({"reader_pin": pin}))
    rows = [{"request_id": str(i), **({"runtime": r} if r else {})} for i, r in enumerate(runtimes)]
    (folder / "predictions.jsonl").write_text("".join(json.dumps(r) + "\n" for r in rows))
    return folder


def sittings(root: Path, name: str, rows: list[dict]) -> None:
    folder = root / "scores" / name
    folder.mkdir(parents=True)
    (folder / "sittings.jsonl").write_text("".join(json.dumps(r) + "\n" for r in rows))


def test_sittings_are_summed_and_a_store_answered_view_sent_nothing(tmp_path):
    bf16 = {"backend": "transformers", "dtype": "bfloat16"}
    long = bundle(tmp_path, "long", bf16, [{"cpu_flags": AMX}, {"cpu_flags": AMX}, {"cpu_flags": ["avx2"]}])
    sittings(tmp_path, "long", [
        {"started_utc": "a", "requests": 2, "seconds": 3600.0, "cpus": 2, "prefill_tokens_total": 1000,
         "prefill_tokens_saved": 250},
        {"started_utc": "b", "requests": 1, "seconds": 900.0, "cpus": 16}])
    reused = bundle(tmp_path, "reused", {"backend": "llamacpp"}, [None, None])
    table = generation_table({"long": long, "reused": reused}, tmp_path / "scores").set_index("view")
    assert list(table.index) == ["long", "reused"]
    row = table.loc["long"]
    assert (row["predictions"], row["requests sent"], row["sittings"]) == (3, 3, 2)
    assert row["wall hours"] == 1.25 and row["s/request"] == 1500.0
    assert row["prefill reused %"] == 25.0  # only the sitting that counted tokens
    assert row["engine"] == "transformers bfloat16" and row["CPUs"] == "2 16"
    assert row["CPU flags"] == "avx2 | avx2 avx512_bf16 amx_bf16"  # both machines named
    other = table.loc["reused"]
    assert (other["requests sent"], other["sittings"]) == (0, 0)
    assert pd.isna(other["wall hours"]) and pd.isna(other["s/request"]) and pd.isna(other["CPUs"])
    assert other["engine"] == "llamacpp" and other["CPU flags"] == "not recorded"
