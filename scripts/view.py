"""`make view`: a static HTML report of one sealed bundle, or two bundles of the same questions.

    python scripts/view.py BUNDLE [BUNDLE2] [--out results/view/NAME] [--data-dir DIR]

Writes OUT/index.html (questions with filters, accuracy with Wilson intervals, paired W/T/L
and disagreements for two bundles, retrieval curves for ranked arms) and OUT/q/<id>.html
(anchors, traversal graph, evidence records, reader input, output, gold). Opens from disk,
offline. Gold answers appear only for a bundle whose seal verifies.
"""
from __future__ import annotations

import argparse
import os
import sys
from pathlib import Path

ROOT = Path(__file__).resolve().parent.parent
sys.path.insert(0, str(ROOT))

from cmc.errors import DataError, report_data_errors  # noqa: E402
from viewer.load import load_bundles  # noqa: E402
from viewer.write import write_report  # noqa: E402


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("bundles", nargs="+", type=Path, help="one bundle, or two bundles of the same questions")
    parser.add_argument("--out", type=Path, help="report folder (default: results/view/<bundle>[--<bundle2>])")
    parser.add_argument("--data-dir", type=Path, default=Path(os.environ.get("CMC_DATA_DIR", ROOT.parent / "shared" / "data")),
                        help="where the bundles' data files lie (default: $CMC_DATA_DIR)")
    args = parser.parse_args()
    if len(args.bundles) > 2:
        raise DataError(f"the viewer takes one or two bundles, got {len(args.bundles)}")
    for bundle in args.bundles:
        if not (bundle / "manifest.json").is_file():
            raise DataError(f"{bundle}: not a bundle folder (no manifest.json)")
    out = args.out or ROOT / "results" / "view" / "--".join(b.resolve().name for b in args.bundles)
    path = write_report(load_bundles([b.resolve() for b in args.bundles], args.data_dir.resolve()), out)
    print(f"{path / 'index.html'}")


if __name__ == "__main__":
    report_data_errors(main)
