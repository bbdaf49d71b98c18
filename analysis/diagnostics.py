"""Evidence diagnostics: size, truncation and whether a gold string is present, per arm and
(hop, length) cell. Takes packets that were written before any label was opened."""
from __future__ import annotations

from typing import Iterable, Mapping

import pandas as pd

from cmc.evidence import rebuild_text
from cmc.records import History, Question
from scoring.metrics import normalize_answer


def gold_in_text(text: str, golds: Iterable[str]) -> bool:
    """The released scorer's containment test applied to the evidence instead of an answer."""
    haystack = normalize_answer(text)
    return any((g := normalize_answer(gold)) and g in haystack for gold in golds)


def gold_in_evidence(history: History, packet: dict, golds: Iterable[str]) -> bool:
    """Whether the text a packet put in front of the reader (rebuilt from the history)
    holds a gold string."""
    return gold_in_text(rebuild_text(history, packet), golds)


def evidence_rows(
    packets: Iterable[dict], questions: Mapping[str, Question], histories: Mapping[str, History],
    labels: Mapping[str, tuple[str, ...]],
) -> pd.DataFrame:
    rows = []
    for packet in packets:
        question = questions[packet["question_id"]]
        rows.append({
            "arm": packet["arm"], "question_id": question.qid, "hop": question.hop, "length": question.length,
            "chars": packet["chars"], "truncated": packet["truncated"],
            "gold_present": gold_in_evidence(histories[question.history_id], packet, labels[question.qid]),
        })
    return pd.DataFrame(rows)


def cell_table(rows: pd.DataFrame, length_order: list[str]) -> pd.DataFrame:
    """Per arm x hop x length: n, mean chars, truncated count, gold-present count."""
    table = (
        rows.groupby(["arm", "hop", "length"], sort=False)
        .agg(n=("question_id", "size"), mean_chars=("chars", "mean"),
             truncated=("truncated", "sum"), gold_present=("gold_present", "sum"))
        .reset_index()
    )
    table["length"] = pd.Categorical(table["length"], categories=length_order, ordered=True)
    table["hop"] = pd.Categorical(table["hop"], categories=["sh", "mh"], ordered=True)
    table["arm"] = pd.Categorical(table["arm"], categories=list(dict.fromkeys(rows["arm"])), ordered=True)
    return table.sort_values(["arm", "hop", "length"]).reset_index(drop=True)
