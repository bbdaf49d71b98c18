"""`cmc-harness frontend-report` (part of `make frontends`): each frozen LLM or hybrid extraction next to the grammar
frontend's reading of the same statements (statuses, triple agreement, cost, rules), then
CMC's evidence with each: gold strings present per hop, packet sizes, and packets identical to the
grammar frontend's (their reader requests are the grammar run's, reused). No reader is
called; labels are opened only after every packet is built.

    cmc-harness frontend-report [results/extractions/<frontend>/corpus-<id>.json ...] [--out results/tables]

Without files, every frozen extraction under results/extractions/ is read. Writes
<out>/frontends.{csv,md} and frontends_coverage.{csv,md}.
"""
from __future__ import annotations

import argparse
import itertools
import json
from pathlib import Path
from typing import Any

import pandas as pd

from analysis.diagnostics import gold_in_evidence
from analysis.frontend_agreement import coverage_table, evidence_rows, frontend_row
from analysis.frontend_targets import target_table
from analysis.tables import markdown
from cmc.evidence import select_all
from cmc.extraction import Extraction
from cmc.frontends.llm import corpus_of
from cmc.graph import build_memories
from cmc.records import Dataset
from common.configurable import instantiate_known
from common.errors import DataError
from common.io import atomic_write_text
from harness.config import compose
from harness.runs import build_frontend


def histories_of(statements: list[str], dataset: Dataset) -> Dataset:
    """The dataset restricted to the histories whose unique statements the file holds (an
    extraction may cover a subset, e.g. the 6K and 32K histories)."""
    ids = list(dataset.histories)
    for size in range(len(ids), 0, -1):
        for subset in itertools.combinations(ids, size):
            if [r.text for r in corpus_of(dataset.histories[h] for h in subset)] == statements:
                chosen = set(subset)
                return Dataset(dataset.name, {h: dataset.histories[h] for h in subset},
                               tuple(q for q in dataset.questions if q.history_id in chosen))
    raise DataError(f"the statements of no set of {dataset.name} histories match this extraction's")


def packets(cfg: Any, dataset: Dataset, frontend: Any) -> list[dict]:
    """CMC's evidence packets over `dataset` with this frontend's extraction."""
    arm = instantiate_known(cfg.arm)
    return [e.packet() for e in select_all(arm, dataset, build_memories(dataset, frontend))]


def frontend_report_arguments(parser: argparse.ArgumentParser) -> None:
    parser.add_argument("extractions", nargs="*", type=Path,
                        help="frozen extraction files (default: every one under results/extractions)")
    parser.add_argument("--out", type=Path, default=Path("results/tables"))


def frontend_report_main(args: argparse.Namespace) -> int:
    """The report over the named extractions, or over every frozen one under results/extractions."""
    found = args.extractions or sorted(Path("results/extractions").glob("*/corpus-*[0-9a-f].json"))
    if not found:
        raise DataError("no frozen extraction under results/extractions; pass one")
    report(found, args.out)
    return 0


def report(paths: list[Path], out: Path) -> None:
    """Each extraction against the grammar (statements, triples, cost), then CMC's evidence
    built with each; labels are opened only after every packet is built."""
    base = compose("arm=cmc")
    adapter = instantiate_known(base.dataset)
    dataset = adapter.load()
    grammar = build_frontend(base.frontend)
    rows, evidence = [], []
    grammar_packets: dict[str, list[dict]] = {}  # per set of histories: built once, however many files share it
    for path in paths:
        data = json.loads(path.read_text(encoding="utf-8"))
        sub = histories_of(data["statements"], dataset)
        kind = "hybrid" if "hybrid" in data else "llm"
        cfg = compose("arm=cmc", f"frontend={kind}", f"frontend.frozen={path.resolve()}")
        corpus = corpus_of(sub.histories.values())
        extraction = Extraction.from_json(data)
        scope = "+".join(h.rsplit("_", 1)[-1] for h in sub.histories)
        name = data["frontend_id"].split("@")[0]  # the name it was made under, not this config's
        rows.append({"histories": scope, **frontend_row(name, extraction, grammar.extract(corpus), data)})
        if scope not in grammar_packets:
            grammar_packets[scope] = packets(base, sub, grammar)
            evidence.append((scope, "grammar", sub, grammar_packets[scope]))
        evidence.append((scope, name, sub, packets(cfg, sub, build_frontend(cfg.frontend))))

    labels = adapter.load_labels()  # every packet is built: labels may be opened now
    frames = []
    for scope, name, sub, built in evidence:
        reference = grammar_packets[scope]
        questions = {q.qid: q for q in sub.questions}
        gold = {p["question_id"]: gold_in_evidence(sub.histories[questions[p["question_id"]].history_id], p,
                                                   labels[p["question_id"]]) for p in built}
        frame = evidence_rows(name, built, {p["question_id"]: p for p in reference}, gold,
                              {q: questions[q].hop for q in questions})
        frames.append(frame.assign(histories=scope))
    write(pd.DataFrame(rows), out / "frontends", "LLM frontends against the grammar frontend (same statements)")
    write(target_table(pd.DataFrame(rows)), out / "frontends_targets",
          "issue 38's targets for a whole-corpus extraction (2 cores), measured, beside the paper's figure")
    coverage = pd.concat([coverage_table(f).assign(histories=f["histories"].iloc[0]) for f in frames])
    write(coverage[["histories", "frontend", "hop", "n", "gold_present", "same_packet",
                       "median_chars", "truncated"]], out / "frontends_coverage",
          "CMC evidence with each frontend: gold strings present, packets identical to the grammar "
          "frontend's, median packet size (characters) and packets cut at the 60,000-character budget")


def write(frame: pd.DataFrame, stem: Path, title: str) -> None:
    """One table as CSV and Markdown, echoed to stdout."""
    atomic_write_text(stem.with_suffix(".csv"), frame.to_csv(index=False))
    atomic_write_text(stem.with_suffix(".md"), f"## {title}\n\n{markdown(frame)}\n")
    print(f"## {title}\n\n{markdown(frame)}\n")

