"""The index page's content: per-question rows for the filters, each view's accuracy with
Wilson intervals, the paired comparison of two bundles, and the ranked arms' retrieval
curves. All numbers come from the project's released scoring; labels only from the vault."""
from __future__ import annotations

import re
from typing import Any, Mapping, Sequence

import pandas as pd

from analysis.retrieval_curves import curve, question_rows, ranking, selection_rows
from analysis.tables import CLUSTER_KEYS, accuracy, bundle_items, contrasts
from cmc.records import Question
from common.errors import DataError
from scoring.metrics import parse_answer
from viewer.load import ViewedBundle

SAFE = re.compile(r"[^A-Za-z0-9_.-]")


def page_names(qids: Sequence[str]) -> dict[str, str]:
    """A file name per question (q/<id>.html, unsafe characters replaced); two ids that
    would share a file are refused rather than overwritten."""
    names = {qid: f"q/{SAFE.sub('_', qid)[:120]}.html" for qid in qids}
    if len(set(names.values())) != len(names):
        raise DataError("two question ids map to one page name; question ids must differ in [A-Za-z0-9_.-]")
    return names


def items(bundle: ViewedBundle, questions: Mapping[str, Question], label: str) -> pd.DataFrame:
    """One row per question. With labels: analysis.tables.bundle_items (substring / strict EM,
    gold in evidence). Without: the label-free columns only."""
    cluster = bundle.manifest["config"].get("experiment", {}).get("cluster", "question_text")
    if cluster not in CLUSTER_KEYS:
        raise DataError(f"{bundle.name}/manifest.json: config.experiment.cluster {cluster!r} is not one of "
                        f"{sorted(CLUSTER_KEYS)}")
    if bundle.labels is not None:
        frame = bundle_items(bundle.path, bundle.labels, questions, cluster, bundle.dataset.histories)
    else:
        rows = []
        for pred in bundle.predictions:
            qid = pred["question_id"]
            packet, request = bundle.evidence[qid], bundle.requests[qid]
            rows.append({"question_id": qid, "hop": questions[qid].hop, "length": questions[qid].length,
                         "cluster": CLUSTER_KEYS[cluster](questions[qid]),
                         "parsed": None if pred["raw"] is None else parse_answer(pred["raw"]),
                         "truncated": packet["truncated"] or request["evidence_truncated_tokens"] > 0})
        frame = pd.DataFrame(rows)
    frame["arm"] = label
    return frame


def summary(frame: pd.DataFrame) -> list[dict[str, Any]]:
    """Accuracy (%) with Wilson 95% bounds: all questions, by hop class, by history length."""
    if "substring_em" not in frame:
        return []
    part = frame.assign(all="all")
    rows = []
    for column in ("all", "hop", "length"):
        for row in accuracy(part, [column]).to_dict("records"):
            rows.append({"group": row[column], "n": row["n"], "correct": row["correct"],
                         "accuracy": round(row["accuracy"], 1), "low": round(row["wilson_low"], 1),
                         "high": round(row["wilson_high"], 1)})
    return rows


def index_rows(frames: Sequence[pd.DataFrame], questions: Mapping[str, Question],
               names: Mapping[str, str]) -> list[dict[str, Any]]:
    """One row per question, in the first bundle's order, with each bundle's cell."""
    keyed = [f.set_index("question_id") for f in frames]
    rows = []
    for qid in frames[0]["question_id"]:
        q = questions[qid]
        cells = []
        for frame in keyed:
            row = frame.loc[qid]
            cells.append({"correct": None if "substring_em" not in row else bool(row["substring_em"]),
                          "truncated": bool(row["truncated"]), "answer": row["parsed"],
                          "gold": None if "gold_present" not in row else bool(row["gold_present"])})
        rows.append({"qid": qid, "href": names[qid], "hop": q.hop, "length": q.length, "text": q.text, "cells": cells})
    return rows


def paired(frames: Sequence[pd.DataFrame], labels: Sequence[str], n_boot: int = 10_000) -> dict[str, Any] | None:
    """Paired W/T/L and the query-cluster bootstrap of A - B (points), overall and by hop;
    None unless both bundles have labels."""
    if len(frames) != 2 or any("substring_em" not in f for f in frames):
        return None
    both = pd.concat(frames, ignore_index=True).assign(all="all")
    table = pd.concat([contrasts(both, [labels], [], by=by, n_boot=n_boot).rename(columns={by: "group"})
                       for by in ("all", "hop")], ignore_index=True)
    a, b = (f.set_index("question_id") for f in frames)
    differ = [q for q in a.index if a.at[q, "substring_em"] != b.at[q, "substring_em"]]
    return {"rows": table.drop(columns=["status"]).to_dict("records"), "disagreements": differ}


def retrieval(bundles: Sequence[ViewedBundle], questions: Mapping[str, Question]) -> list[dict[str, Any]]:
    """For each labelled bundle of a ranked arm: gold at k, and (when the other bundle is a
    graph read) recall at k of that read's selected records; for a graph read its own
    selection point. Rows per arm and k (all questions) and per hop."""
    out = []
    for i, bundle in enumerate(bundles):
        if bundle.labels is None:
            continue
        packets = [bundle.evidence[p["question_id"]] for p in bundle.predictions]
        histories = bundle.dataset.histories
        other = bundles[1 - i] if len(bundles) == 2 else None
        if ranking(packets[0]) is not None:
            reference = other.evidence if other is not None and other.graph_read else None
            rows = question_rows(bundle.arm, packets, questions, histories, bundle.labels, reference)
        elif bundle.graph_read:
            rows = selection_rows(bundle.arm, packets, questions, histories, bundle.labels)
        else:
            continue
        table = pd.concat([curve(rows.assign(hop="all"), ("arm", "hop")), curve(rows, ("arm", "hop"))], ignore_index=True)
        out.append({"bundle": bundle.name, "arm": bundle.arm, "reference": reference_name(rows, other),
                    "rows": table.astype(object).where(table.notna(), None).to_dict("records")})
    return out


def reference_name(rows: pd.DataFrame, other: ViewedBundle | None) -> str | None:
    return other.arm if other is not None and rows["cmc_recall_at_k"].notna().any() else None


def check_same_questions(bundles: Sequence[ViewedBundle]) -> None:
    """Two bundles are compared only on the same questions."""
    if len(bundles) == 2:
        a = [p["question_id"] for p in bundles[0].predictions]
        b = [p["question_id"] for p in bundles[1].predictions]
        if sorted(a) != sorted(b):
            raise DataError(f"{bundles[0].name} and {bundles[1].name} hold different questions "
                            f"({len(set(a) - set(b))} only in the first, {len(set(b) - set(a))} only in the second)")
