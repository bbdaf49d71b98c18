"""Evidence recall: the share of a question's ground-truth evidence serials that an arm's
packet put in front of the reader.

A generated dataset (sources/synthetic.py) knows, per question, the records a perfect
reader needs: the current record of every hop of its chain. Recall against that set says
whether an arm *could* have been right, apart from what the reader then did with it; the
evidence sets are labels, so they come through LabelVault.open like the gold answers.
"""
from __future__ import annotations

import re
from typing import Any, Iterable, Mapping, Sequence

import pandas as pd

from scoring.intervals import wilson_interval

CELL = re.compile(r"d(\d+)u(\d{3})\Z")


def cell_parts(length: str) -> tuple[int, float]:
    """'d3u050' -> (3, 0.5): hop depth and update rate of a synthetic cell."""
    match = CELL.match(length)
    if match is None:
        raise ValueError(f"{length!r} is not a synthetic cell label like 'd3u050'")
    return int(match.group(1)), int(match.group(2)) / 100


def evidence_recall(packets: Iterable[Mapping[str, Any]], truth: Mapping[str, Sequence[int]]) -> pd.DataFrame:
    """Per packet: how many ground-truth serials it holds, of how many, and the share."""
    rows = []
    for packet in packets:
        wanted = set(truth[packet["question_id"]])
        held = len(wanted & set(packet["positions"]))
        rows.append({"arm": packet["arm"], "question_id": packet["question_id"], "evidence_needed": len(wanted),
                     "evidence_held": held, "recall": held / len(wanted), "complete": held == len(wanted)})
    return pd.DataFrame(rows, columns=["arm", "question_id", "evidence_needed", "evidence_held", "recall", "complete"])


def sweep_table(items: pd.DataFrame) -> pd.DataFrame:
    """Per arm x depth x update rate: questions, mean evidence recall, complete sets, and
    reader accuracy (substring EM, %, Wilson 95%). `items` holds the scored items with
    `recall`, `complete`, `depth` and `update_rate` columns."""
    rows = []
    for (arm, depth, rate), group in items.groupby(["arm", "depth", "update_rate"], sort=False):
        correct, n = int(group["substring_em"].sum()), len(group)
        low, high = wilson_interval(correct, n)
        rows.append({"arm": arm, "depth": depth, "update_rate": rate, "n": n,
                     "recall": round(100 * group["recall"].mean(), 2), "complete": int(group["complete"].sum()),
                     "accuracy": round(100 * correct / n, 2), "wilson_low": round(100 * low, 2),
                     "wilson_high": round(100 * high, 2)})
    table = pd.DataFrame(rows)
    order = {arm: i for i, arm in enumerate(dict.fromkeys(items["arm"]))}
    return table.sort_values(["arm", "depth", "update_rate"], key=lambda s: s.map(order) if s.name == "arm" else s,
                             ignore_index=True)


def pooled(items: pd.DataFrame, by: Sequence[str]) -> pd.DataFrame:
    """Mean recall (%), complete sets and accuracy (%) per group, e.g. by arm and redirect."""
    grouped = items.groupby(list(by), sort=False)
    return grouped.agg(n=("question_id", "size"), recall=("recall", "mean"), complete=("complete", "sum"),
                       accuracy=("substring_em", "mean")).assign(
        recall=lambda t: (100 * t["recall"]).round(2), accuracy=lambda t: (100 * t["accuracy"]).round(2)).reset_index()
