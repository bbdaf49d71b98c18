"""The one re-check of a sealed bundle, shared by the seal (a rerun over a sealed bundle),
stage=score (a method's traces), replay and reseal: what this code and config rebuild from
the bundle's own config and answers, compared with what it holds.

It only reads. Evidence is selected anew in memory (never read back from an earlier run's
packets, never written to results/evidence), a method is re-executed over the bundle's own
answers, and nothing is generated: an extraction it needs must be frozen or journaled.
"""
from __future__ import annotations

import math
from pathlib import Path
from typing import TYPE_CHECKING, Any, Callable, NamedTuple

from common.errors import DataError
from common.io import canonical_json
from generation.service import no_generation
from harness.method_runs import predictions_by_id
from provenance.bundle import read_bundle_jsonl
from provenance.manifest import config_differences, experiment_config

if TYPE_CHECKING:
    from harness.runs import Run

Rows = dict[str, list[dict[str, Any]]]


class Difference(NamedTuple):
    what: str  # the part that differs: "config (...)", "extraction (records_sha256)", a bundle file, "calls"
    detail: str  # one line saying how, as a replay reports it


def recheck(run: "Run", bundle: Path, manifest: dict[str, Any],
            compare_config: bool = True) -> tuple[list[Difference], Rows | None]:
    """Every part of `bundle` that differs from what `run` rebuilds ([] when it reproduces),
    and the rebuilt rows (None when a method's calls took another path than the sealed ones).
    `compare_config=False` where the run's config was itself composed from the manifest
    (replay, reseal), so only what this code makes of it is compared."""
    with no_generation("a bundle's re-check"):
        return _recheck(run, bundle, manifest, compare_config)


def _recheck(run: "Run", bundle: Path, manifest: dict[str, Any],
             compare_config: bool) -> tuple[list[Difference], Rows | None]:
    found = []
    if compare_config and (keys := config_differences(manifest["config"], experiment_config(run.cfg))):
        found.append(Difference(f"config ({', '.join(keys[:5])})", f"config: {', '.join(keys[:5])} differ"))
    if run.extraction_differs(manifest):
        recorded, rebuilt = manifest["extraction"], run.extraction_pin() or {}
        sealed = recorded.get("records_sha256") if isinstance(recorded, dict) else None
        found.append(Difference("extraction (records_sha256)", f"extraction: records {str(sealed)[:12]} sealed, "
                                f"{str(rebuilt.get('records_sha256'))[:12]} rebuilt from the frozen file or journal"))
    predictions = read_bundle_jsonl(bundle, "predictions.jsonl")
    run.memories  # noqa: B018  (a frontend that cannot load its extraction stops the check here, not below)
    try:
        rows = run.view.rebuilt_rows(predictions_by_id(predictions), str(bundle))
    except DataError as exc:  # a method whose calls took another path than the sealed ones
        return [*found, Difference("calls", f"calls: {exc}")], None
    rebuilt_ids = [row["request_id"] for row in rows["requests.jsonl"]]
    sealed_requests = read_bundle_jsonl(bundle, "requests.jsonl")
    checks = (
        ("evidence.jsonl", run.view.evidence_label, read_bundle_jsonl(bundle, "evidence.jsonl"), rows["evidence.jsonl"],
         same_within_kernels),
        ("requests.jsonl", "request id", [r["request_id"] for r in sealed_requests], rebuilt_ids, same),
        ("requests.jsonl", "request", sealed_requests, rows["requests.jsonl"], same),
        ("predictions.jsonl", "prediction request id", [p["request_id"] for p in predictions], rebuilt_ids, same),
    )
    for what, label, sealed, rebuilt, equal in checks:
        if (detail := compare(label, sealed, rebuilt, equal)) and not any(d.what == what for d in found):
            found.append(Difference(what, detail))
    return found, rows


# How far a score a trace records (a relation's embedding similarity, kept to 6 decimals) may
# move between CPUs: the kernels' summation order differs (AVX-512 vs AMX), the last digit with
# it. Everything else in a row (positions, text hashes, answers, ids) must be equal.
KERNEL_TOLERANCE = 1e-5


def same(a: Any, b: Any) -> bool:
    return canonical_json(a) == canonical_json(b)


def same_within_kernels(a: Any, b: Any) -> bool:
    """Equal rows, but for floats within KERNEL_TOLERANCE of each other, and a scored ranking
    (`ranked` with its `scores`) reordered only among items whose scores are that close."""
    if isinstance(a, dict) and isinstance(b, dict):
        if {"ranked", "scores"} <= a.keys() and a.keys() == b.keys():
            rest = [k for k in a if k not in ("ranked", "scores")]
            return same_ranking(a, b) and all(same_within_kernels(a[k], b[k]) for k in rest)
        return a.keys() == b.keys() and all(same_within_kernels(a[k], b[k]) for k in a)
    if isinstance(a, list) and isinstance(b, list):
        return len(a) == len(b) and all(same_within_kernels(x, y) for x, y in zip(a, b))
    if isinstance(a, float) and isinstance(b, float):
        return math.isclose(a, b, rel_tol=0, abs_tol=KERNEL_TOLERANCE)
    return type(a) is type(b) and a == b


def same_ranking(a: dict[str, Any], b: dict[str, Any]) -> bool:
    """Two rankings of the same items whose every item's score, and the score at every rank,
    agree within KERNEL_TOLERANCE: any reordering is then among near-ties (a dense view's
    cosine similarities differ between CPUs in the 6th decimal, which can swap neighbours)."""
    ranked_a, ranked_b, scores_a, scores_b = a["ranked"], b["ranked"], a["scores"], b["scores"]
    if not (len(ranked_a) == len(scores_a) == len(ranked_b) == len(scores_b)) or set(ranked_a) != set(ranked_b):
        return False
    close = lambda x, y: math.isclose(x, y, rel_tol=0, abs_tol=KERNEL_TOLERANCE)  # noqa: E731
    score_b = dict(zip(ranked_b, scores_b))
    return (all(close(s, score_b[p]) for p, s in zip(ranked_a, scores_a))
            and all(close(x, y) for x, y in zip(scores_a, scores_b)))


def compare(label: str, stored: list, rebuilt: list, equal: Callable[[Any, Any], bool] = same) -> str | None:
    """One line saying how two row lists differ, or None when they are equal."""
    if len(stored) != len(rebuilt):
        return f"{label}: {len(stored)} stored vs {len(rebuilt)} rebuilt"
    bad = [i for i, (a, b) in enumerate(zip(stored, rebuilt)) if not equal(a, b)]
    return f"{label}: {len(bad)} of {len(stored)} differ (first at row {bad[0]})" if bad else None
