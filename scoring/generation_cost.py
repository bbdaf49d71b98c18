"""What each view's answers cost to generate: wall time, requests sent, engine and machine.

Timings stay out of the deterministic bundle (they vary by machine): each run's sittings
move to its scores folder at seal (cmc/sittings.py). This table joins them with what the
bundle itself records about how the reader ran: the engine from the manifest's reader pin,
the CPU flags from each prediction's runtime. A view holding more answers than its timed
sittings sent took the rest from the prediction store (identical requests of another run,
e.g. Table 5's CMC view holds the depth-5 run's answers) or sent them before sittings were
recorded (Table 1's first views); its time is then left blank, never shown as zero.
"""
from __future__ import annotations

from pathlib import Path
from typing import Any, Mapping

import pandas as pd

from cmc.bundle import read_bundle_jsonl, read_manifest
from cmc.sittings import read_sittings, total


def engine_label(pin: Mapping[str, Any]) -> str:
    """How the reader ran, from its pin: the backend and, for transformers, the dtype (the
    same reader name runs as float32 in Table 1 and bfloat16 elsewhere: never the same numbers)."""
    return " ".join(str(pin[key]) for key in ("backend", "engine", "dtype") if pin.get(key))


def cpu_flag_sets(predictions: list[dict[str, Any]]) -> str:
    """The distinct recorded CPU flag sets the answers were generated on ("not recorded" for
    predictions older than the runtime record), so a timing is never read without its machine."""
    sets = {" ".join(row["runtime"].get("cpu_flags") or []) if row.get("runtime") else "not recorded"
            for row in predictions}
    return " | ".join(sorted(s or "none listed" for s in sets))


def _prefill_reused(sittings: list[dict[str, Any]]) -> float | None:
    """Percent of prompt tokens the prefix cache served, over the sittings that counted them."""
    counted = [s for s in sittings if s.get("prefill_tokens_total")]
    computed = sum(s["prefill_tokens_total"] for s in counted)
    return round(100 * sum(s.get("prefill_tokens_saved", 0) for s in counted) / computed, 1) if computed else None


def view_cost(view: str, bundle: Path, scores: Path) -> dict[str, Any]:
    """One view's row: its sittings summed (cmc/sittings.total) beside its bundle's engine."""
    sittings = read_sittings(scores / "sittings.jsonl")
    summed = total(sittings)
    predictions = read_bundle_jsonl(bundle, "predictions.jsonl")
    sent, seconds = summed["requests"], summed["seconds"]
    return {"view": view, "engine": engine_label(read_manifest(bundle).get("reader_pin") or {}) or "not recorded",
            "predictions": len(predictions), "requests sent": sent, "sittings": summed["sittings"],
            "wall hours": round(seconds / 3600, 2) if sent else None,
            "s/request": round(seconds / sent, 2) if sent else None,
            "prefill reused %": _prefill_reused(sittings),
            "CPUs": " ".join(str(c) for c in sorted({s["cpus"] for s in sittings})) or None,
            "CPU flags": cpu_flag_sets(predictions)}


def generation_table(bundles: Mapping[str, Path], scores_root: Path) -> pd.DataFrame:
    """Per view (in the order given): predictions in the bundle, requests this view's own
    sittings sent (the rest came from the store), wall hours summed over its sittings (model
    load and prefix prefills included), seconds per sent request, the share of prompt tokens
    the prefix cache served, the CPUs each sitting could use and the CPU flags recorded."""
    return pd.DataFrame([view_cost(view, bundle, scores_root / bundle.name) for view, bundle in bundles.items()])
