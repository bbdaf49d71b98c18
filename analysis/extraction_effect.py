"""Where a frontend's extraction changes what a view shows, and what that costs the reader.

Gold presence alone (`selection_vs_reader`) cannot see an extraction that keeps the gold record
but adds others around it: the packet still holds the gold string while the reader now faces
more text, stale values among it. Holding the view fixed and comparing each question's packet
with the same view's packet on the grammar frontend's extraction splits the questions into:

- `same packet`: the very records the grammar's extraction showed (under the same reader, the
  same request, so the same answer);
- `same walk`: the traversal took the same edges (by source position), but other records are
  shown: on an LLM frontend, the statements it left unresolved, which the rendering contract
  shows as text in every packet of their history;
- `walk differs`: the extraction changed the graph the view walked;
- `packet differs`: a view without a traced walk (retrieval, suffixes) showing other records.

Each stratum counts answers here and, when the reference was read by the same reader on the same
engine, on the grammar's extraction: only then is a difference the extraction's alone.
"""
from __future__ import annotations

from typing import Any, Mapping, Sequence

import pandas as pd

STRATA = ("same packet", "same walk", "walk differs", "packet differs")
COUNTS = ("gold_here", "gold_on_grammar", "correct", "correct_on_grammar")
HOP_ORDER = {"sh": 0, "mh": 1}


def walk_positions(packet: Mapping[str, Any]) -> tuple[int, ...] | None:
    """The source positions of the edges a traversal view walked (its trace's `edges`; the prior
    read's `prior_edges`), sorted; None for a view that records no walk."""
    trace = packet.get("trace") or {}
    edges = trace.get("edges", trace.get("prior_edges"))
    return None if edges is None else tuple(sorted({int(edge[3]) for edge in edges}))


def stratum(here: Mapping[str, Any], grammar: Mapping[str, Any]) -> str:
    """Which of STRATA one question's packet falls in against the grammar's packet."""
    if here["positions"] == grammar["positions"]:
        return "same packet"
    if here["walk"] is None or grammar["walk"] is None:
        return "packet differs"
    return "same walk" if here["walk"] == grammar["walk"] else "walk differs"


def extraction_effect(items: pd.DataFrame, reference: pd.DataFrame, views: Sequence[str]) -> pd.DataFrame:
    """Per view, hop and stratum: questions, records added and dropped against the grammar's
    packet (means), gold presence and right answers here and on the grammar's extraction.

    Both frames are item tables (`bundle_items` with histories): one row per view and question,
    with `positions`, `walk`, `gold_present`, `substring_em`, `reader` and `engine`. A view the
    reference lacks is left out; `correct_on_grammar` is blank unless the reference view was read
    by the same reader on the same engine (a gold string does not depend on the reader, an answer
    does)."""
    ref = {(row["arm"], row["question_id"]): row for row in reference.to_dict("records")}
    rows = []
    for (arm, hop), group in items.groupby(["arm", "hop"], sort=False):
        pairs = [(row, ref.get((arm, row["question_id"]))) for row in group.to_dict("records")]
        if any(grammar is None for _, grammar in pairs):
            continue
        same_reader = all((g["reader"], g["engine"]) == (h["reader"], h["engine"]) for h, g in pairs)
        by_stratum: dict[str, list] = {}
        for here, grammar in pairs:
            by_stratum.setdefault(stratum(here, grammar), []).append((here, grammar))
        rows += [stratum_row(arm, hop, name, by_stratum[name], same_reader) for name in STRATA if name in by_stratum]
    order = {view: i for i, view in enumerate(views)}
    rows.sort(key=lambda row: (order.get(row["arm"], len(views)), HOP_ORDER.get(row["hop"], len(HOP_ORDER))))
    frame = pd.DataFrame(rows, columns=["arm", "hop", "stratum", "n", "records_added", "records_dropped", *COUNTS])
    return frame.astype({column: "Int64" for column in COUNTS})


def stratum_row(arm: str, hop: str, name: str, pairs: list, same_reader: bool) -> dict[str, Any]:
    """One row of `extraction_effect`."""
    added = [len(set(h["positions"]) - set(g["positions"])) for h, g in pairs]
    dropped = [len(set(g["positions"]) - set(h["positions"])) for h, g in pairs]
    return {
        "arm": arm, "hop": hop, "stratum": name, "n": len(pairs),
        "records_added": round(sum(added) / len(pairs), 1), "records_dropped": round(sum(dropped) / len(pairs), 1),
        "gold_here": sum(bool(h["gold_present"]) for h, _ in pairs),
        "gold_on_grammar": sum(bool(g["gold_present"]) for _, g in pairs),
        "correct": int(sum(h["substring_em"] for h, _ in pairs)),
        "correct_on_grammar": int(sum(g["substring_em"] for _, g in pairs)) if same_reader else None,
    }
