"""Hydra entry point: compose the config and hand it to the runner.

    python run.py stage=evidence arm=stale_closure frontend=grammar
    python run.py -m arm=cmc,fact_bm25,latest_state

Bad input (cmc.errors.DataError: a file, field or run that cannot be used) is reported as
one line on stderr with exit status 2; CMC_TRACEBACK=1 shows the traceback instead. A
credential on the command line is refused before Hydra writes anything (pass it through
the environment: reader.base_url='${oc.env:MY_URL}').
"""
import sys

import hydra
from omegaconf import DictConfig

import harness.config  # noqa: F401  (registers the schemas and the `csv` resolver the configs use)
from cmc.errors import report_data_errors
from harness.stages import run
from cmc.secrets import refuse_secret_overrides, scrub_log_handlers


@hydra.main(version_base="1.3", config_path="conf", config_name="config")
def main(cfg: DictConfig) -> None:
    scrub_log_handlers()  # Hydra has set up its console and run.log handlers by now
    print(report_data_errors(lambda: run(cfg)))


if __name__ == "__main__":
    report_data_errors(lambda: refuse_secret_overrides(sys.argv[1:]))
    main()
