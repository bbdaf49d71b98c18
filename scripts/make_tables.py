"""`make tables`: score an experiment's sealed bundles and write its tables and figures.

    python scripts/make_tables.py table1 [--bundles results/bundles] [--out results]

Tables go to results/tables/<experiment>*.{md,csv,tex}, figures to results/figures/.
Each table names its reader(s), population and the seals of the bundles behind it.
"""
from __future__ import annotations

import argparse
import sys
from pathlib import Path

ROOT = Path(__file__).resolve().parent.parent
sys.path.insert(0, str(ROOT))

import pandas as pd  # noqa: E402
from hydra import compose, initialize_config_dir  # noqa: E402
from hydra.utils import instantiate  # noqa: E402

from cmc.bundle import read_bundle_jsonl, read_manifest  # noqa: E402
from cmc.io import atomic_write_text  # noqa: E402
from cmc.vault import LabelVault  # noqa: E402
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
    args = parser.parse_args()

    folder = Path(args.bundles) / args.experiment
    bundles = sorted(p for p in folder.iterdir() if (p / "SEAL").is_file()
                     and read_manifest(p)["population"]["name"] == args.population) if folder.is_dir() else []
    if not bundles:
        sys.exit(f"no sealed {args.population!r} bundles under {folder}")
    stem = args.experiment if args.population == "all" else f"{args.experiment}_{args.population}"
    manifest = read_manifest(bundles[0])
    with initialize_config_dir(config_dir=str(ROOT / "conf"), version_base="1.3"):
        cfg = compose("config", overrides=[f"experiment={args.experiment}",
                                           f"dataset={manifest['config']['dataset']['name']}"])
    adapter = instantiate(cfg.dataset)
    dataset = adapter.load()
    questions = {q.qid: q for q in dataset.questions}
    exp = cfg.experiment
    items = experiment_items(bundles, LabelVault(adapter.load_labels), questions, exp.cluster, dataset.histories)

    readers = ", ".join(sorted(items["reader"].unique()))
    seals = "; ".join(f"{arm} {seal[:12]}" for arm, seal in items.groupby("arm", sort=False)["seal"].first().items())
    population = read_manifest(bundles[0])["population"]
    provenance = (f"Reader: {readers}. Population: {population['name']} (n={items['question_id'].nunique()} "
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
    pairs = [list(p) for p in exp.preregistered.contrasts if {p[0], p[1]} <= set(items["arm"])]
    if pairs:
        paired = contrasts(items, pairs, pairs, by=exp.preregistered.by, n_boot=args.n_boot)
        write_table(paired, tables / f"{stem}_contrasts",
                    f"{args.experiment}: preregistered paired contrasts (points, query-cluster bootstrap "
                    f"{args.n_boot:,} replicates, cluster = {exp.cluster})", provenance)

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

    if items[["reader", "frontend"]].drop_duplicates().shape[0] > 1:  # Table 2: reader x frontend grid
        write_table(reader_grid(items), tables / f"{stem}_readers", f"{args.experiment}: reader x frontend grid",
                    provenance)
    write_table(selection_vs_reader(items, views), tables / f"{stem}_selection",
                f"{args.experiment}: gold string in the evidence, and answers right with and without it", provenance)
    by_arm = {read_manifest(b)["config"]["arm"]["name"]: b for b in bundles}
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
    main()
