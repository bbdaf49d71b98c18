"""Wilson interval against the closed form written out independently."""

from __future__ import annotations

import math

import pytest

from scoring.intervals import wilson_interval

Z95 = 1.959963984540054


def _closed_form(k: int, n: int, z: float) -> tuple[float, float]:
    """(2k + z^2 -/+ z sqrt(z^2 + 4k(n-k)/n)) / (2(n + z^2))."""
    root = z * math.sqrt(z * z + 4.0 * k * (n - k) / n)
    return (2 * k + z * z - root) / (2 * (n + z * z)), (2 * k + z * z + root) / (2 * (n + z * z))


@pytest.mark.parametrize(
    ("k", "n"),
    [(0, 1), (1, 1), (0, 10), (3, 10), (10, 10), (293, 300), (667, 800), (50, 100)],
)
def test_matches_closed_form(k: int, n: int) -> None:
    low, high = wilson_interval(k, n)
    ref_low, ref_high = _closed_form(k, n, Z95)
    assert low == pytest.approx(ref_low, abs=1e-12)
    assert high == pytest.approx(ref_high, abs=1e-12)
    assert 0.0 <= low <= k / n <= high <= 1.0


def test_other_confidence() -> None:
    low, high = wilson_interval(30, 100, confidence=0.9)
    ref = _closed_form(30, 100, 1.6448536269514722)
    assert (low, high) == pytest.approx(ref, abs=1e-12)
    assert high - low < wilson_interval(30, 100)[1] - wilson_interval(30, 100)[0]


def test_extremes_are_exact() -> None:
    assert wilson_interval(0, 50)[0] == 0.0
    assert wilson_interval(50, 50)[1] == 1.0


def test_empty_sample() -> None:
    assert wilson_interval(0, 0) == (0.0, 1.0)


@pytest.mark.parametrize(
    ("k", "n", "conf"),
    [(-1, 5, 0.95), (6, 5, 0.95), (0, -1, 0.95), (1, 5, 1.0), (1, 5, 0.0)],
)
def test_rejects_bad_input(k: int, n: int, conf: float) -> None:
    with pytest.raises(ValueError):
        wilson_interval(k, n, conf)
