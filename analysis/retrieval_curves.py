"""Retrieval diagnostics for the ranked arms (fact BM25, dense): how far down a ranking the
gold string and CMC's selected records sit, so "gold present" becomes a curve over k.

A ranking is the list of record positions a ranked arm's trace keeps (`trace.ranked`, best
first, before source-order rendering). Gold at k: some record among the top k holds a gold
string (the released scorer's containment test, per record). CMC record recall at k: the
share of CMC's selected records (its traversed edges' records) among the top k.
"""
from __future__ import annotations

from typing import Iterable, Mapping, Sequence

import pandas as pd

from analysis.diagnostics import gold_in_text
from cmc.records import History, Question
from common.errors import DataError

KS = (1, 3, 5, 10, 20, 50, 100)


def ranking(packet: Mapping, where: str = "evidence packet") -> list[int] | None:
    """A packet's ranking (`trace.ranked`), None for an arm that does not rank."""
    ranked = packet.get("trace", {}).get("ranked")
    if ranked is None:
        return None
    if not isinstance(ranked, list) or not all(isinstance(p, int) and not isinstance(p, bool) for p in ranked):
        raise DataError(f"{where}: trace.ranked is not a list of record positions")
    return ranked


def selected_records(packet: Mapping) -> list[int]:
    """The records behind a graph read's traversed edges (trace.edges), in trace order."""
    return list(dict.fromkeys(edge[3] for edge in packet.get("trace", {}).get("edges", [])))


def first_gold_rank(history: History, ranked: Sequence[int], golds: Iterable[str]) -> int | None:
    """1-based rank of the first record that holds a gold string, None if none does."""
    golds = list(golds)
    for rank, pos in enumerate(ranked, start=1):
        if gold_in_text(history.record(pos).line(), golds):
            return rank
    return None


def record_recall(ranked: Sequence[int], selected: Iterable[int], k: int) -> float | None:
    """Share of `selected` among the top k of `ranked`; None when nothing is selected."""
    wanted = set(selected)
    if not wanted:
        return None
    return len(wanted & set(ranked[:k])) / len(wanted)


def question_rows(arm: str, packets: Iterable[Mapping], questions: Mapping[str, Question],
                  histories: Mapping[str, History], labels: Mapping[str, Sequence[str]],
                  reference: Mapping[str, Mapping] | None = None, ks: Sequence[int] = KS) -> pd.DataFrame:
    """One row per (question, k) of a ranked arm: gold within the top k, and the recall
    of the reference (CMC) packet's selected records when a reference is given."""
    rows = []
    for packet in packets:
        qid = packet["question_id"]
        ranked = ranking(packet, f"{arm} packet {qid}")
        if ranked is None:
            raise DataError(f"{arm} packet {qid}: no trace.ranked; {arm} is not a ranked arm")
        question = questions[qid]
        gold_rank = first_gold_rank(histories[question.history_id], ranked, labels[qid])
        selected = selected_records(reference[qid]) if reference is not None else []
        for k in ks:
            rows.append({"arm": arm, "question_id": qid, "hop": question.hop, "length": question.length, "k": k,
                         "records": min(k, len(ranked)), "gold_at_k": gold_rank is not None and gold_rank <= k,
                         "cmc_recall_at_k": record_recall(ranked, selected, k)})
    return pd.DataFrame(rows)


def curve(rows: pd.DataFrame, by: Sequence[str] = ("arm", "hop")) -> pd.DataFrame:
    """Per group and k: questions, mean records, gold-at-k share (%), and mean / complete
    CMC record recall (%, over questions where CMC selected records)."""
    out = []
    for key, group in rows.groupby([*by, "k"], sort=False):
        recall = group["cmc_recall_at_k"].dropna()
        out.append({**dict(zip([*by, "k"], key)), "n": len(group),
                    "mean_records": round(float(group["records"].mean()), 1),
                    "gold_at_k": round(100 * group["gold_at_k"].mean(), 2),
                    "cmc_records_recall": round(100 * recall.mean(), 2) if len(recall) else None,
                    "all_cmc_records": round(100 * (recall == 1.0).mean(), 2) if len(recall) else None})
    return pd.DataFrame(out)


def selection_rows(arm: str, packets: Iterable[Mapping], questions: Mapping[str, Question],
                   histories: Mapping[str, History], labels: Mapping[str, Sequence[str]]) -> pd.DataFrame:
    """A graph read's point on the same axes (k = "selected"): gold among the records
    behind its traversed edges, and how many records that is."""
    rows = []
    for packet in packets:
        question = questions[packet["question_id"]]
        history, golds = histories[question.history_id], labels[question.qid]
        selected = selected_records(packet)
        rows.append({"arm": arm, "question_id": question.qid, "hop": question.hop, "length": question.length,
                     "k": "selected", "records": len(selected), "gold_at_k": first_gold_rank(history, selected, golds) is not None,
                     "cmc_recall_at_k": None})
    return pd.DataFrame(rows)
