"""Replay a sealed bundle: rebuild its evidence and requests, check the seal, rescore, and
report any mismatch (exit 1). No model is loaded. Examples:

    python scripts/replay.py results/bundles/table1/<run>
    python scripts/replay.py results/bundles/table1/<run> dataset.path=/elsewhere/cr.parquet
"""
import argparse
import sys
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parent.parent))

from cmc.errors import report_data_errors  # noqa: E402
from harness.replay import replay  # noqa: E402

if __name__ == "__main__":
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("bundle", help="a sealed bundle folder")
    parser.add_argument("overrides", nargs="*", help="Hydra overrides for this machine (data or model paths)")
    args = parser.parse_args()
    report = report_data_errors(lambda: replay(args.bundle, args.overrides))
    print(f"{report.bundle}: seal {report.seal[:16]}, {report.checked} predictions checked")
    for line in report.mismatches:
        print(f"MISMATCH {line}")
    print("replay OK" if report.ok else "replay FAILED")
    sys.exit(0 if report.ok else 1)
