"""Wilson score intervals for accuracies.

Wilson rather than the normal approximation because cells sit near 0% and 100%
(e.g. 98.00 single-hop), where the Wald interval collapses or leaves [0, 1].
"""

from __future__ import annotations

import math

from scipy.stats import norm


def wilson_interval(successes: int, n: int, confidence: float = 0.95) -> tuple[float, float]:
    """Two-sided Wilson score interval for ``successes`` out of ``n``, as proportions.

    ``n == 0`` returns ``(0.0, 1.0)``: with no observations every proportion is
    consistent with the data, and a table row should show that rather than fail.
    The bounds are exactly 0.0 when ``successes == 0`` and 1.0 when ``successes == n``.
    """
    if n < 0 or not 0 <= successes <= n:
        raise ValueError(f"need 0 <= successes <= n, got successes={successes}, n={n}")
    if not 0.0 < confidence < 1.0:
        raise ValueError(f"confidence must be in (0, 1), got {confidence}")
    if n == 0:
        return 0.0, 1.0
    z = float(norm.ppf(0.5 + confidence / 2.0))
    p = successes / n
    denom = 1.0 + z * z / n
    center = (p + z * z / (2.0 * n)) / denom
    half = z / denom * math.sqrt(p * (1.0 - p) / n + z * z / (4.0 * n * n))
    low = 0.0 if successes == 0 else max(0.0, center - half)
    high = 1.0 if successes == n else min(1.0, center + half)
    return low, high
