"""`make diagnostics`: write evidence packets for every deterministic arm, then (and only
then) open the labels and tabulate size, truncation and gold presence per cell.

    python scripts/evidence_diagnostics.py [arm ...]
"""
from __future__ import annotations

import sys
from pathlib import Path

ROOT = Path(__file__).resolve().parent.parent
sys.path.insert(0, str(ROOT))

from harness.config import compose  # noqa: E402
from cmc.targets import instantiate_known  # noqa: E402

from cmc.io import atomic_write_text, read_jsonl  # noqa: E402
from cmc.evidence import select_all  # noqa: E402
from cmc.graph import build_memories  # noqa: E402
from harness.evidence import write_evidence  # noqa: E402
from scoring.diagnostics import cell_table, evidence_rows  # noqa: E402
from scoring.tables import length_order  # noqa: E402

DEFAULT_ARMS = ["cmc", "prior_read_refresh", "stale_closure", "stale_state", "fact_bm25", "fact_bm25_matched",
                "latest_state", "latest_state_full", "raw_suffix", "disjoint_random", "no_context",
                "cmc_depth1", "cmc_depth2", "cmc_depth3"]


def main(arms: list[str]) -> None:
    configs = [compose(f"arm={arm}") for arm in arms]
    adapter = instantiate_known(configs[0].dataset)
    dataset = adapter.load()
    memories = build_memories(dataset, instantiate_known(configs[0].frontend))
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


if __name__ == "__main__":
    main(sys.argv[1:] or DEFAULT_ARMS)
