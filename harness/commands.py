"""The bundle jobs of the command line (`cmc-harness replay | reseal | report`): thin argument
handling over harness/replay.py, harness/reseal.py and analysis/narrative.py, so the tests
of those modules exercise the code users run.

    cmc-harness replay results/bundles/table1/<run> [dataset.path=/elsewhere/cr.parquet]
    cmc-harness reseal results/bundles/ports/<run> [reader.n_threads=1]
    cmc-harness report [--tables results/tables] [--out results/REPORT.md]
"""
from __future__ import annotations

import argparse
from pathlib import Path

from common.locations import paper_dir


def replay_arguments(parser: argparse.ArgumentParser) -> None:
    parser.add_argument("bundle", help="a sealed bundle folder")
    parser.add_argument("overrides", nargs="*", help="Hydra overrides for this machine (data or model paths)")


def replay_main(args: argparse.Namespace) -> int:
    """Replay one bundle; no model is loaded. Exit status 1 when anything differs, so a
    script or CI can tell a stale bundle from a good one."""
    from harness.replay import replay

    report = replay(args.bundle, args.overrides)
    print(f"{report.bundle}: seal {report.seal[:16]}, {report.checked} predictions checked")
    for line in report.mismatches:
        print(f"MISMATCH {line}")
    print("replay OK" if report.ok else "replay FAILED")
    return 0 if report.ok else 1


def reseal_arguments(parser: argparse.ArgumentParser) -> None:
    parser.add_argument("bundle", help="a sealed bundle folder under results/bundles")
    parser.add_argument("overrides", nargs="*", help="Hydra overrides for this machine (data or model paths, threads)")


def reseal_main(args: argparse.Namespace) -> int:
    """For a bundle that no longer replays after a fix that changed what it records, not what
    its reader was asked: only requests the current code makes that the bundle lacks are sent."""
    from harness.reseal import reseal
    from provenance.bundle import verify_seal

    before = verify_seal(args.bundle)  # a SealError is a DataError: named, no traceback
    scores = reseal(args.bundle, args.overrides)
    print(f"{args.bundle}: seal {before[:16]} -> {verify_seal(args.bundle)[:16]}; scores in {scores}")
    return 0


def report_arguments(parser: argparse.ArgumentParser) -> None:
    parser.add_argument("--tables", type=Path, default=Path("results/tables"), help="the generated tables")
    parser.add_argument("--paper", type=Path, default=None,
                        help="the paper's reference numbers (default: datasets/paper, shipped with the package)")
    parser.add_argument("--out", type=Path, default=Path("results/REPORT.md"))


def report_main(args: argparse.Namespace) -> int:
    """Every number of the report comes from the tables (analysis/narrative.py)."""
    from analysis.narrative import write_report

    print(f"wrote {write_report(args.tables, args.paper or paper_dir(), args.out)}")
    return 0
