"""`cmc-harness build-memstream` (`make memstream`): build MQuAKE-MemStream from a CF-3k file
(either released layout).

    cmc-harness build-memstream --src CF3k-00000-of-00001.parquet --out datasets/mquake_memstream

All logic lives in sources.memstream_cases (read), memstream_builder (build) and
memstream_writer (write); this job only parses arguments, so the tests exercise the same
code path users run. It sits in the driver because it joins a source with the grammar
frontend, which the method's dataset adapters may not import (tests/test_layers.py).
"""
from __future__ import annotations

import argparse
import os
from pathlib import Path

from cmc.frontends.grammar import GrammarFrontend
from sources import memstream_builder as msb
from sources.memstream_cases import load_source
from sources.memstream_writer import write_outputs


def build_memstream_arguments(parser: argparse.ArgumentParser) -> None:
    data_dir = Path(os.environ.get("CMC_DATA_DIR", "../shared/data"))  # as conf/paths/default.yaml
    parser.add_argument("--src", required=True, help="CF-3k cases: GitHub .json or hub .parquet")
    parser.add_argument("--out", default="datasets/mquake_memstream", help="output folder")
    parser.add_argument("--cases", type=int, default=msb.DEFAULTS["cases"], help="first N cases (default 800)")
    parser.add_argument("--pool-size", type=int, default=msb.DEFAULTS["pool_size"], help="cases per pool (default 100)")
    parser.add_argument("--seed", type=int, default=msb.DEFAULTS["seed"], help="generator seed (default 20260907)")
    parser.add_argument("--sensitivity", action="store_true", help="also audit every case in the file")
    parser.add_argument("--require-pin", action="store_true", help="refuse any file but the pinned CF-3k")
    parser.add_argument("--templates", default=str(data_dir / "mquake_templates" / "cloze_templates.json"),
                        help="MQuAKE cloze templates for the relation grammar (default under $CMC_DATA_DIR)")


def build_memstream_main(args: argparse.Namespace) -> int:
    """Read, build, audit (with --sensitivity) and write; a bad source is a DataError."""
    source = load_source(args.src, require_pin=args.require_pin)
    frontend = GrammarFrontend(args.templates)
    stream = msb.build(source.cases, frontend, n_cases=args.cases, pool_size=args.pool_size, seed=args.seed)
    sens = msb.sensitivity(source.cases, frontend, args.seed, args.pool_size) if args.sensitivity else None
    card = write_outputs(stream, source, frontend, args.out, sens)
    pin = "pinned" if source.pinned else "UNPINNED"
    print(f"{args.out}: {card['counts']} ({pin} source {source.sha256[:12]})")
    return 0
