"""Re-seal a sealed bundle in place under the current code, from its own answers (see
harness/reseal.py): only requests the current code makes that the bundle lacks are sent.
For a bundle that no longer replays after a fix that changed what it records, not what its
reader was asked. Examples:

    python scripts/reseal.py results/bundles/ports/<run>
    python scripts/reseal.py results/bundles/ports/<run> reader.n_threads=1
"""
import argparse
import sys
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parent.parent))

from cmc.bundle import verify_seal  # noqa: E402
from cmc.errors import report_data_errors  # noqa: E402
from harness.reseal import reseal  # noqa: E402

if __name__ == "__main__":
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("bundle", help="a sealed bundle folder under results/bundles")
    parser.add_argument("overrides", nargs="*", help="Hydra overrides for this machine (data or model paths, threads)")
    args = parser.parse_args()

    def reseal_and_say() -> str:
        before = verify_seal(args.bundle)  # a SealError is a DataError: named, no traceback
        scores = reseal(args.bundle, args.overrides)
        return f"{args.bundle}: seal {before[:16]} -> {verify_seal(args.bundle)[:16]}; scores in {scores}"

    print(report_data_errors(reseal_and_say))
