"""What each view's answers cost to generate: wall time, requests sent, engine and machine.

Timings stay out of the deterministic bundle (they vary by machine): each run's sittings
move to its scores folder at seal (generation/sittings.py). This table joins them with what the
bundle itself records about how the reader ran: the engine from the manifest's reader pin,
the CPU flags from each prediction's runtime. A view holding more requests than its
sittings sent took the rest from the prediction store (identical requests of another run,
e.g. Table 5's CMC view holds the depth-5 run's answers) or sent them in a sitting whose
time was not recorded (Table 1's first runs): an unknown is left blank, never shown as zero.
"""
from __future__ import annotations

import json
import re
from pathlib import Path
from typing import Any, Mapping

import pandas as pd

from common.errors import DataError
from generation.sittings import read_sittings, total
from provenance.bundle import read_bundle_jsonl, read_manifest
from provenance.row_types import check_document, check_rows


def engine_label(pin: Mapping[str, Any]) -> str:
    """How the reader ran, from its pin: the backend and, for transformers, the dtype (the
    same reader name runs as float32 in Table 1 and bfloat16 elsewhere: never the same numbers)."""
    return " ".join(str(pin[key]) for key in ("backend", "engine", "dtype") if pin.get(key))


def machine_flags(runtime: Mapping[str, Any] | None) -> str:
    """One prediction's recorded machine: the transformers reader's CPU flags, or the
    llama.cpp build's enabled features (its system_info's "NAME = 1" entries)."""
    if not runtime:
        return "not recorded"
    if "cpu_flags" in runtime:
        return " ".join(runtime["cpu_flags"]) or "none listed"
    if "system_info" in runtime:
        enabled = re.findall(r"([A-Za-z0-9_]+) = 1", runtime["system_info"])
        return "llama.cpp " + " ".join(enabled)
    return "not recorded"


def cpu_flag_sets(predictions: list[dict[str, Any]]) -> str:
    """The distinct machines the answers were generated on, so a timing is never read
    without its machine ("not recorded" for predictions older than the runtime record)."""
    return " | ".join(sorted({machine_flags(row.get("runtime")) for row in predictions}))


def _prefill_reused(sittings: list[dict[str, Any]]) -> float | None:
    """Percent of prompt tokens the prefix cache served, over the sittings that counted them."""
    counted = [s for s in sittings if s.get("prefill_tokens_total")]
    computed = sum(s["prefill_tokens_total"] for s in counted)
    return round(100 * sum(s.get("prefill_tokens_saved", 0) for s in counted) / computed, 1) if computed else None


def _nothing_sent(scores: Path) -> bool:
    """A run without sittings either sent nothing (a sitting line is written per finished
    request) or ran before sittings were recorded. Its timings.json tells them apart when
    its process counted prompt tokens: none counted means every answer came from the store."""
    path = scores / "timings.json"
    if not path.is_file():
        return False
    timings = json.loads(path.read_text(encoding="utf-8"))
    check_document("timings.json", timings, path)
    prefill = timings.get("prefill")
    return isinstance(prefill, dict) and prefill.get("prefill_tokens_total") == 0


def view_cost(view: str, bundle: Path, scores: Path) -> dict[str, Any]:
    """One view's row: its sittings summed (cmc/sittings.total) beside its bundle's engine;
    requests counted by distinct id (a method may repeat a call within its run)."""
    if not scores.is_dir():
        raise DataError(f"{scores}: no scores folder for the sealed bundle {bundle} (score it first: stage=score)")
    sittings = read_sittings(scores / "sittings.jsonl")
    check_rows("sittings.jsonl", sittings, scores / "sittings.jsonl")
    summed = total(sittings)
    predictions = read_bundle_jsonl(bundle, "predictions.jsonl")
    recorded = bool(sittings) or _nothing_sent(scores)
    sent, seconds = summed["requests"], summed["seconds"]
    return {"view": view, "engine": engine_label(read_manifest(bundle).get("reader_pin") or {}) or "not recorded",
            "requests": len({row["request_id"] for row in predictions}),
            "requests sent": sent if recorded else None, "sittings": summed["sittings"] if recorded else None,
            "wall hours": round(seconds / 3600, 2) if sent else None,
            "s/request": round(seconds / sent, 2) if sent else None,
            "prefill reused %": _prefill_reused(sittings),
            "CPUs": " ".join(str(c) for c in sorted({s["cpus"] for s in sittings})) or None,
            "CPU flags": cpu_flag_sets(predictions)}


def generation_table(bundles: Mapping[str, Path], scores_root: Path) -> pd.DataFrame:
    """Per view (in the order given): distinct requests in the bundle, requests this view's
    own sittings sent (blank when none were recorded), wall hours summed over its sittings
    (model load and prefix prefills included), seconds per sent request, the share of prompt
    tokens the prefix cache served, the CPUs each sitting could use and the machine recorded."""
    frame = pd.DataFrame([view_cost(view, bundle, scores_root / bundle.name) for view, bundle in bundles.items()])
    return frame.astype({"requests sent": "Int64", "sittings": "Int64"})
