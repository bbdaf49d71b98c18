"""Build MQuAKE-MemStream from a CF-3k file (either released layout).

    python scripts/build_memstream.py --src CF3k-00000-of-00001.parquet --out datasets/mquake_memstream

All logic lives in cmc.sources.memstream_cases (read), memstream_builder (build) and
memstream_writer (write); this wrapper only parses arguments, so the tests exercise the same
code path users run.
"""
from __future__ import annotations

import argparse
import os
import sys
from pathlib import Path

ROOT = Path(__file__).resolve().parent.parent
sys.path.insert(0, str(ROOT))

from cmc.errors import DataError  # noqa: E402
from cmc.frontends.grammar import GrammarFrontend  # noqa: E402
from cmc.sources import memstream_builder as msb  # noqa: E402
from cmc.sources.memstream_cases import load_source  # noqa: E402
from cmc.sources.memstream_writer import write_outputs  # noqa: E402

DATA_DIR = Path(os.environ.get("CMC_DATA_DIR", ROOT.parent / "shared" / "data"))


def parse_args(argv: list[str] | None = None) -> argparse.Namespace:
    parser = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    parser.add_argument("--src", required=True, help="CF-3k cases: GitHub .json or hub .parquet")
    parser.add_argument("--out", default=str(ROOT / "datasets" / "mquake_memstream"), help="output folder")
    parser.add_argument("--cases", type=int, default=msb.DEFAULTS["cases"], help="first N cases (default 800)")
    parser.add_argument("--pool-size", type=int, default=msb.DEFAULTS["pool_size"], help="cases per pool (default 100)")
    parser.add_argument("--seed", type=int, default=msb.DEFAULTS["seed"], help="generator seed (default 20260907)")
    parser.add_argument("--sensitivity", action="store_true", help="also audit every case in the file")
    parser.add_argument("--require-pin", action="store_true", help="refuse any file but the pinned CF-3k")
    parser.add_argument("--templates", default=str(DATA_DIR / "mquake_templates" / "cloze_templates.json"),
                        help="MQuAKE cloze templates for the relation grammar")
    return parser.parse_args(argv)


def main(argv: list[str] | None = None) -> int:
    args = parse_args(argv)
    try:
        source = load_source(args.src, require_pin=args.require_pin)
        frontend = GrammarFrontend(args.templates)
        stream = msb.build(source.cases, frontend, n_cases=args.cases, pool_size=args.pool_size, seed=args.seed)
        sens = msb.sensitivity(source.cases, frontend, args.seed, args.pool_size) if args.sensitivity else None
        card = write_outputs(stream, source, frontend, args.out, sens)
    except DataError as exc:
        print(f"build_memstream: {exc}", file=sys.stderr)
        return 2
    pin = "pinned" if source.pinned else "UNPINNED"
    print(f"{args.out}: {card['counts']} ({pin} source {source.sha256[:12]})")
    return 0


if __name__ == "__main__":
    sys.exit(main())
