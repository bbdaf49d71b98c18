"""Render the report with Jinja2 (autoescaped: every string from a bundle is escaped) into a
folder of self-contained pages: index.html and q/<question>.html, inline CSS, JS and SVG,
no network. Same bundles in, same bytes out: no clock, no random order, no machine path.
The folder is built beside its target and swapped in, so a reader never sees half of it."""
from __future__ import annotations

import os
import shutil
from pathlib import Path
from typing import Any, Sequence

from jinja2 import Environment, FileSystemLoader, StrictUndefined
from scipy.stats import norm

from analysis.tables import length_order
from common.errors import DataError
from common.io import atomic_write_text
from viewer.charts import recall_chart
from viewer.index_page import check_same_questions, index_rows, items, page_names, paired, retrieval, summary
from viewer.load import ViewedBundle
from viewer.panels import panel

TEMPLATES = Path(__file__).resolve().parent / "templates"
MARKER = ".cmc-view"  # a folder holding this was written by the viewer and may be replaced


def environment() -> Environment:
    return Environment(loader=FileSystemLoader(TEMPLATES), autoescape=True, undefined=StrictUndefined,
                       keep_trailing_newline=True, trim_blocks=True, lstrip_blocks=True)


def build_pages(bundles: Sequence[ViewedBundle]) -> dict[str, str]:
    """Every page's HTML by relative file name."""
    check_same_questions(bundles)
    questions = {q.qid: q for q in bundles[0].dataset.questions}
    labels = [f"{'AB'[i]}: {b.arm}" for i, b in enumerate(bundles)]
    frames = [items(b, questions, label) for b, label in zip(bundles, labels)]
    qids = [p["question_id"] for p in bundles[0].predictions]
    names = page_names(qids)
    curves = retrieval(bundles, questions)
    for entry in curves:
        entry["chart"] = recall_chart([r for r in entry["rows"] if r["hop"] == "all"], entry["reference"])
    info = [bundle_info(b, label, i) for i, (b, label) in enumerate(zip(bundles, labels))]
    compared = paired(frames, labels)
    env = environment()
    pages = {"index.html": env.get_template("index.html.j2").render(
        bundles=info, summaries=[summary(f) for f in frames], rows=index_rows(frames, questions, names),
        paired=compared, curves=curves, hops=sorted({questions[q].hop for q in qids}, key=lambda h: (h != "sh", h)),
        lengths=length_order(questions[q].length for q in qids), z=round(float(norm.ppf(0.975)), 6), root="",
        disagreements=set(compared["disagreements"]) if compared else set())}
    page = env.get_template("question.html.j2")
    graph_reads = [b.evidence if b.graph_read else None for b in bundles]
    for i, qid in enumerate(qids):
        question = questions[qid]
        panels = [panel(b, question, graph_reads[1 - j][qid] if len(bundles) == 2 and graph_reads[1 - j] else None)
                  for j, b in enumerate(bundles)]
        pages[names[qid]] = page.render(
            bundles=info, question=question, panels=panels, root="../", index=i + 1, total=len(qids),
            prev=names[qids[i - 1]].split("/")[-1] if i else None,
            next=names[qids[i + 1]].split("/")[-1] if i + 1 < len(qids) else None)
    return pages


def bundle_info(bundle: ViewedBundle, label: str, index: int) -> dict[str, Any]:
    manifest = bundle.manifest
    return {"label": label, "index": index, "name": bundle.name, "arm": bundle.arm, "reader": bundle.reader,
            "population": manifest.get("population", {}).get("name"), "n": len(bundle.predictions),
            "seal": bundle.seal, "problem": bundle.problem, "labelled": bundle.labels is not None,
            "commit": (manifest.get("git") or {}).get("commit")}


def write_report(bundles: Sequence[ViewedBundle], out: Path) -> Path:
    """Write the pages into `out` (replacing an earlier report there, never other files)."""
    out = Path(out)
    if out.exists() and not (out / MARKER).is_file() and any(out.iterdir()):
        raise DataError(f"{out}: exists and is not a report the viewer wrote; refusing to replace it")
    pages = build_pages(bundles)
    staging = out.with_name(f".{out.name}.staging-{os.getpid()}")
    shutil.rmtree(staging, ignore_errors=True)
    for name, html in sorted(pages.items()):
        atomic_write_text(staging / name, html)
    atomic_write_text(staging / MARKER, "written by `make view`; the folder is replaced on the next run\n")
    old = out.with_name(f".{out.name}.old-{os.getpid()}")
    if out.exists():
        os.replace(out, old)
    os.replace(staging, out)
    shutil.rmtree(old, ignore_errors=True)
    return out
