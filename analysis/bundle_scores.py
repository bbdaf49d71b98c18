"""Score one sealed bundle: per-item correctness and per-hop accuracy with Wilson intervals.
Written beside the bundle (results/scores/...), never inside it, each row checked against
its type (provenance/row_types.py) before either file is written."""
from __future__ import annotations

import logging
from pathlib import Path
from typing import Mapping, Sequence

from analysis.tables import accuracy, bundle_items
from cmc.records import Question
from common.io import atomic_write_text, json_text, without_nan, write_jsonl
from provenance.row_types import check_document, check_rows
from scoring.metrics import normalize_answer

log = logging.getLogger(__name__)

ITEM_FIELDS = ("question_id", "hop", "length", "substring_em", "strict_em", "parsed", "error")


def unwinnable(labels: Mapping[str, Sequence[str]]) -> list[str]:
    """Question ids none of whose gold strings survives normalisation: no answer can match
    them (an empty gold never matches), so they count as wrong whatever the reader says."""
    return sorted(qid for qid, golds in labels.items() if not any(normalize_answer(g) for g in golds))


def score_bundle(bundle: Path, labels: Mapping[str, tuple[str, ...]], questions: Mapping[str, Question],
                 out_dir: Path) -> Path:
    items = bundle_items(bundle, labels, questions)
    asked = set(items["question_id"]) if len(items) else set()
    if lost := [qid for qid in unwinnable(labels) if qid in asked]:
        log.warning("%s: %d question(s) have no gold string left after normalisation and cannot be answered "
                    "right (first %s); they are scored as wrong", bundle, len(lost), lost[0])
    summary = {"bundle": str(bundle), "seal": items["seal"].iloc[0] if len(items) else None, "n": len(items),
               "by_hop": {row["hop"]: {"n": int(row["n"]), "correct": int(row["correct"]), "accuracy": row["accuracy"],
                                       "wilson95": [row["wilson_low"], row["wilson_high"]]}
                          for row in accuracy(items, ["hop"]).to_dict("records")}}
    if lost:
        summary["unwinnable"] = lost
    rows = without_nan(items[list(ITEM_FIELDS)].to_dict("records"))
    check_rows("items.jsonl", rows, out_dir / "items.jsonl")
    check_document("summary.json", summary, out_dir / "summary.json")
    write_jsonl(out_dir / "items.jsonl", rows)
    atomic_write_text(out_dir / "summary.json", json_text(summary))
    return out_dir
