"""The one ranking rule every ranked view (fact BM25, dense, the released banks) shares."""
from __future__ import annotations

import numpy as np


def rank(scores: np.ndarray, positions: np.ndarray, top_k: int) -> list[int]:
    """Indices of the top_k items: score descending (rounded to 1e-9 so float summation
    order cannot reorder ties), then newer source position first."""
    order = np.lexsort((-positions, -np.round(scores, 9)))
    return order[:top_k].tolist()
