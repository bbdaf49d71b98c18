"""Label-free evidence first, labels after: `cmc-harness diagnostics` (`make diagnostics`) and
`cmc-harness retrieval` (`make retrieval`).

    cmc-harness diagnostics [--arms cmc,fact_bm25,...]
    cmc-harness retrieval [--population quick] [--reader NAME] [--no-dense]

diagnostics writes evidence packets for every deterministic arm, then (and only then) opens
the labels and tabulates size, truncation and gold presence per cell
(results/tables/evidence_diagnostics.{csv,md}).

retrieval: how far down the ranked arms' rankings the gold string and CMC's selected records
sit (recall at k), next to CMC's own selection, per hop class. Fact BM25's rankings and
CMC's selections come from the experiment's sealed bundles (`trace.ranked`, `trace.edges`);
labels open through the vault on CMC's bundle. The dense ranking (conf/arm/dense.yaml with
the configured embedder, offline MiniLM by default) has no bundle, so its packets are
computed here (fact vectors cached under .cache/embeddings). Writes
results/tables/retrieval[_<population>].{csv,md}.
"""
from __future__ import annotations

import argparse
from pathlib import Path

import pandas as pd

from analysis.diagnostics import cell_table, evidence_rows
from analysis.retrieval_curves import curve, question_rows, selection_rows
from analysis.tables import length_order
from cmc.evidence import select_all
from cmc.graph import build_memories
from common.configurable import instantiate_known
from common.errors import DataError
from common.io import atomic_write_text, read_jsonl
from harness.config import compose
from harness.packets import write_evidence
from harness.runs import Run, build_frontend
from provenance.bundle import read_bundle_jsonl, read_manifest, run_slice, verify_seal
from provenance.vault import LabelVault

DEFAULT_ARMS = ("cmc", "prior_read_refresh", "stale_closure", "stale_state", "fact_bm25", "fact_bm25_matched",
                "latest_state", "latest_state_full", "raw_suffix", "disjoint_random", "no_context",
                "cmc_depth1", "cmc_depth2", "cmc_depth3")


def diagnostics_arguments(parser: argparse.ArgumentParser) -> None:
    parser.add_argument("arms", nargs="*", default=list(DEFAULT_ARMS),
                        help="arm configs (default: every deterministic arm of Table 1 and the depth curve)")
    parser.add_argument("--override", action="append", default=[], metavar="KEY=VALUE",
                        help="a config override for every arm (e.g. population=quick, paths.results_dir=DIR)")


def diagnostics_main(args: argparse.Namespace) -> int:
    """Packets are written before the labels are opened, so no selection can have seen them."""
    configs = [compose(f"arm={arm}", *args.override) for arm in args.arms]
    adapter = instantiate_known(configs[0].dataset)
    dataset = adapter.load()
    memories = build_memories(dataset, build_frontend(configs[0].frontend))
    paths = [write_evidence(cfg, adapter.pin, (e.packet() for e in select_all(instantiate_known(cfg.arm), dataset, memories)))
             for cfg in configs]

    labels = adapter.load_labels()  # packets are on disk: labels may be opened now
    questions = {q.qid: q for q in dataset.questions}
    packets = [p for path in paths for p in read_jsonl(path)]
    rows = evidence_rows(packets, questions, dataset.histories, labels)
    lengths = length_order(q.length for q in dataset.questions)  # "6k" < "32k"; other labels as first seen
    table = cell_table(rows, lengths)

    out = Path(configs[0].paths.results_dir) / "tables"
    atomic_write_text(out / "evidence_diagnostics.csv", table.to_csv(index=False))
    pooled = (rows.groupby(["arm", "hop"], sort=False)
              .agg(n=("question_id", "size"), mean_chars=("chars", "mean"), truncated=("truncated", "sum"),
                   gold_present=("gold_present", "sum")).reset_index())
    text = ("# Evidence diagnostics (grammar frontend, 60,000-char budget)\n\n"
            "Per arm and hop, pooled over lengths:\n\n" + pooled.to_markdown(index=False, floatfmt=".1f")
            + "\n\nPer arm x hop x length cell:\n\n" + table.to_markdown(index=False, floatfmt=".1f") + "\n")
    atomic_write_text(out / "evidence_diagnostics.md", text)
    print(pooled.to_markdown(index=False, floatfmt=".1f"))
    print(f"\nfull table: {out / 'evidence_diagnostics.md'}")
    return 0


def slice_bundles(folder: Path, wanted: dict[str, str]) -> dict[str, Path]:
    """The sealed bundles of one slice (dataset, frontend, population, reader), by arm."""
    sealed = sorted(p for p in folder.iterdir() if (p / "SEAL").is_file()) if folder.is_dir() else []
    return {read_manifest(p)["config"]["arm"]["name"]: p for p in sealed if run_slice(p) == wanted}


def retrieval_arguments(parser: argparse.ArgumentParser) -> None:
    parser.add_argument("--experiment", default="table1")
    parser.add_argument("--population", default="all")
    parser.add_argument("--reader", help="the bundles' reader (default: the config's)")
    parser.add_argument("--bundles", type=Path, default=Path("results/bundles"))
    parser.add_argument("--out", type=Path, default=Path("results/tables"))
    parser.add_argument("--no-dense", action="store_true", help="skip the dense ranking (needs the embedder)")


def retrieval_rows(args: argparse.Namespace) -> tuple[pd.DataFrame, dict[str, Path], int, str]:
    """Recall rows of CMC's selection, fact BM25's ranking and (unless --no-dense) the dense
    ranking, the bundles they came from, the number of questions and the reader."""
    cfg = compose(f"experiment={args.experiment}", "arm=dense", f"population={args.population}")
    wanted = {"dataset": cfg.dataset.name, "frontend": cfg.frontend.name, "population": args.population,
              "reader": args.reader or cfg.reader.name}
    bundles = slice_bundles(args.bundles / args.experiment, wanted)
    if not {"cmc", "fact_bm25"} <= set(bundles):
        raise DataError(f"need sealed cmc and fact_bm25 bundles of {wanted} under {args.bundles / args.experiment}; "
                        f"found {sorted(bundles) or 'none'}")
    run = Run(cfg)
    questions, histories = {q.qid: q for q in run.dataset.questions}, run.dataset.histories
    labels = LabelVault(run.adapter.load_labels).open(bundles["cmc"])
    cmc = {p["question_id"]: p for p in read_bundle_jsonl(bundles["cmc"], "evidence.jsonl")}
    bm25 = read_bundle_jsonl(bundles["fact_bm25"], "evidence.jsonl")
    if sorted(p["question_id"] for p in bm25) != sorted(cmc):
        raise DataError(f"{bundles['fact_bm25'].name} and {bundles['cmc'].name} hold different questions")
    frames = [selection_rows("cmc", cmc.values(), questions, histories, labels),
              question_rows("fact_bm25", bm25, questions, histories, labels, cmc)]
    if not args.no_dense:  # the embedder's fact vectors are cached under .cache/embeddings by the arm itself
        # Computed here rather than through the evidence stage's cache (Run.packets): writing that cache's
        # config record fails for the dense arm (provenance.manifest.experiment_config on `embedder: ${embedder}`).
        wanted_questions = [questions[q] for q in cmc]
        dense = [e.packet() for e in select_all(instantiate_known(cfg.arm), run.dataset, run.memories, wanted_questions)]
        frames.append(question_rows(f"dense ({cfg.embedder.name})", dense, questions, histories, labels, cmc))
    return pd.concat(frames, ignore_index=True), bundles, len(cmc), wanted["reader"]


def retrieval_main(args: argparse.Namespace) -> int:
    """The recall-at-k curves, pooled and per hop, with the seals of the bundles behind them."""
    rows, bundles, n_questions, reader = retrieval_rows(args)
    table = pd.concat([curve(rows.assign(hop="all")), curve(rows)], ignore_index=True)
    table = table.astype(object).where(table.notna(), None)  # "--" in Markdown, empty in CSV
    seals = "; ".join(f"{arm} {verify_seal(bundles[arm])[:12]}" for arm in ("cmc", "fact_bm25"))
    stem = args.out / ("retrieval" + ("" if args.population == "all" else f"_{args.population}"))
    provenance = (f"Population: {args.population} ({n_questions} questions), reader {reader} (its bundles give "
                  f"the rankings and selections; no answer is scored here). Bundle seals: {seals}. gold_at_k: share of "
                  f"questions whose top-k ranked records hold a gold string (released normalization); cmc_records_recall: "
                  f"mean share of CMC's selected records in the top k; all_cmc_records: share of questions with all of "
                  f"them; k = selected: CMC's own selection.")
    atomic_write_text(stem.with_suffix(".csv"), table.to_csv(index=False))
    atomic_write_text(stem.with_suffix(".md"), f"## Retrieval at k: gold string and CMC's records in the ranked arms\n\n"
                      f"{provenance}\n\n{table.to_markdown(index=False, missingval='--')}\n")
    print(table[table["hop"] == "all"].to_markdown(index=False, missingval="--"))
    return 0
