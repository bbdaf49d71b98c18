"""Table 6: the non-overflow interaction is computed on every length but the longest, and
the truncated prompts left in that population are counted, not hidden."""
from __future__ import annotations

import pandas as pd

from analysis.interaction import FOUR_ARMS, non_overflow_table

LENGTHS = ("6k", "32k", "64k", "262k")
# The paper's non-overflow counts out of 300 per hop (appendix B.1): cmc, latest state,
# stale closure, raw history.
PAPER = {"sh": (293, 294, 100, 116), "mh": (257, 81, 47, 10)}


def _items(truncated_raw_at: frozenset[str] = frozenset()) -> pd.DataFrame:
    """100 questions per length and hop; the paper's correct counts spread over the three
    short lengths, and the longest length all wrong (so including it would change every cell)."""
    rows = []
    for hop, counts in PAPER.items():
        for arm, correct in zip(FOUR_ARMS, counts):
            for index in range(400):
                length = LENGTHS[index // 100]
                right = length != "262k" and index < correct
                rows.append({"arm": arm, "hop": hop, "length": length, "question_id": f"{hop}-{index}",
                             "substring_em": right,
                             "truncated": arm == "raw_history" and length in truncated_raw_at})
    return pd.DataFrame(rows)


def test_the_papers_counts_give_the_papers_table6():
    table = non_overflow_table(_items())
    assert set(table["population"]) == {"paper"}  # nothing truncated: one population
    rows = table.set_index("hop")
    assert (rows["lengths"] == "6k+32k+64k").all()
    assert rows.loc["sh", "interaction"] == 5.0 and rows.loc["mh", "interaction"] == 46.33
    assert rows.loc["mh", "cmc"] == 85.67 and rows.loc["mh", "raw_history"] == 3.33
    assert rows.loc["sh", "questions"] == 300 and rows.loc["sh", "truncated_prompts"] == 0


def test_truncated_prompts_are_counted_and_the_untruncated_lengths_reported_apart():
    """A 32K-token reader truncates the 64K raw histories the paper's reader did not: the
    paper's population counts them, and a second population keeps only the clean lengths."""
    table = non_overflow_table(_items(frozenset({"64k", "262k"})))
    paper = table[table["population"] == "paper"].set_index("hop")
    assert paper.loc["mh", "truncated_raw_history"] == 100 and paper.loc["mh", "truncated_prompts"] == 100
    clean = table[table["population"] == "untruncated"].set_index("hop")
    assert (clean["lengths"] == "6k+32k").all() and (clean["truncated_prompts"] == 0).all()
    assert clean.loc["mh", "questions"] == 200
    # Its cells are its own: 6K and 32K hold 200 of the paper's 257 MH CMC successes (all of them, 200 of 200).
    assert clean.loc["mh", "cmc"] == 100.0 and clean.loc["mh", "raw_history"] == 5.0


def test_a_slice_without_all_four_arms_has_no_table():
    items = _items()
    assert non_overflow_table(items[items["arm"] != "latest_state_full"]) is None
