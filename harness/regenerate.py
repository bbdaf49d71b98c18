"""`cmc-harness regenerate-sample`: regenerate a stratified sample of sealed bundles in this
environment and compare answers.

Why: request ids of identity scheme 2 hold no library version, so a transformers upgrade
keeps every stored answer. That is sound only if the upgrade changes neither the inputs nor
the greedy outputs. This job measures both on committed bundles: it rebuilds each sampled
request (its input ids must equal the sealed ones: the sealed request id proves it), runs
it with the bundle's reader at the bundle's dtype in this environment, and compares the
answer with the sealed one, byte for byte. Results go to results/bench/ as JSON.

    cmc-harness regenerate-sample results/bundles/table1/*-all-* --per-cell 1 --max-input-tokens 7000
"""
from __future__ import annotations

import argparse
import dataclasses
import json
import platform
import random
import time
from pathlib import Path

from omegaconf import OmegaConf

from common.configurable import instantiate_known
from common.io import atomic_write_text
from harness.replay import replay_config
from harness.runs import Run
from provenance.bundle import read_bundle_jsonl, read_manifest, verify_seal
from readers.compute import cpu_summary
from scoring.metrics import parse_answer


def sample(run: Run, requests: list[dict], per_cell: int, max_tokens: int, seed: int) -> list[int]:
    """Row indices, `per_cell` per (hop, length) cell among requests under the token cap."""
    cells: dict[tuple[str, str], list[int]] = {}
    for index, (question, request) in enumerate(zip(run.questions, requests)):
        if request["input_tokens"] is not None and request["input_tokens"] <= max_tokens:
            cells.setdefault((question.hop, question.length), []).append(index)
    rng = random.Random(seed)
    return sorted(i for rows in cells.values() for i in rng.sample(rows, min(per_cell, len(rows))))


def check_bundle(bundle: Path, per_cell: int, max_tokens: int, seed: int) -> dict:
    """Rebuild and regenerate the sampled requests of one verified bundle; count what matches."""
    verify_seal(bundle)
    manifest = read_manifest(bundle)
    run = Run(replay_config(bundle, manifest=manifest), frozen_reader_pin=manifest["reader_pin"])
    requests, predictions = read_bundle_jsonl(bundle, "requests.jsonl"), read_bundle_jsonl(bundle, "predictions.jsonl")
    evidence = read_bundle_jsonl(bundle, "evidence.jsonl")
    rows = sample(run, requests, per_cell, max_tokens, seed)
    questions = run.questions
    run.questions = [questions[i] for i in rows]  # rebuild only the sampled requests
    rebuilt = run.requests_for([evidence[i] for i in rows])
    # No freeze: identity scheme 2 and this library version, at the dtype the bundle was made in.
    fresh = instantiate_known(OmegaConf.merge(run.cfg.reader, {"dtype": manifest["reader_pin"]["dtype"]}))
    items, start = [], time.perf_counter()
    for row, request in zip(rows, rebuilt):
        old = predictions[row]
        new = fresh.generate(dataclasses.replace(request, pin=fresh.pin))
        items.append({"question_id": old["question_id"], "input_tokens": len(request.input_ids),
                      "same_input_ids": request.id == requests[row]["request_id"],
                      "same_raw": new.raw == old["raw"], "same_parsed": parse_answer(new.raw) == parse_answer(old["raw"]),
                      **({} if new.raw == old["raw"] else {"sealed": old["raw"], "now": new.raw})})
    return {"bundle": bundle.name, "sampled": len(items), "of": len(requests),
            "same_input_ids": sum(i["same_input_ids"] for i in items), "same_raw": sum(i["same_raw"] for i in items),
            "same_parsed": sum(i["same_parsed"] for i in items), "seconds": round(time.perf_counter() - start, 1),
            "sealed_with": {k: manifest["packages"].get(k) for k in ("transformers", "torch", "tokenizers")},
            "items": items}


def regenerate_sample_arguments(parser: argparse.ArgumentParser) -> None:
    parser.add_argument("bundles", nargs="+", type=Path)
    parser.add_argument("--per-cell", type=int, default=1, help="questions per (hop, length) cell and bundle")
    parser.add_argument("--max-input-tokens", type=int, default=7000, help="sample only requests up to this size")
    parser.add_argument("--seed", type=int, default=0)
    parser.add_argument("--out", type=Path, default=Path("results/bench/regenerated_sample.json"))


def regenerate_sample_main(args: argparse.Namespace) -> int:
    """Every bundle in turn; the JSON is rewritten after each, so a stop keeps what was measured."""
    import torch
    import transformers

    report = {"environment": {"transformers": transformers.__version__, "torch": torch.__version__,
                              "python": platform.python_version(), **cpu_summary()},
              "per_cell": args.per_cell, "max_input_tokens": args.max_input_tokens, "seed": args.seed, "bundles": []}
    for bundle in args.bundles:
        result = check_bundle(bundle, args.per_cell, args.max_input_tokens, args.seed)
        report["bundles"].append(result)
        print(f"{result['bundle']}: {result['same_raw']}/{result['sampled']} identical answers, "
              f"{result['same_input_ids']}/{result['sampled']} identical inputs ({result['seconds']} s)", flush=True)
        args.out.parent.mkdir(parents=True, exist_ok=True)
        atomic_write_text(args.out, json.dumps(report, indent=1) + "\n")  # after each bundle: a stop keeps the rest
    return 0

