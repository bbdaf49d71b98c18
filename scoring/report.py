"""Score one sealed bundle: per-item correctness and per-hop accuracy with Wilson intervals.
Written beside the bundle (results/scores/...), never inside it."""
from __future__ import annotations

from pathlib import Path
from typing import Mapping

from cmc.io import atomic_write_text, json_text, without_nan, write_jsonl
from cmc.records import Question
from scoring.tables import accuracy, bundle_items

ITEM_FIELDS = ("question_id", "hop", "length", "substring_em", "strict_em", "parsed", "error")


def score_bundle(bundle: Path, labels: Mapping[str, tuple[str, ...]], questions: Mapping[str, Question],
                 out_dir: Path) -> Path:
    items = bundle_items(bundle, labels, questions)
    summary = {"bundle": str(bundle), "seal": items["seal"].iloc[0] if len(items) else None, "n": len(items),
               "by_hop": {row["hop"]: {"n": int(row["n"]), "correct": int(row["correct"]), "accuracy": row["accuracy"],
                                       "wilson95": [row["wilson_low"], row["wilson_high"]]}
                          for row in accuracy(items, ["hop"]).to_dict("records")}}
    write_jsonl(out_dir / "items.jsonl", without_nan(items[list(ITEM_FIELDS)].to_dict("records")))
    atomic_write_text(out_dir / "summary.json", json_text(summary))
    return out_dir
