"""Geometry of the retrieval curve (share of questions against k, log-scaled k) for the SVG
template: the template draws, this module only places points."""
from __future__ import annotations

import math
from typing import Any, Mapping, Sequence

W, H, LEFT, RIGHT, TOP, BOTTOM = 440, 230, 46, 16, 14, 40
SERIES = (("gold_at_k", "gold string in top k"), ("cmc_records_recall", "recall of {ref}'s records"),
          ("all_cmc_records", "all of {ref}'s records in top k"))


def recall_chart(rows: Sequence[Mapping[str, Any]], reference: str | None) -> dict[str, Any] | None:
    """Lines over numeric k (rows of one group, e.g. hop "all"); None without two points."""
    points = sorted((r for r in rows if isinstance(r["k"], int)), key=lambda r: r["k"])
    if len(points) < 2:
        return None
    low, high = math.log10(points[0]["k"]), math.log10(points[-1]["k"])

    def x(k: int) -> float:
        return round(LEFT + (W - LEFT - RIGHT) * (math.log10(k) - low) / ((high - low) or 1), 1)

    def y(v: float) -> float:
        return round(TOP + (H - TOP - BOTTOM) * (100 - v) / 100, 1)

    lines = []
    for index, (key, name) in enumerate(SERIES):
        values = [(r["k"], r[key]) for r in points if r.get(key) is not None]
        if values:
            lines.append({"key": key, "name": name.format(ref=reference), "index": index,
                          "points": " ".join(f"{x(k)},{y(v)}" for k, v in values),
                          "dots": [{"x": x(k), "y": y(v), "k": k, "v": v} for k, v in values]})
    return {"width": W, "height": H, "lines": lines, "left": LEFT, "right": W - RIGHT, "top": TOP,
            "bottom": H - BOTTOM, "xticks": [{"x": x(r["k"]), "k": r["k"]} for r in points],
            "yticks": [{"y": y(v), "v": v} for v in (0, 25, 50, 75, 100)]}
