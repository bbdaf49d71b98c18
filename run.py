"""Hydra entry point: compose the config and hand it to the runner.

    python run.py stage=evidence arm=stale_closure frontend=grammar
    python run.py -m arm=cmc,fact_bm25,latest_state

Bad input (cmc.errors.DataError: a file, field or run that cannot be used) is reported as
one line on stderr with exit status 2; CMC_TRACEBACK=1 shows the traceback instead.
"""
import hydra
from omegaconf import DictConfig

from cmc.errors import report_data_errors
from cmc.runner import run


@hydra.main(version_base="1.3", config_path="conf", config_name="config")
def main(cfg: DictConfig) -> None:
    print(report_data_errors(lambda: run(cfg)))


if __name__ == "__main__":
    main()
