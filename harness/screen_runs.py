"""`cmc-harness screen` (`make screen`): the label screen of appendix B.3 on the real
FactConsolidation graph.

    cmc-harness screen [--out results/tables] [--arm cmc] [--frontend grammar]
                       [--bundles results/bundles --experiment table1 --population all]

Computes CMC's selection and every selected key's current and earlier values first (no
labels), then opens the labels through the dataset adapter and flags reference strings
found as earlier values of a reachable key but absent from the selected current values
(analysis/screen.py defines both comparisons). Writes label_screen.md (counts by hop next
to the paper's 7 + 26, flagged question ids) and label_screen.csv (every question).

With --bundles, the least-favourable rescoring bound (multi-hop, CMC against each other
arm) is added from the experiment's sealed bundles of one population (default `all`).
"""
from __future__ import annotations

import argparse
import time
from pathlib import Path
from typing import Any

import pandas as pd

from analysis.screen import bound_table, flag_counts, screen, screen_evidence
from analysis.tables import experiment_items
from cmc.graph import build_memories
from common.configurable import instantiate_known
from common.io import atomic_write_text
from harness.config import compose
from harness.runs import build_frontend
from provenance.bundle import read_manifest
from provenance.vault import LabelVault

PAPER = {"sh": 7, "mh": 26, "all": 33}  # appendix B.3


def bounds_section(bundles_dir: Path, experiment: str, population: str, adapter: Any, questions: dict[str, Any],
                   flagged_mh: dict[str, list[str]], arm: str) -> str:
    """The least-favourable rescoring bound from the experiment's sealed bundles, as Markdown."""
    folder = bundles_dir / experiment
    bundles = sorted(p for p in folder.iterdir() if (p / "SEAL").is_file()
                     and read_manifest(p)["population"]["name"] == population) if folder.is_dir() else []
    if not bundles:
        return f"\nNo sealed `{population}` bundles under {folder}: rescoring bound not computed.\n"
    items = experiment_items(bundles, LabelVault(adapter.load_labels), questions)
    controls = [a for a in dict.fromkeys(items["arm"]) if a != arm]
    if arm not in set(items["arm"]) or not controls:
        return f"\nBundles under {folder} lack `{arm}` or a control: rescoring bound not computed.\n"
    table = pd.concat([bound_table(items, arm, controls, ids, hop="mh").assign(screen=name)
                       for name, ids in flagged_mh.items()], ignore_index=True)
    return ("\n## Least-favourable rescoring bound (multi-hop)\n\n"
            "Every flagged item scored wrong for CMC and right for the control "
            "(paper: (313-85-26)/400 = 50.50 over prior read + refresh, (313-83-26)/400 = 51.00 over fact BM25). "
            f"Readers: {', '.join(sorted(items['reader'].unique()))}; population `{population}`.\n\n"
            f"{table.to_markdown(index=False)}\n")


def screen_arguments(parser: argparse.ArgumentParser) -> None:
    parser.add_argument("--out", default="results/tables")
    parser.add_argument("--arm", default="cmc", help="the CMC arm config whose traversal defines the selection")
    parser.add_argument("--frontend", default="grammar")
    parser.add_argument("--bundles", default=None, help="add the rescoring bound from this bundles folder")
    parser.add_argument("--experiment", default="table1")
    parser.add_argument("--population", default="all", help="bundles of this population for the bound")


def screen_main(args: argparse.Namespace) -> int:
    """CMC's selection first (no labels), then the labels, then the flags and counts."""
    start = time.perf_counter()
    cfg = compose(f"arm={args.arm}", f"frontend={args.frontend}")
    adapter = instantiate_known(cfg.dataset)
    dataset = adapter.load()
    memories = build_memories(dataset, build_frontend(cfg.frontend))
    arm = instantiate_known(cfg.arm)
    evidence = screen_evidence(dataset.questions, memories, arm.max_hops)  # label-free: CMC's closure

    labels = adapter.load_labels()  # the evidence exists: labels may be opened now
    flags = screen(evidence, labels)
    counts = flag_counts(flags)
    counts["paper"] = counts["hop"].map(PAPER)
    elapsed = time.perf_counter() - start

    flagged = flags[flags["flagged"] | flags["flagged_substring"]]
    text = (f"# Label screen (appendix B.3)\n\nDataset {dataset.name}, frontend {cfg.frontend.name}, "
            f"selection `{arm.name}` (max_hops={arm.max_hops}); {len(flags)} questions, {elapsed:.1f} s.\n\n"
            "`flagged`: a normalized gold string equals an earlier value of a selected key and equals no "
            "selected current value. `flagged_substring`: a gold is a substring of an earlier value and of no "
            "selected current value. `paper`: the counts of appendix B.3. These flags need manual adjudication; "
            "every item stays in the official scores.\n\n"
            f"{counts.to_markdown(index=False)}\n\n## Flagged questions\n\n"
            f"{flagged.drop(columns=['selected_keys']).to_markdown(index=False)}\n")
    if args.bundles:
        questions = {q.qid: q for q in dataset.questions}
        mh = {name: flags[(flags["hop"] == "mh") & flags[name]]["question_id"].tolist()
              for name in ("flagged", "flagged_substring")}
        text += bounds_section(Path(args.bundles), args.experiment, args.population, adapter, questions, mh, arm.name)
    out = Path(args.out)
    atomic_write_text(out / "label_screen.md", text)
    atomic_write_text(out / "label_screen.csv", flags.to_csv(index=False))
    print(counts.to_markdown(index=False))
    print("\nflagged (equality):", ", ".join(flags[flags["flagged"]]["question_id"]))
    only_sub = flags[flags["flagged_substring"] & ~flags["flagged"]]["question_id"].tolist()
    only_eq = flags[flags["flagged"] & ~flags["flagged_substring"]]["question_id"].tolist()
    print(f"equality only: {only_eq or 'none'}; substring only: {only_sub or 'none'}")
    print(f"\nwrote {out / 'label_screen.md'} and {out / 'label_screen.csv'}")
    return 0

