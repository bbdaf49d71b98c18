"""`cmc-harness run` (and `python run.py`): compose the config with Hydra and hand it to the
stage driver. Hydra owns the command line here (overrides, `-m` multirun, `--help`,
`--cfg job`), so the arguments are passed through untouched rather than parsed twice.

Bad input (common.errors.DataError: a file, field or run that cannot be used) is reported as
one line on stderr with exit status 2; CMC_TRACEBACK=1 shows the traceback instead. A
credential on the command line is refused before Hydra writes anything (pass it through
the environment: reader.base_url='${oc.env:MY_URL}').
"""
from __future__ import annotations

import sys
from typing import Sequence

import hydra
from omegaconf import DictConfig

import harness.config  # noqa: F401  (registers the schemas and the `csv` resolver the configs use)
from common.errors import report_data_errors
from common.locations import conf_dir
from common.secrets import refuse_secret_overrides, scrub_log_handlers
from harness.stages import run


# An absolute config path: the checkout's conf/ or the installed wheel's copy (common/locations.py),
# whichever file this is imported from.
@hydra.main(version_base="1.3", config_path=str(conf_dir()), config_name="config")
def _hydra_main(cfg: DictConfig) -> None:
    scrub_log_handlers()  # Hydra has set up its console and run.log handlers by now
    print(report_data_errors(lambda: run(cfg)))


def main(argv: Sequence[str], prog: str = "run.py") -> None:
    """Run Hydra over `argv` as if they were this program's own arguments. Hydra reads
    sys.argv, so it is set here; `prog` names the program in Hydra's help and errors."""
    report_data_errors(lambda: refuse_secret_overrides(list(argv)))
    sys.argv = [prog, *argv]
    _hydra_main()
