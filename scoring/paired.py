"""Paired contrasts between arms answered on the same questions.

Arms share questions, so comparisons are paired per item; the bootstrap resamples
query clusters because items sharing a query are not independent.
"""

from __future__ import annotations

from collections.abc import Sequence
from typing import TypedDict

import numpy as np


class WinTieLoss(TypedDict):
    wins: int
    ties: int
    losses: int
    n: int


class BootstrapResult(TypedDict):
    mean: float
    low: float
    high: float
    n_boot: int
    seed: int
    confidence: float


def _as_1d(x: np.ndarray | Sequence[float], name: str) -> np.ndarray:
    arr = np.asarray(x, dtype=float)
    if arr.ndim != 1:
        raise ValueError(f"{name} must be 1-D, got shape {arr.shape}")
    return arr


def win_tie_loss(a: np.ndarray, b: np.ndarray) -> WinTieLoss:
    """Count items where arm ``a`` scores above, equal to, or below arm ``b``.

    Inputs are per-item 0/1 scores in the same question order.
    """
    a, b = _as_1d(a, "a"), _as_1d(b, "b")
    if a.shape != b.shape:
        raise ValueError(f"paired arrays differ in length: a has {a.size} items, b has {b.size}")
    if not (np.isin(a, (0.0, 1.0)).all() and np.isin(b, (0.0, 1.0)).all()):
        raise ValueError("per-item scores must be 0 or 1")
    return {
        "wins": int((a > b).sum()),
        "ties": int((a == b).sum()),
        "losses": int((a < b).sum()),
        "n": int(a.size),
    }


def cluster_bootstrap(
    diff: np.ndarray,
    clusters: Sequence[str],
    n_boot: int = 10_000,
    seed: int = 0,
    confidence: float = 0.95,
) -> BootstrapResult:
    """Query-cluster percentile bootstrap of the mean paired difference.

    Each replicate draws ``n_clusters`` clusters with replacement (one
    ``(n_boot, n_clusters)`` draw from ``np.random.default_rng(seed)``; clusters are
    indexed in sorted label order) and takes the item mean over the drawn clusters,
    i.e. sum of cluster sums / sum of cluster sizes, so large clusters weigh by size.
    ``mean`` is the plain item mean of ``diff``; ``low``/``high`` are percentiles
    (numpy's default linear interpolation) of the replicates, in ``diff``'s units.
    """
    diff = _as_1d(diff, "diff")
    if len(clusters) != diff.size:
        raise ValueError(f"clusters has {len(clusters)} labels for {diff.size} items")
    if diff.size == 0:
        raise ValueError("diff is empty")
    if n_boot < 1:
        raise ValueError(f"n_boot must be >= 1, got {n_boot}")
    if not 0.0 < confidence < 1.0:
        raise ValueError(f"confidence must be in (0, 1), got {confidence}")

    _, inverse = np.unique(np.asarray(clusters), return_inverse=True)
    sums = np.bincount(inverse, weights=diff)
    sizes = np.bincount(inverse).astype(float)
    rng = np.random.default_rng(seed)
    idx = rng.integers(0, sums.size, size=(n_boot, sums.size))
    stats = sums[idx].sum(axis=1) / sizes[idx].sum(axis=1)
    alpha = (1.0 - confidence) / 2.0
    low, high = np.percentile(stats, [100.0 * alpha, 100.0 * (1.0 - alpha)])
    return {
        "mean": float(diff.mean()),
        "low": float(low),
        "high": float(high),
        "n_boot": n_boot,
        "seed": seed,
        "confidence": confidence,
    }


def interaction_contrast(
    *, cmc: float, latest_state: float, stale_closure: float, raw_history: float
) -> float:
    """Descriptive 2x2 interaction contrast of the paper's appendix B.1.

    ``(cmc - latest_state) - (stale_closure - raw_history)``, equivalently
    ``(cmc - stale_closure) - (latest_state - raw_history)``: how much more current
    versions help inside the compiled closure than outside it. Pass accuracies in
    one unit (points or proportions). The paper's 5.00 and 46.33 come from unrounded
    accuracies (counts out of 300); its rounded inputs give 5.01 for single-hop.
    """
    return (cmc - latest_state) - (stale_closure - raw_history)
