"""Paired W/T/L, the vectorized cluster bootstrap against a loop, and the B.1 contrast."""

from __future__ import annotations

import numpy as np
import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from scoring.paired import cluster_bootstrap, interaction_contrast, win_tie_loss


def cluster_bootstrap_reference(
    diff: np.ndarray, clusters: list[str], n_boot: int, seed: int, confidence: float = 0.95
) -> dict:
    """Slow loop: one replicate at a time, drawing one row of cluster indices per replicate.

    A Generator yields the same integers row by row as in one (n_boot, k) draw, so this
    consumes the stream exactly as the vectorized version does.
    """
    labels = sorted(set(clusters))
    members = {c: [float(d) for d, cl in zip(diff, clusters) if cl == c] for c in labels}
    rng = np.random.default_rng(seed)
    stats = []
    for _ in range(n_boot):
        picked = [labels[i] for i in rng.integers(0, len(labels), size=len(labels))]
        items = [d for c in picked for d in members[c]]
        stats.append(sum(items) / len(items))
    alpha = (1 - confidence) / 2
    low, high = np.percentile(stats, [100 * alpha, 100 * (1 - alpha)])
    return {"mean": sum(diff) / len(diff), "low": low, "high": high}


def test_win_tie_loss_counts() -> None:
    a = np.array([1, 1, 0, 0, 1])
    b = np.array([0, 1, 0, 1, 1])
    assert win_tie_loss(a, b) == {"wins": 1, "ties": 3, "losses": 1, "n": 5}


@given(st.lists(st.tuples(st.integers(0, 1), st.integers(0, 1)), max_size=50))
def test_win_tie_loss_sums_to_n(pairs: list[tuple[int, int]]) -> None:
    a = np.array([p[0] for p in pairs])
    b = np.array([p[1] for p in pairs])
    got = win_tie_loss(a, b)
    assert got["wins"] + got["ties"] + got["losses"] == got["n"] == len(pairs)
    assert got["wins"] - got["losses"] == int(a.sum() - b.sum())


def test_win_tie_loss_rejects_mismatch() -> None:
    with pytest.raises(ValueError, match="a has 3 items, b has 2"):
        win_tie_loss(np.array([1, 0, 1]), np.array([1, 0]))
    with pytest.raises(ValueError, match="0 or 1"):
        win_tie_loss(np.array([2, 0]), np.array([1, 0]))


@settings(deadline=None, max_examples=25)
@given(
    st.lists(
        st.tuples(st.sampled_from([-1, 0, 1]), st.sampled_from("abcdefg")), min_size=1, max_size=40
    ),
    st.integers(0, 2**32 - 1),
)
def test_vectorized_bootstrap_equals_loop(items: list[tuple[int, str]], seed: int) -> None:
    diff = np.array([d for d, _ in items], dtype=float)
    clusters = [c for _, c in items]
    got = cluster_bootstrap(diff, clusters, n_boot=200, seed=seed)
    ref = cluster_bootstrap_reference(diff, clusters, n_boot=200, seed=seed)
    assert got["mean"] == pytest.approx(ref["mean"])
    assert np.allclose([got["low"], got["high"]], [ref["low"], ref["high"]], rtol=0, atol=1e-12)
    assert (got["n_boot"], got["seed"]) == (200, seed)


def test_bootstrap_default_replicates_match_loop() -> None:
    rng = np.random.default_rng(7)
    diff = rng.integers(-1, 2, size=120).astype(float)
    clusters = [f"q{i // 3}" for i in range(120)]
    got = cluster_bootstrap(diff, clusters, seed=11)
    ref = cluster_bootstrap_reference(diff, clusters, n_boot=10_000, seed=11)
    assert got["n_boot"] == 10_000
    assert np.allclose([got["low"], got["high"]], [ref["low"], ref["high"]], rtol=0, atol=1e-12)
    assert got["low"] <= got["mean"] <= got["high"]


def test_bootstrap_all_zero_diff() -> None:
    got = cluster_bootstrap(np.zeros(30), [str(i % 4) for i in range(30)])
    assert (got["mean"], got["low"], got["high"]) == (0.0, 0.0, 0.0)


def test_bootstrap_is_seeded() -> None:
    diff = np.array([1, 0, 1, -1, 1, 1, 0, 0], dtype=float)
    clusters = list("aabbccdd")
    assert cluster_bootstrap(diff, clusters, seed=3) == cluster_bootstrap(diff, clusters, seed=3)
    assert cluster_bootstrap(diff, clusters, seed=3) != cluster_bootstrap(diff, clusters, seed=4)


def test_bootstrap_rejects_bad_input() -> None:
    with pytest.raises(ValueError, match="2 labels for 3 items"):
        cluster_bootstrap(np.zeros(3), ["a", "b"])
    with pytest.raises(ValueError):
        cluster_bootstrap(np.zeros(0), [])
    with pytest.raises(ValueError):
        cluster_bootstrap(np.zeros(2), ["a", "b"], n_boot=0)


@pytest.mark.parametrize(
    ("counts", "expected"),
    [
        # Appendix B.1, non-overflow 6K-64K, 300 questions per hop type:
        # single-hop 97.67, 98.00, 33.33, 38.67 -> 5.00
        ((293, 294, 100, 116), 5.00),
        # multi-hop 85.67, 27.00, 15.67, 3.33 -> 46.33
        ((257, 81, 47, 10), 46.33),
    ],
)
def test_interaction_contrast_reproduces_paper(
    counts: tuple[int, int, int, int], expected: float
) -> None:
    cmc, latest, stale, raw = (100 * c / 300 for c in counts)
    got = interaction_contrast(cmc=cmc, latest_state=latest, stale_closure=stale, raw_history=raw)
    assert round(got, 2) == expected


def test_interaction_contrast_from_rounded_points() -> None:
    # The paper's rounded inputs reproduce multi-hop exactly and single-hop to 0.01.
    mh = interaction_contrast(cmc=85.67, latest_state=27.00, stale_closure=15.67, raw_history=3.33)
    sh = interaction_contrast(cmc=97.67, latest_state=98.00, stale_closure=33.33, raw_history=38.67)
    assert mh == pytest.approx(46.33)
    assert sh == pytest.approx(5.01)
