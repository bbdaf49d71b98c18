"""Replay a sealed bundle and report any mismatch (exit 1), e.g.

    python scripts/replay.py results/bundles/table1/<run> [dataset.path=/elsewhere/cr.parquet]
"""
import sys
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parent.parent))

from cmc.replay import replay  # noqa: E402

if __name__ == "__main__":
    if len(sys.argv) < 2:
        sys.exit(__doc__)
    report = replay(sys.argv[1], sys.argv[2:])
    print(f"{report.bundle}: seal {report.seal[:16]}, {report.checked} predictions checked")
    for line in report.mismatches:
        print(f"MISMATCH {line}")
    print("replay OK" if report.ok else "replay FAILED")
    sys.exit(0 if report.ok else 1)
