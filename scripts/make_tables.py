"""`make tables`: score an experiment's sealed bundles and write its tables and figures.

    python scripts/make_tables.py table1 [--population quick] [--reader NAME] [--frontend NAME]

One table holds the views (arms) of one dataset, frontend, population and reader: bundles
of other readers are never pooled into it. Tables go to results/tables/<experiment>*.{md,csv,tex}
(the stem names whatever differs from the experiment's defaults, e.g. table1_quick or
table1_qwen35_4b), figures to results/figures/. Each table names its reader, frontend,
population and the seals of the bundles behind it. With bundles of several readers or
frontends, <experiment>[_<population>]_readers.* is the reader x frontend grid (paper Table 2).
"""
from __future__ import annotations

import argparse
import sys
from pathlib import Path

ROOT = Path(__file__).resolve().parent.parent
sys.path.insert(0, str(ROOT))

import pandas as pd  # noqa: E402
from harness.config import compose  # noqa: E402
from cmc.errors import report_data_errors  # noqa: E402
from cmc.targets import instantiate_known  # noqa: E402

from cmc.bundle import read_bundle_jsonl, read_manifest, run_slice  # noqa: E402
from cmc.io import atomic_write_text, canonical_json  # noqa: E402
from cmc.vault import LabelVault  # noqa: E402
from scoring.coverage import coverage_table  # noqa: E402
from scoring.figures import accuracy_by_length, accuracy_vs_tokens, depth_curve  # noqa: E402
from scoring.paired import interaction_contrast  # noqa: E402
from scoring.tables import (accuracy, contrasts, experiment_items, key_change_strata, length_order,  # noqa: E402
                            reader_grid, selected_keys, selection_vs_reader, strict_table, view_table)


def write_table(frame: pd.DataFrame, stem: Path, title: str, provenance: str) -> None:
    atomic_write_text(stem.with_suffix(".csv"), frame.to_csv(index=False))
    atomic_write_text(stem.with_suffix(".md"), f"## {title}\n\n{provenance}\n\n{frame.to_markdown(index=False, missingval='--')}\n")
    atomic_write_text(stem.with_suffix(".tex"), f"% {title}\n% {provenance}\n" + frame.to_latex(index=False, na_rep="--"))


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("experiment")
    parser.add_argument("--bundles", default="results/bundles")
    parser.add_argument("--out", default="results")
    parser.add_argument("--n-boot", type=int, default=10_000)
    parser.add_argument("--population", default="all", help="use only bundles of this population")
    for key in ("reader", "frontend", "dataset"):
        parser.add_argument(f"--{key}", help=f"use only bundles of this {key} (default: the experiment's)")
    args = parser.parse_args()

    cfg = compose(f"experiment={args.experiment}", *([f"dataset={args.dataset}"] if args.dataset else []))
    defaults = {"dataset": cfg.dataset.name, "frontend": cfg.frontend.name, "population": "all",
                "reader": cfg.reader.name}
    wanted = {key: getattr(args, key) or default for key, default in defaults.items()}
    folder = Path(args.bundles) / args.experiment
    sealed = sorted(p for p in folder.iterdir() if (p / "SEAL").is_file()) if folder.is_dir() else []
    slices = {p: run_slice(p) for p in sealed}
    bundles = [p for p in sealed if slices[p] == wanted]  # one reader, frontend, ...: never pooled
    if not bundles:
        found = sorted({canonical_json(s) for s in slices.values()})
        sys.exit(f"no sealed bundles of {canonical_json(wanted)} under {folder}; found: {', '.join(found) or 'none'}")
    # Table names carry what differs from the experiment's defaults, so runs never overwrite each other's.
    def name(*keys: str) -> str:
        return args.experiment + "".join(f"_{wanted[k]}" for k in keys if wanted[k] != defaults[k])

    stem = name("population", "reader", "frontend", "dataset")
    adapter = instantiate_known(cfg.dataset)
    dataset = adapter.load()
    questions = {q.qid: q for q in dataset.questions}
    vault = LabelVault(adapter.load_labels)
    exp = cfg.experiment
    items = experiment_items(bundles, vault, questions, exp.cluster, dataset.histories)

    readers = ", ".join(sorted(items["reader"].unique()))
    seals = "; ".join(f"{arm} {seal[:12]}" for arm, seal in items.groupby("arm", sort=False)["seal"].first().items())
    population = read_manifest(bundles[0])["population"]
    provenance = (f"Reader: {readers}. Frontend: {wanted['frontend']}. Population: {population['name']} (n={items['question_id'].nunique()} "
                  f"questions per view). Substring exact match (%), Wilson 95% intervals. Bundle seals: {seals}.")
    unsealed = [v for v in exp.views if v not in set(items["arm"])]
    if unsealed:  # an interim table must say so wherever it is read
        provenance += f" PARTIAL: views not sealed yet: {', '.join(unsealed)}."
    tables, figures = Path(args.out) / "tables", Path(args.out) / "figures"
    views = [v for v in exp.views if v in set(items["arm"])] or list(dict.fromkeys(items["arm"]))

    main_table = view_table(items, views)
    write_table(main_table, tables / stem, f"{args.experiment}: accuracy by view", provenance)
    by_length = accuracy(items, ["arm", "hop", "length"]).round(2)
    write_table(by_length, tables / f"{stem}_by_length", f"{args.experiment}: by history length", provenance)
    write_table(strict_table(items), tables / f"{stem}_strict", f"{args.experiment}: strict EM", provenance)
    by_arm = {read_manifest(b)["config"]["arm"]["name"]: b for b in bundles}
    pairs = [list(p) for p in exp.preregistered.contrasts if {p[0], p[1]} <= set(items["arm"])]
    if pairs:
        paired = contrasts(items, pairs, pairs, by=exp.preregistered.by, n_boot=args.n_boot)
        write_table(paired, tables / f"{stem}_contrasts",
                    f"{args.experiment}: preregistered paired contrasts (points, query-cluster bootstrap "
                    f"{args.n_boot:,} replicates, cluster = {exp.cluster})", provenance)
        # Section 4.1: where A is right and B wrong, does B's evidence lack A's records, or the answer?
        evidence = {arm: read_bundle_jsonl(by_arm[arm], "evidence.jsonl") for arm in {a for pair in pairs for a in pair}}
        labels = vault.open(by_arm[pairs[0][0]])  # the views of one slice ask the same questions
        coverage = pd.concat([coverage_table(evidence, pairs, questions, dataset.histories, labels, items, hop)
                              for hop in ("sh", "mh")], ignore_index=True)
        write_table(coverage, tables / f"{stem}_coverage",
                    f"{args.experiment}: evidence coverage on items A answers and B misses (lacks_record: B's "
                    f"evidence lacks a record A selected; lacks_gold: it lacks every gold string)", provenance)

    if {"cmc", "latest_state_full", "stale_closure", "raw_history"} <= set(items["arm"]):
        lengths = length_order(items["length"])[:-1]  # appendix B.1 non-overflow population: all but the longest
        sub = accuracy(items[items["length"].isin(lengths)], ["arm", "hop"]).set_index(["arm", "hop"])
        rows = [{"hop": hop, **{arm: round(sub.loc[(arm, hop), "accuracy"], 2) for arm in
                                ("cmc", "latest_state_full", "stale_closure", "raw_history")},
                 "interaction": round(interaction_contrast(
                     cmc=sub.loc[("cmc", hop), "accuracy"], latest_state=sub.loc[("latest_state_full", hop), "accuracy"],
                     stale_closure=sub.loc[("stale_closure", hop), "accuracy"],
                     raw_history=sub.loc[("raw_history", hop), "accuracy"]), 2)} for hop in ("sh", "mh")]
        write_table(pd.DataFrame(rows), tables / f"{stem}_non_overflow",
                    f"{args.experiment}: non-overflow population ({', '.join(lengths)})", provenance)

    grid = [p for p in sealed if all(slices[p][k] == wanted[k] for k in ("dataset", "population"))]
    if len({(slices[p]["reader"], slices[p]["frontend"]) for p in grid}) > 1:  # Table 2: reader x frontend grid
        grid_items = experiment_items(grid, vault, questions, exp.cluster)
        write_table(reader_grid(grid_items), tables / f"{name('population', 'dataset')}_readers",
                    f"{args.experiment}: reader x frontend grid", f"Readers: {', '.join(sorted(grid_items['reader'].unique()))}. "
                    f"Population: {wanted['population']}. Substring exact match (%).")
    write_table(selection_vs_reader(items, views), tables / f"{stem}_selection",
                f"{args.experiment}: gold string in the evidence, and answers right with and without it", provenance)
    if {"cmc", "prior_read_refresh"} <= set(by_arm):  # Table 12: order control by key change
        keys = {arm: {p["question_id"]: selected_keys(p) for p in read_bundle_jsonl(by_arm[arm], "evidence.jsonl")}
                for arm in ("cmc", "prior_read_refresh")}
        changed = {q: keys["cmc"][q] != keys["prior_read_refresh"][q] for q in keys["cmc"]}
        write_table(key_change_strata(items, changed, ["cmc", "prior_read_refresh"]), tables / f"{stem}_key_change",
                    f"{args.experiment}: order control by key-change stratum (keys from evidence traces)", provenance)

    caption = f"{args.experiment}, reader {readers}, population {population['name']}"
    if unsealed:
        caption += f" (PARTIAL: {len(unsealed)} view(s) not sealed yet)"
    accuracy_by_length(items, views, figures / f"{stem}_by_length.png", caption)
    accuracy_vs_tokens(items, views, figures / f"{stem}_tokens.png", caption)
    depths = {int(a.rsplit("depth", 1)[1]): a for a in items["arm"].unique() if "_depth" in a}
    if depths:
        depth_curve(items, depths, figures / f"{stem}_depth.png", caption)
    print(provenance)
    print(main_table.to_markdown(index=False))


if __name__ == "__main__":
    report_data_errors(main)
