"""Appendix B.1 / Table 6: the four diagnostic contexts on the non-overflow population.

The paper drops the longest histories because their raw-history prompts exceed its reader's
input cap; the point is an interaction contrast free of window truncation. A smaller reader
has a smaller cap, so the paper's population (every length but the longest) can still hold
truncated prompts: the table counts them per hop, so a reader of the table sees whether the
"non-overflow" rows are truncation-free for this reader and not only for the paper's.
"""
from __future__ import annotations

import pandas as pd

from scoring.paired import interaction_contrast
from scoring.tables import accuracy, length_order

FOUR_ARMS = ("cmc", "latest_state_full", "stale_closure", "raw_history")


def non_overflow_table(items: pd.DataFrame) -> tuple[pd.DataFrame, list[str]] | None:
    """Per hop: the four arms' accuracy on every length but the longest, the interaction
    contrast, and how many of those prompts were truncated (any arm; raw history alone).
    None when a slice lacks one of the four arms (a partial run)."""
    if not set(FOUR_ARMS) <= set(items["arm"]):
        return None
    lengths = length_order(items["length"])[:-1]
    population = items[items["length"].isin(lengths) & items["arm"].isin(FOUR_ARMS)]
    acc = accuracy(population, ["arm", "hop"]).set_index(["arm", "hop"])["accuracy"]
    rows = []
    for hop in ("sh", "mh"):
        cells = {arm: acc.loc[(arm, hop)] for arm in FOUR_ARMS}
        part = population[population["hop"] == hop]
        rows.append({"hop": hop, **{arm: round(value, 2) for arm, value in cells.items()},
                     "interaction": round(interaction_contrast(
                         cmc=cells["cmc"], latest_state=cells["latest_state_full"],
                         stale_closure=cells["stale_closure"], raw_history=cells["raw_history"]), 2),
                     "questions": part["question_id"].nunique(),
                     "truncated_prompts": int(part["truncated"].sum()),
                     "truncated_raw_history": int(part.loc[part["arm"] == "raw_history", "truncated"].sum())})
    return pd.DataFrame(rows), lengths
