"""What a multi-call method's bundles say beyond accuracy: its cost per question (calls,
input and output tokens) and where its traces end (each method's `outcome`) against
whether the question was answered right. Computed from sealed bundles and scored items."""
from __future__ import annotations

from pathlib import Path
from typing import Mapping, Sequence

import pandas as pd

from provenance.bundle import read_bundle_jsonl


def cost_table(items: pd.DataFrame, views: Sequence[str]) -> pd.DataFrame:
    """Per view: reader calls, input tokens and output tokens per question (mean, and the
    most calls any question took). An arm makes one call per question."""
    rows = []
    for view in views:
        part = items[items["arm"] == view]
        if part.empty:
            continue
        rows.append({"view": view, "n": len(part), "calls/q": round(float(part["calls"].mean()), 2),
                     "max calls": int(part["calls"].max()),
                     "input tokens/q": round(float(part["input_tokens"].mean()), 1)
                     if part["input_tokens"].notna().all() else None,
                     "output tokens/q": round(float(part["output_tokens"].mean()), 1)})
    return pd.DataFrame(rows)


def trace_steps(trace: dict) -> list[dict]:
    """A trace's steps: G-Walk's `steps` (hops), MeLLo's `rounds`, or another method's `steps`."""
    return list(trace.get("steps") or trace.get("rounds") or [])


def outcome_table(items: pd.DataFrame, bundles: Mapping[str, Path]) -> pd.DataFrame:
    """Per method view, hop and trace outcome (final answer, failed parse, walked, ...):
    questions, how many were answered right or not at all, and the steps taken (hops or
    rounds) and how many of them read a bank fact, so a method's failures can be placed."""
    rows = []
    for view, bundle in bundles.items():
        traces = {r["question_id"]: r for r in read_bundle_jsonl(bundle, "evidence.jsonl")}
        if not traces or "calls" not in next(iter(traces.values())):
            continue  # an arm: no trace outcome
        part = items[items["arm"] == view].copy()
        part["outcome"] = [traces[q]["trace"].get("outcome", "") for q in part["question_id"]]
        part["no_answer"] = [traces[q]["answer"] is None for q in part["question_id"]]
        steps = {q: trace_steps(traces[q]["trace"]) for q in part["question_id"]}
        part["steps"] = [len(steps[q]) for q in part["question_id"]]
        part["fact_steps"] = [sum(s.get("fact_pos") is not None for s in steps[q]) for q in part["question_id"]]
        for (hop, outcome), group in part.groupby(["hop", "outcome"], sort=True):
            rows.append({"view": view, "hop": hop, "outcome": outcome, "n": len(group),
                         "correct": int(group["substring_em"].sum()), "no answer": int(group["no_answer"].sum()),
                         "steps/q": round(float(group["steps"].mean()), 2),
                         "steps reading a bank fact": int(group["fact_steps"].sum()),
                         "steps": int(group["steps"].sum())})
    return pd.DataFrame(rows)
