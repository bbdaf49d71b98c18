"""`cmc-harness view` (`make view`): a static HTML report of one sealed bundle, or two bundles of
the same questions.

    cmc-harness view BUNDLE [BUNDLE2] [--out results/view/NAME] [--data-dir DIR]

Writes OUT/index.html (questions with filters, accuracy with Wilson intervals, paired W/T/L
and disagreements for two bundles, retrieval curves for ranked arms) and OUT/q/<id>.html
(anchors, traversal graph, evidence records, reader input, output, gold). Opens from disk,
offline. Gold answers appear only for a bundle whose seal verifies.
"""
from __future__ import annotations

import argparse
import os
from pathlib import Path

from common.errors import DataError
from viewer.load import load_bundles
from viewer.write import write_report


def view_arguments(parser: argparse.ArgumentParser) -> None:
    parser.add_argument("bundles", nargs="+", type=Path, help="one bundle, or two bundles of the same questions")
    parser.add_argument("--out", type=Path, help="report folder (default: results/view/<bundle>[--<bundle2>])")
    parser.add_argument("--data-dir", type=Path, default=Path(os.environ.get("CMC_DATA_DIR", "../shared/data")),
                        help="where the bundles' data files lie (default: $CMC_DATA_DIR, else ../shared/data)")


def view_main(args: argparse.Namespace) -> int:
    """Check the arguments name bundle folders before anything is loaded, then write the pages."""
    if len(args.bundles) > 2:
        raise DataError(f"the viewer takes one or two bundles, got {len(args.bundles)}")
    for bundle in args.bundles:
        if not (bundle / "manifest.json").is_file():
            raise DataError(f"{bundle}: not a bundle folder (no manifest.json)")
    out = args.out or Path("results") / "view" / "--".join(b.resolve().name for b in args.bundles)
    path = write_report(load_bundles([b.resolve() for b in args.bundles], args.data_dir.resolve()), out)
    print(f"{path / 'index.html'}")
    return 0
