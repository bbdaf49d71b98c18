"""`cmc-harness tables` (`make tables`): score an experiment's sealed bundles and write its
tables and figures.

    cmc-harness tables table1 [--population quick] [--reader NAME] [--frontend NAME]

One table holds the views (arms) of one dataset, frontend, population and reader: bundles
of other readers are never pooled into it. Tables go to results/tables/<experiment>*.{md,csv,tex}
(the stem names whatever differs from the experiment's defaults, e.g. table1_quick or
table1_qwen35_4b), figures to results/figures/. Each table names its reader, frontend,
population and the seals of the bundles behind it. With bundles of several readers or
frontends, <experiment>[_<population>]_readers.* is the reader x frontend grid (paper Table 2).
"""
from __future__ import annotations

import argparse
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import pandas as pd

from analysis.coverage import coverage_table
from analysis.figures import accuracy_by_length, accuracy_vs_tokens, depth_curve, token_slices
from analysis.generation_cost import engine_label, generation_table
from analysis.interaction import non_overflow_table
from analysis.method_costs import cost_table, outcome_table
from analysis.narrative import paper_reference
from analysis.tables import (
    accuracy,
    contrasts,
    experiment_items,
    key_change_strata,
    markdown,
    reader_grid,
    selected_keys,
    strict_table,
    view_table,
)
from common.configurable import instantiate_known
from common.errors import DataError
from common.io import atomic_write_text, canonical_json
from common.locations import paper_dir
from harness.config import compose
from harness.grammar_reference import grammar_reference, write_extraction
from provenance.bundle import read_bundle_jsonl, read_manifest, run_slice
from provenance.vault import LabelVault

METRIC = " Substring exact match (%), Wilson 95% intervals."  # what the accuracy tables tally


def write_table(frame: pd.DataFrame, stem: Path, title: str, provenance: str) -> None:
    """One table as CSV, Markdown and LaTeX, each carrying its title and provenance."""
    atomic_write_text(stem.with_suffix(".csv"), frame.to_csv(index=False))
    atomic_write_text(stem.with_suffix(".md"), f"## {title}\n\n{provenance}\n\n{markdown(frame)}\n")
    atomic_write_text(stem.with_suffix(".tex"), f"% {title}\n% {provenance}\n" + frame.to_latex(index=False, na_rep="--"))


@dataclass(frozen=True)
class Slice:
    """The bundles one table set is made of: one dataset, frontend, population and reader."""

    cfg: Any
    defaults: dict[str, str]
    wanted: dict[str, str]
    sealed: list[Path]  # every sealed bundle of the experiment (the reader grid looks wider)
    slices: dict[Path, dict[str, str]]
    bundles: list[Path]  # those of the wanted slice: never pooled with another reader's

    def name(self, experiment: str, *keys: str) -> str:
        """Table names carry what differs from the experiment's defaults, so runs never
        overwrite each other's."""
        return experiment + "".join(f"_{self.wanted[k]}" for k in keys if self.wanted[k] != self.defaults[k])


@dataclass(frozen=True)
class SliceItems:
    """The slice's scored items and what every table of it says about them."""

    items: pd.DataFrame
    views: list[str]
    provenance: str
    caption: str


@dataclass(frozen=True)
class Tables:
    """Where the slice's tables go: results/tables/<stem><suffix>.*, titled by the experiment."""

    folder: Path
    stem: str
    experiment: str
    provenance: str

    def write(self, frame: pd.DataFrame, suffix: str, title: str) -> None:
        """An accuracy table of the slice, with the full provenance."""
        write_table(frame, self.folder / f"{self.stem}{suffix}", f"{self.experiment}: {title}", self.provenance)

    def write_untallied(self, frame: pd.DataFrame, suffix: str, title: str) -> None:
        """A table about the runs, not the answers: the provenance without the metric sentence."""
        write_table(frame, self.folder / f"{self.stem}{suffix}", f"{self.experiment}: {title}",
                    self.provenance.replace(METRIC, ""))


def tables_arguments(parser: argparse.ArgumentParser) -> None:
    """The experiment and which of its bundles, outputs and bootstrap size."""
    parser.add_argument("experiment")
    parser.add_argument("--bundles", default="results/bundles")
    parser.add_argument("--out", default="results")
    parser.add_argument("--n-boot", type=int, default=10_000)
    parser.add_argument("--population", help="use only bundles of this population (default: the experiment's)")
    for key in ("reader", "frontend", "dataset"):
        parser.add_argument(f"--{key}", help=f"use only bundles of this {key} (default: the experiment's)")


def select_slice(args: argparse.Namespace) -> Slice:
    """The experiment's sealed bundles of the asked slice; a DataError naming what was found if none."""
    cfg = compose(f"experiment={args.experiment}", *([f"dataset={args.dataset}"] if args.dataset else []))
    defaults = {"dataset": cfg.dataset.name, "frontend": cfg.frontend.name, "population": cfg.population.name,
                "reader": cfg.reader.name}
    wanted = {key: getattr(args, key) or default for key, default in defaults.items()}
    folder = Path(args.bundles) / args.experiment
    sealed = sorted(p for p in folder.iterdir() if (p / "SEAL").is_file()) if folder.is_dir() else []
    slices = {p: run_slice(p) for p in sealed}
    bundles = [p for p in sealed if slices[p] == wanted]  # one reader, frontend, ...: never pooled
    if not bundles:
        found = sorted({canonical_json(s) for s in slices.values()})
        raise DataError(f"no sealed bundles of {canonical_json(wanted)} under {folder}; found: {', '.join(found) or 'none'}")
    return Slice(cfg, defaults, wanted, sealed, slices, bundles)


def describe(chosen: Slice, experiment: str, items: pd.DataFrame) -> SliceItems:
    """The views to show and the provenance line and figure caption every output carries."""
    exp = chosen.cfg.experiment
    engines = sorted({engine_label(read_manifest(b).get("reader_pin") or {}) for b in chosen.bundles})
    readers = ", ".join(sorted(items["reader"].unique())) + f" ({'; '.join(e for e in engines if e) or 'engine not recorded'})"
    seals = "; ".join(f"{arm} {seal[:12]}" for arm, seal in items.groupby("arm", sort=False)["seal"].first().items())
    population = read_manifest(chosen.bundles[0])["population"]
    provenance = (f"Reader: {readers}. Frontend: {chosen.wanted['frontend']}. Population: {population['name']} (n={items['question_id'].nunique()} "
                  f"questions per view).{METRIC} Bundle seals: {seals}.")
    unsealed = [v for v in exp.views if v not in set(items["arm"])]
    if unsealed:  # an interim table must say so wherever it is read
        provenance += f" PARTIAL: views not sealed yet: {', '.join(unsealed)}."
    views = [v for v in exp.views if v in set(items["arm"])] or list(dict.fromkeys(items["arm"]))
    caption = f"{experiment}, reader {readers}, population {population['name']}"
    if unsealed:
        caption += f" (PARTIAL: {len(unsealed)} view(s) not sealed yet)"
    return SliceItems(items, views, provenance, caption)


def write_contrasts(out: Tables, items: pd.DataFrame, exp: Any, by_arm: dict[str, Path], vault: LabelVault,
                    questions: dict[str, Any], histories: Any, n_boot: int) -> None:
    """The preregistered paired contrasts and, for their pairs, the evidence coverage."""
    pairs = [list(p) for p in exp.preregistered.contrasts if {p[0], p[1]} <= set(items["arm"])]
    if not pairs:
        return
    paired = contrasts(items, pairs, pairs, by=exp.preregistered.by, n_boot=n_boot,
                       pooled=bool(exp.preregistered.get("pooled", False)))
    out.write(paired, "_contrasts", f"preregistered paired contrasts (points, query-cluster bootstrap "
                                    f"{n_boot:,} replicates, cluster = {exp.cluster})")
    # Section 4.1: where A is right and B wrong, does B's evidence lack A's records, or the answer?
    evidence = {arm: read_bundle_jsonl(by_arm[arm], "evidence.jsonl") for arm in {a for pair in pairs for a in pair}}
    labels = vault.open(by_arm[pairs[0][0]])  # the views of one slice ask the same questions
    coverage = pd.concat([coverage_table(evidence, pairs, questions, histories, labels, items, hop)
                          for hop in ("sh", "mh")], ignore_index=True)
    out.write(coverage, "_coverage", "evidence coverage on items A answers and B misses (lacks_record: B's "
                                     "evidence lacks a record A selected; lacks_gold: it lacks every gold string)")


def write_non_overflow(out: Tables, items: pd.DataFrame) -> None:
    """Appendix B.1 / Table 6: the four-arm interaction without the overflowing lengths."""
    table = non_overflow_table(items)
    if table is not None:
        out.write(table, "_non_overflow", "non-overflow populations: the paper's (every length but the longest) "
                                          "and, where it differs, the lengths this reader never truncated")


def write_reader_grid(chosen: Slice, vault: LabelVault, questions: dict, tables: Path, experiment: str) -> None:
    """Table 2: the reader x frontend grid, when this dataset and population have several;
    Table 7's also in correct answers beside the paper's."""
    grid = [p for p in chosen.sealed if all(chosen.slices[p][k] == chosen.wanted[k] for k in ("dataset", "population"))]
    if len({(chosen.slices[p]["reader"], chosen.slices[p]["frontend"]) for p in grid}) <= 1:
        return
    grid_items = experiment_items(grid, vault, questions, chosen.cfg.experiment.cluster)
    paper = (paper_reference(paper_dir(), experiment) or {}).get("frontends")  # Table 7's counts per frontend
    table = reader_grid(grid_items, paper)
    compared = paper is not None and table["paper correct"].notna().any()  # none on another number of questions
    write_table(table, tables / f"{chosen.name(experiment, 'population', 'dataset')}_readers",
                f"{experiment}: reader x frontend grid", f"Readers: {', '.join(sorted(grid_items['reader'].unique()))}. "
                f"Population: {chosen.wanted['population']}. Substring exact match (%)."
                + (f" Paper correct: {paper['source']}." if compared else ""))


def write_key_change(out: Tables, items: pd.DataFrame, by_arm: dict[str, Path]) -> None:
    """Table 12: the order control by key-change stratum, from the evidence traces."""
    if not {"cmc", "prior_read_refresh"} <= set(by_arm):
        return
    keys = {arm: {p["question_id"]: selected_keys(p) for p in read_bundle_jsonl(by_arm[arm], "evidence.jsonl")}
            for arm in ("cmc", "prior_read_refresh")}
    changed = {q: keys["cmc"][q] != keys["prior_read_refresh"][q] for q in keys["cmc"]}
    out.write(key_change_strata(items, changed, ["cmc", "prior_read_refresh"]), "_key_change",
              "order control by key-change stratum (keys from evidence traces)")


def write_figures(scored: SliceItems, figures: Path, stem: str) -> None:
    """Accuracy by length and against evidence tokens (when the reader counted them), and the
    depth curve when two or more depth caps were run (one capped view, like the synthetic sweep's cmc_depth6, is no curve)."""
    items, views, caption = scored.items, scored.views, scored.caption
    if token_slices(items["length"]):  # other slice labels (synthetic cells) are no length axis
        accuracy_by_length(items, views, figures / f"{stem}_by_length.png", caption)
    if items["input_tokens"].notna().all():  # an API reader counts no input tokens (no tokenizer here)
        accuracy_vs_tokens(items, views, figures / f"{stem}_tokens.png", caption)
    depths = {int(a.rsplit("depth", 1)[1]): a for a in items["arm"].unique() if "_depth" in a}
    if len(depths) >= 2:
        depth_curve(items, depths, figures / f"{stem}_depth.png", caption)


def tables_main(args: argparse.Namespace) -> int:
    """Every table and figure of one slice of the experiment, then the main table on stdout."""
    chosen = select_slice(args)
    experiment, exp = args.experiment, chosen.cfg.experiment
    stem = chosen.name(experiment, "population", "reader", "frontend", "dataset")
    adapter = instantiate_known(chosen.cfg.dataset)
    dataset = adapter.load()
    questions = {q.qid: q for q in dataset.questions}
    vault = LabelVault(adapter.load_labels)
    scored = describe(chosen, experiment, experiment_items(chosen.bundles, vault, questions, exp.cluster, dataset.histories))
    items, views, provenance = scored.items, scored.views, scored.provenance
    out = Tables(Path(args.out) / "tables", stem, experiment, provenance)

    main_table = view_table(items, views)
    out.write(main_table, "", "accuracy by view")
    out.write(accuracy(items, ["arm", "hop", "length"]).round(2), "_by_length", "by history length")
    out.write(strict_table(items), "_strict", "strict EM")
    by_arm = {read_manifest(b)["config"]["arm"]["name"]: b for b in chosen.bundles}
    write_contrasts(out, items, exp, by_arm, vault, questions, dataset.histories, args.n_boot)
    write_non_overflow(out, items)
    write_reader_grid(chosen, vault, questions, out.folder, experiment)
    write_extraction(out, items, views, grammar_reference(chosen, vault, questions, dataset.histories,
                                                          Path(args.bundles)))
    write_key_change(out, items, by_arm)
    if items["calls"].max() > 1:  # a multi-call method among the views
        out.write(cost_table(items, views), "_cost", "reader calls and tokens per question")
        out.write(outcome_table(items, by_arm), "_outcomes", "where each method's traces end, and how often right")
    out.write_untallied(generation_table({view: by_arm[view] for view in views if view in by_arm},
                               Path(args.bundles).parent / "scores" / experiment), "_generation",
              "generation cost per view (wall time from each run's sittings; engine and CPU flags from its bundle)")
    write_figures(scored, Path(args.out) / "figures", stem)
    print(provenance)
    print(main_table.to_markdown(index=False))
    return 0

