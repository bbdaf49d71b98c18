"""Pairwise evidence coverage (paper section 4.1): for arms A and B, on how many items does
B's evidence lack at least one record A selected, and on how many does it lack the scored
answer string?

"Records A selected" are the source positions in A's evidence packet (what A rendered for
the reader: selected facts plus any unresolved records, after the budget). "Lacks the
answer string" is the released scorer's containment test applied to B's rebuilt evidence
text (analysis.diagnostics.gold_in_evidence). The item subset is usually read from an
experiment item table, e.g. items A answers correctly and B does not (``a_right_b_wrong``);
the paper reports 218 and 109 of the 233 multi-hop items where CMC beats fact BM25.
"""
from __future__ import annotations

from typing import Any, Iterable, Mapping, Sequence

import pandas as pd

from analysis.diagnostics import gold_in_evidence
from cmc.evidence import Evidence
from cmc.records import History, Question

Packet = Mapping[str, Any]


def by_question(packets: Iterable[Packet | Evidence]) -> dict[str, Packet]:
    """Packets (dicts, or Evidence objects) keyed by question id."""
    out: dict[str, Packet] = {}
    for packet in packets:
        packet = packet.packet() if isinstance(packet, Evidence) else packet
        out[packet["question_id"]] = packet
    return out


def a_right_b_wrong(items: pd.DataFrame, a: str, b: str, metric: str = "substring_em",
                    hop: str | None = None) -> list[str]:
    """Question ids A answers correctly and B does not (items: analysis.tables.experiment_items)."""
    part = items if hop is None else items[items["hop"] == hop]
    left = part[part["arm"] == a].set_index("question_id")[metric]
    right = part[part["arm"] == b].set_index("question_id")[metric]
    shared = left.index.intersection(right.index)
    return [q for q in shared if left[q] > 0 and right[q] == 0]


def pair_coverage(a_packets: Iterable[Packet | Evidence], b_packets: Iterable[Packet | Evidence],
                  questions: Mapping[str, Question], histories: Mapping[str, History],
                  labels: Mapping[str, Sequence[str]] | None = None,
                  subset: Iterable[str] | None = None) -> pd.DataFrame:
    """One row per question (in A's order, restricted to ``subset`` when given): A's and B's
    record counts, how many of A's records B lacks, and -- with labels -- whether each
    arm's evidence contains a gold string."""
    a, b = by_question(a_packets), by_question(b_packets)
    wanted = None if subset is None else set(subset)
    rows = []
    for qid, pa in a.items():
        if wanted is not None and qid not in wanted:
            continue
        if qid not in b:
            raise KeyError(f"arm B has no evidence packet for {qid}")
        pb, question = b[qid], questions[qid]
        missing = set(pa["positions"]) - set(pb["positions"])
        row = {"question_id": qid, "hop": question.hop, "length": question.length,
               "a_records": len(pa["positions"]), "b_records": len(pb["positions"]),
               "missing_records": len(missing), "lacks_record": bool(missing)}
        if labels is not None:
            history = histories[question.history_id]
            row["a_gold"] = gold_in_evidence(history, pa, labels[qid])
            row["b_gold"] = gold_in_evidence(history, pb, labels[qid])
            row["lacks_gold"] = not row["b_gold"]
        rows.append(row)
    if wanted is not None and len(rows) != len(wanted):
        raise KeyError(f"arm A has no evidence packet for {len(wanted) - len(rows)} subset question(s)")
    columns = ["question_id", "hop", "length", "a_records", "b_records", "missing_records", "lacks_record",
               *(["a_gold", "b_gold", "lacks_gold"] if labels is not None else [])]
    return pd.DataFrame(rows, columns=columns)  # the columns even when no item qualifies


def summarize(rows: pd.DataFrame) -> dict[str, int]:
    """Counts over pair_coverage rows: items, items where B lacks an A record, and (with
    labels) items where B lacks the gold string / where A has it."""
    out = {"n": len(rows), "lacks_record": int(rows["lacks_record"].sum()) if len(rows) else 0}
    if "lacks_gold" in rows:
        out["lacks_gold"] = int(rows["lacks_gold"].sum())
        out["a_has_gold"] = int(rows["a_gold"].sum())
    return out


def coverage_table(packets: Mapping[str, Iterable[Packet | Evidence]], pairs: Sequence[Sequence[str]],
                   questions: Mapping[str, Question], histories: Mapping[str, History],
                   labels: Mapping[str, Sequence[str]] | None = None, items: pd.DataFrame | None = None,
                   hop: str | None = "mh") -> pd.DataFrame:
    """Per (A, B) pair and hop class: the coverage counts. With ``items`` the population is
    the items A gets right and B wrong; without, every question of the hop class."""
    packets = {arm: by_question(p) for arm, p in packets.items()}
    rows = []
    for a, b in pairs:
        if items is not None:
            subset = a_right_b_wrong(items, a, b, hop=hop)
        else:
            subset = [q for q in packets[a] if hop is None or questions[q].hop == hop]
        cov = pair_coverage(packets[a].values(), packets[b].values(), questions, histories, labels, subset)
        rows.append({"a": a, "b": b, "hop": hop or "all",
                     "population": "a right, b wrong" if items is not None else "all", **summarize(cov)})
    return pd.DataFrame(rows)
