"""Write results/REPORT.md from the generated tables (see scoring/narrative.py).

    python scripts/make_report.py [--tables results/tables] [--out results/REPORT.md]
"""
from __future__ import annotations

import argparse
import sys
from pathlib import Path

ROOT = Path(__file__).resolve().parent.parent
sys.path.insert(0, str(ROOT))

from cmc.errors import report_data_errors  # noqa: E402
from scoring.narrative import write_report  # noqa: E402


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--tables", default=str(ROOT / "results" / "tables"))
    parser.add_argument("--paper", default=str(ROOT / "datasets" / "paper"))
    parser.add_argument("--out", default=str(ROOT / "results" / "REPORT.md"))
    args = parser.parse_args()
    out = report_data_errors(lambda: write_report(Path(args.tables), Path(args.paper), Path(args.out)))
    print(f"wrote {out}")


if __name__ == "__main__":
    main()
