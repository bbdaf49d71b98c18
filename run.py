"""Hydra entry point, kept for `python run.py ...`; the same as `cmc-harness run ...`
(harness/hydra_app.py holds the logic, harness/cli.py the other jobs).

    python run.py stage=evidence arm=stale_closure frontend=grammar
    python run.py -m arm=cmc,fact_bm25,latest_state
"""
import sys

from harness.hydra_app import main

if __name__ == "__main__":
    main(sys.argv[1:])
