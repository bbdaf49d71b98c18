"""results/REPORT.md, written from the generated tables, never typed by hand.

Every number in the report is read from results/tables/<stem>*.csv (written by
`cmc-harness tables` from sealed bundles) or from the paper's reference numbers under
datasets/paper/; the sentences are a template (analysis/templates/report.md.j2). So a
rerun that changes a bundle changes the report, and a report number can always be traced
to a table and from there to a bundle.
"""
from __future__ import annotations

import json
import re
from pathlib import Path
from typing import Any

import pandas as pd
from jinja2 import Environment, FileSystemLoader, StrictUndefined

from cmc.frontends import frontend_kind
from common.errors import DataError

TEMPLATES = Path(__file__).resolve().parent / "templates"
SECTIONS = ("contrasts", "non_overflow", "selection", "extraction", "key_change", "by_length", "coverage", "cost", "outcomes", "generation")
EXPERIMENTS = ("table", "depth", "ports")  # main tables' name prefixes (table1, table5, depth, ports, ...)
# Generated files included whole, after the experiments: (title, path under results/).
DIAGNOSTICS = (("Synthetic sweep (make synthetic)", "synthetic_sweep.md"),
               ("Evidence diagnostics (make diagnostics)", "tables/evidence_diagnostics.md"),
               ("Retrieval at k (make retrieval)", "tables/retrieval.md"),
               ("Disjoint random token matching (cmc-harness token-match)", "tables/disjoint_token_match.md"),
               ("Table 7 analogue: CMC on each frontend (make frontends)", "tables/table7_readers.md"),
               ("Table 7 analogue on the 6K and 32K histories, where every frontend has run (make frontends)",
                "tables/table7_short_readers.md"),
               ("Table 7 on the 6K and 32K histories: selection against reader (make frontends), frontend {match}",
                "tables/table7_short*_selection.md"),
               ("LLM frontends against the grammar frontend (cmc-harness frontend-report)", "tables/frontends.md"),
               ("CMC evidence with each frontend (cmc-harness frontend-report)", "tables/frontends_coverage.md"),
               ("Issue 38's targets for a whole-corpus extraction (cmc-harness frontend-report)",
                "tables/frontends_targets.md"),
               ("Label screen, appendix B.3 (make screen)", "tables/label_screen.md"),
               ("CPU reader engines side by side (make bench-readers)", "bench/readers_qwen25_coder_15b.md"))


def _table(tables: Path, stem: str, part: str = "") -> dict[str, Any] | None:
    """One generated table: its Markdown (minus the heading, which the report supplies) and
    its rows as records; None when make_tables did not write it."""
    name = f"{stem}_{part}" if part else stem
    csv, md = tables / f"{name}.csv", tables / f"{name}.md"
    if not csv.is_file() or not md.is_file():
        return None
    body = md.read_text(encoding="utf-8").split("\n", 2)[2].strip()  # drop "## title" and the blank line
    try:
        rows = pd.read_csv(csv).astype(object).where(lambda frame: frame.notna(), None).to_dict("records")
    except (ValueError, pd.errors.ParserError) as exc:
        raise DataError(f"{csv}: not a table make_tables wrote ({exc})") from exc
    return {"markdown": body, "rows": rows}


def paper_reference(reference_dir: Path, experiment: str) -> dict[str, Any] | None:
    """The paper's numbers for this experiment (datasets/paper/<experiment>.json), if given."""
    path = reference_dir / f"{experiment}.json"
    return json.loads(path.read_text(encoding="utf-8")) if path.is_file() else None


def provenance_field(markdown: str, field: str, after: str) -> str | None:
    """A name a generated table's provenance line gives ("Frontend: NAME. Population: ..."):
    read up to the field that follows it, since a name may hold dots."""
    match = re.search(rf"\b{field}: (\S+?)\.? {after}", markdown)
    return match.group(1) if match else None


def paper_cells(reference: dict[str, Any] | None, frontend: str) -> tuple[dict[str, Any], str | None]:
    """The paper's per-view cells to set beside a table of this frontend, and the kind of
    extraction they come from: the reference's cells for this frontend kind (grammar, llm,
    hybrid: a name up to its first '_') when it gives them, else its main cells."""
    if reference is None:
        return {}, None
    kind = frontend_kind(frontend)
    by_kind = reference.get("views_by_frontend", {})
    if kind in by_kind:
        return by_kind[kind], kind
    return reference.get("views", {}), reference.get("frontend")


def experiment_sections(tables: Path, reference_dir: Path) -> list[dict[str, Any]]:
    """One section per main table found, in name order: each experiment's default population
    and QUICK, each on its own frontend (table1, table1_quick, table1_llm_lines_..., ports, ...),
    with the experiment's default reader (another reader's tables are in results/tables only)."""
    sections = []
    for csv in sorted(p for prefix in EXPERIMENTS for p in tables.glob(f"{prefix}*.csv")):
        stem = csv.stem
        experiment, _, variant = stem.partition("_")
        main = _table(tables, stem) if variant in ("", "quick") or variant.startswith(("quick_", "llm_", "hybrid_")) else None
        if main is None:
            continue  # a part of a section (contrasts, by_length, ...), another reader or population, a grid
        frontend = provenance_field(main["markdown"], "Frontend", "Population:") or "grammar"
        if variant not in ("", "quick") and variant.removeprefix("quick_") != frontend:
            continue  # e.g. table7_hybrid_..._selection: a part whose name starts like a frontend
        paper = paper_reference(reference_dir, experiment)
        views, paper_frontend = paper_cells(paper, frontend)
        population = provenance_field(main["markdown"], "Population", r"\(")
        sections.append({"stem": stem, "experiment": experiment, "main": main, "paper": paper, "frontend": frontend,
                         "population": population,
                         "frontend_kind": frontend_kind(frontend), "paper_views": views, "paper_frontend": paper_frontend,
                         **{part: _table(tables, stem, part) for part in SECTIONS}})
    return sections


def _glob_match(pattern: str, path: Path) -> str:
    """What the pattern's '*' stood for in this file's name, '_' trimmed; "grammar" when
    nothing (the grammar frontend's tables carry no frontend suffix)."""
    head, _, tail = Path(pattern).name.partition("*")
    return path.name[len(head):len(path.name) - len(tail)].strip("_") or "grammar"


def diagnostic_sections(results: Path) -> list[dict[str, str]]:
    """The generated diagnostics that exist, each without its own top heading. A path with
    a '*' stands for every matching file, in name order (one per frontend, say), its title's
    {match} filled with what the '*' matched, so the sections are told apart."""
    found = []
    for title, pattern in DIAGNOSTICS:
        for path in sorted(results.glob(pattern)):
            lines = path.read_text(encoding="utf-8").strip().splitlines()
            body = "\n".join(lines[1:] if lines and lines[0].startswith("#") else lines).strip()
            found.append({"title": title.replace("{match}", _glob_match(pattern, path)),
                          "source": f"results/{path.relative_to(results).as_posix()}", "markdown": body})
    return found


def write_report(tables: Path, reference_dir: Path, out: Path) -> Path:
    """Render the report; the caller's atomic write keeps a half-written file off disk."""
    from common.io import atomic_write_text

    environment = Environment(loader=FileSystemLoader(TEMPLATES), undefined=StrictUndefined, keep_trailing_newline=True,
                              trim_blocks=True, lstrip_blocks=True)
    text = environment.get_template("report.md.j2").render(sections=experiment_sections(tables, reference_dir),
                                                           diagnostics=diagnostic_sections(tables.parent))
    atomic_write_text(out, text)
    return out
