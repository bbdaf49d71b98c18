"""`make retrieval`: how far down the ranked arms' rankings the gold string and CMC's selected
records sit (recall at k), next to CMC's own selection, per hop class.

    python scripts/retrieval_diagnostics.py [--population quick] [--reader NAME] [--no-dense]

Fact BM25's rankings and CMC's selections come from the experiment's sealed bundles
(`trace.ranked`, `trace.edges`); labels open through the vault on CMC's bundle. The dense
ranking (conf/arm/dense.yaml with the configured embedder, offline MiniLM by default) has no
bundle, so its packets are computed here (fact vectors cached under .cache/embeddings).
Writes results/tables/retrieval[_<population>].{csv,md}.
"""
from __future__ import annotations

import argparse
import sys
from pathlib import Path

ROOT = Path(__file__).resolve().parent.parent
sys.path.insert(0, str(ROOT))

import pandas as pd  # noqa: E402

from cmc.bundle import read_bundle_jsonl, read_manifest, run_slice, verify_seal  # noqa: E402
from cmc.errors import DataError, report_data_errors  # noqa: E402
from cmc.io import atomic_write_text  # noqa: E402
from cmc.evidence import select_all  # noqa: E402
from harness.config import compose  # noqa: E402
from harness.runs import Run  # noqa: E402
from cmc.targets import instantiate_known  # noqa: E402
from cmc.vault import LabelVault  # noqa: E402
from scoring.retrieval import curve, question_rows, selection_rows  # noqa: E402


def slice_bundles(folder: Path, wanted: dict[str, str]) -> dict[str, Path]:
    """The sealed bundles of one slice (dataset, frontend, population, reader), by arm."""
    sealed = sorted(p for p in folder.iterdir() if (p / "SEAL").is_file()) if folder.is_dir() else []
    return {read_manifest(p)["config"]["arm"]["name"]: p for p in sealed if run_slice(p) == wanted}


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--experiment", default="table1")
    parser.add_argument("--population", default="all")
    parser.add_argument("--reader", help="the bundles' reader (default: the config's)")
    parser.add_argument("--bundles", type=Path, default=ROOT / "results" / "bundles")
    parser.add_argument("--out", type=Path, default=ROOT / "results" / "tables")
    parser.add_argument("--no-dense", action="store_true", help="skip the dense ranking (needs the embedder)")
    args = parser.parse_args()
    cfg = compose(f"experiment={args.experiment}", "arm=dense", f"population={args.population}")
    wanted = {"dataset": cfg.dataset.name, "frontend": cfg.frontend.name, "population": args.population,
              "reader": args.reader or cfg.reader.name}
    bundles = slice_bundles(args.bundles / args.experiment, wanted)
    if not {"cmc", "fact_bm25"} <= set(bundles):
        raise DataError(f"need sealed cmc and fact_bm25 bundles of {wanted} under {args.bundles / args.experiment}; "
                        f"found {sorted(bundles) or 'none'}")
    run = Run(cfg)
    questions = {q.qid: q for q in run.dataset.questions}
    histories = run.dataset.histories
    labels = LabelVault(run.adapter.load_labels).open(bundles["cmc"])
    cmc = {p["question_id"]: p for p in read_bundle_jsonl(bundles["cmc"], "evidence.jsonl")}
    bm25 = [p for p in read_bundle_jsonl(bundles["fact_bm25"], "evidence.jsonl")]
    if sorted(p["question_id"] for p in bm25) != sorted(cmc):
        raise DataError(f"{bundles['fact_bm25'].name} and {bundles['cmc'].name} hold different questions")
    frames = [selection_rows("cmc", cmc.values(), questions, histories, labels),
              question_rows("fact_bm25", bm25, questions, histories, labels, cmc)]
    if not args.no_dense:  # the embedder's fact vectors are cached under .cache/embeddings by the arm itself
        # Computed here rather than through the evidence stage's cache (Run.packets): writing that cache's
        # config record fails for the dense arm (cmc.manifest.experiment_config on `embedder: ${embedder}`).
        wanted_questions = [questions[q] for q in cmc]
        dense = [e.packet() for e in select_all(instantiate_known(cfg.arm), run.dataset, run.memories, wanted_questions)]
        frames.append(question_rows(f"dense ({cfg.embedder.name})", dense, questions, histories, labels, cmc))
    rows = pd.concat(frames, ignore_index=True)
    table = pd.concat([curve(rows.assign(hop="all")), curve(rows)], ignore_index=True)
    table = table.astype(object).where(table.notna(), None)  # "--" in Markdown, empty in CSV
    seals = "; ".join(f"{arm} {verify_seal(bundles[arm])[:12]}" for arm in ("cmc", "fact_bm25"))
    stem = args.out / ("retrieval" + ("" if args.population == "all" else f"_{args.population}"))
    provenance = (f"Population: {args.population} ({len(cmc)} questions), reader {wanted['reader']} (its bundles give "
                  f"the rankings and selections; no answer is scored here). Bundle seals: {seals}. gold_at_k: share of "
                  f"questions whose top-k ranked records hold a gold string (released normalization); cmc_records_recall: "
                  f"mean share of CMC's selected records in the top k; all_cmc_records: share of questions with all of "
                  f"them; k = selected: CMC's own selection.")
    atomic_write_text(stem.with_suffix(".csv"), table.to_csv(index=False))
    atomic_write_text(stem.with_suffix(".md"), f"## Retrieval at k: gold string and CMC's records in the ranked arms\n\n"
                      f"{provenance}\n\n{table.to_markdown(index=False, missingval='--')}\n")
    print(table[table["hop"] == "all"].to_markdown(index=False, missingval="--"))


if __name__ == "__main__":
    report_data_errors(main)
