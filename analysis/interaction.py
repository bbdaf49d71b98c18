"""Appendix B.1 / Table 6: the four diagnostic contexts on the non-overflow population.

The paper drops the longest histories because their raw-history prompts exceed its reader's
input cap; the point is an interaction contrast free of window truncation. A smaller reader
has a smaller cap, so the paper's population (every length but the longest) can still hold
truncated prompts: the table counts them per hop, so a reader of the table sees whether the
"non-overflow" rows are truncation-free for this reader and not only for the paper's.
"""
from __future__ import annotations

import pandas as pd

from analysis.tables import accuracy, length_order
from scoring.paired import interaction_contrast

FOUR_ARMS = ("cmc", "latest_state_full", "stale_closure", "raw_history")


def non_overflow_table(items: pd.DataFrame) -> pd.DataFrame | None:
    """Per population and hop: the four arms' accuracy, the interaction contrast, and how
    many prompts were truncated (any arm; raw history alone). Population 'paper' is every
    length but the longest; 'untruncated' (only where it differs) those of its lengths at
    which no prompt of the four arms was truncated for this reader. None when a slice lacks one of
    the four arms (a partial run)."""
    if not set(FOUR_ARMS) <= set(items["arm"]):
        return None
    four = items[items["arm"].isin(FOUR_ARMS)]
    lengths = length_order(four["length"])
    populations = {"paper": lengths[:-1]}
    untruncated = [n for n in populations["paper"] if not four.loc[four["length"] == n, "truncated"].any()]
    if untruncated and untruncated != populations["paper"]:
        populations["untruncated"] = untruncated
    return pd.DataFrame([row for name, kept in populations.items()
                         for row in _population_rows(four[four["length"].isin(kept)], name, kept)])


def _population_rows(population: pd.DataFrame, name: str, lengths: list[str]) -> list[dict]:
    acc = accuracy(population, ["arm", "hop"]).set_index(["arm", "hop"])["accuracy"]
    rows = []
    for hop in ("sh", "mh"):
        cells = {arm: acc.loc[(arm, hop)] for arm in FOUR_ARMS}
        part = population[population["hop"] == hop]
        rows.append({"population": name, "lengths": "+".join(lengths), "hop": hop,
                     **{arm: round(value, 2) for arm, value in cells.items()},
                     "interaction": round(interaction_contrast(
                         cmc=cells["cmc"], latest_state=cells["latest_state_full"],
                         stale_closure=cells["stale_closure"], raw_history=cells["raw_history"]), 2),
                     "questions": part["question_id"].nunique(),
                     "truncated_prompts": int(part["truncated"].sum()),
                     "truncated_raw_history": int(part.loc[part["arm"] == "raw_history", "truncated"].sum())})
    return rows
