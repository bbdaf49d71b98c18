"""Score one sealed bundle: per-item correctness and per-hop accuracy with Wilson intervals.
Written beside the bundle (results/scores/...), never inside it."""
from __future__ import annotations

import json
from pathlib import Path
from typing import Mapping

from cmc.bundle import read_bundle_jsonl, verify_seal
from cmc.io import atomic_write_text, write_jsonl
from cmc.records import Question
from scoring.intervals import wilson_interval
from scoring.metrics import score_output


def score_bundle(bundle: Path, labels: Mapping[str, tuple[str, ...]], questions: Mapping[str, Question],
                 out_dir: Path) -> Path:
    seal = verify_seal(bundle)
    items = []
    for row in read_bundle_jsonl(bundle, "predictions.jsonl"):
        question = questions[row["question_id"]]
        scored = score_output(row["raw"], labels[question.qid])
        items.append({"question_id": question.qid, "hop": question.hop, "length": question.length,
                      "substring_em": scored["substring_em"], "strict_em": scored["strict_em"],
                      "parsed": scored["parsed"], "error": row["error"]})
    summary = {"bundle": str(bundle), "seal": seal, "n": len(items), "by_hop": {}}
    for hop in ("sh", "mh"):
        hits = [i["substring_em"] for i in items if i["hop"] == hop]
        if hits:
            low, high = wilson_interval(int(sum(hits)), len(hits))
            summary["by_hop"][hop] = {"n": len(hits), "correct": int(sum(hits)),
                                      "accuracy": 100 * sum(hits) / len(hits), "wilson95": [100 * low, 100 * high]}
    write_jsonl(out_dir / "items.jsonl", items)
    atomic_write_text(out_dir / "summary.json", json.dumps(summary, indent=1, sort_keys=True) + "\n")
    return out_dir
