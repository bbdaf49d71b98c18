"""`cmc-harness`: one command line for every user job (docs/cli.md lists them).

    cmc-harness run [-m] [override ...]        the Hydra run, exactly as `python run.py ...`
    cmc-harness replay BUNDLE [override ...]   rebuild, check and rescore a sealed bundle
    cmc-harness tables table1 --population quick
    cmc-harness COMMAND --help

This module only dispatches. Each job's arguments and logic live in a module next to the
code it drives (COMMANDS names it), imported only when that job is asked for, so `--help`
and a job that reads tables never pay for torch. The dispatcher sits above the stage driver
and the viewer (tests/test_layers.py ranks it on its own floor): the one place that may
import both. Every job reports bad input (common.errors.DataError) as one line on stderr with
exit status 2 (CMC_TRACEBACK=1 shows the traceback).
"""
from __future__ import annotations

import argparse
import importlib
import sys
from dataclasses import dataclass
from typing import Any, Sequence

from hydra.errors import HydraException
from omegaconf.errors import OmegaConfBaseException

from common.errors import DataError, report_data_errors


@dataclass(frozen=True)
class Command:
    """Where a job's `<name>_arguments(parser)` and `<name>_main(args)` live, and its help line."""

    module: str
    help: str

    def function(self, name: str, part: str) -> Any:
        """The job's `arguments` or `main` function, its module imported now (not before)."""
        return getattr(importlib.import_module(self.module), f"{name.replace('-', '_')}_{part}")


COMMANDS: dict[str, Command] = {
    "run": Command("harness.hydra_app", "one Hydra run (evidence, prepare, generate, seal, score): the same "
                                        "overrides as `python run.py`, `-m` for a multirun"),
    "replay": Command("harness.commands", "rebuild a sealed bundle's evidence and requests, check its seal, rescore"),
    "reseal": Command("harness.commands", "seal a bundle again under the current code from its own answers"),
    "store-import": Command("harness.store_import", "the answers of sealed bundles into this machine's prediction "
                                                    "store (an identical request is then not sent again)"),
    "regenerate-sample": Command("harness.regenerate", "regenerate a stratified sample of sealed requests in this "
                                                       "environment and compare the answers"),
    "tables": Command("harness.make_tables", "score an experiment's sealed bundles: tables and figures"),
    "report": Command("harness.commands", "write results/REPORT.md from the generated tables"),
    "synthetic-report": Command("harness.synthetic_report", "evidence recall and accuracy of the synthetic sweep"),
    "frontend-report": Command("harness.frontend_report", "frozen LLM/hybrid extractions against the grammar "
                                                          "frontend, and CMC's evidence with each"),
    "view": Command("viewer.command", "static HTML report of one sealed bundle, or two side by side"),
    "diagnostics": Command("harness.diagnose", "evidence size, truncation and gold presence per arm x cell"),
    "retrieval": Command("harness.diagnose", "recall at k of the gold string and CMC's records in the ranked arms"),
    "token-match": Command("harness.token_match", "the disjoint-random control's token matching in the reader's tokens"),
    "screen": Command("harness.screen_runs", "label screen of appendix B.3"),
    "bench": Command("harness.bench", "compile time per history and CMC read latency against a naive scan"),
    "bench-readers": Command("harness.bench_readers", "every CPU engine of one reader side by side"),
    "serve": Command("readers.serve", "serve a local model over the OpenAI-compatible API"),
    "build-memstream": Command("harness.build_memstream", "build MQuAKE-MemStream from a CF-3k file"),
}


def build_parser(chosen: str | None = None) -> argparse.ArgumentParser:
    """Every job as a subcommand; only the chosen one's module is imported for its arguments."""
    parser = argparse.ArgumentParser(prog="cmc-harness", description=__doc__.split("\n\n")[0],
                                     formatter_class=argparse.RawDescriptionHelpFormatter,
                                     epilog="`cmc-harness COMMAND --help` describes one job.")
    jobs = parser.add_subparsers(dest="command", required=True, metavar="COMMAND")
    for name, command in COMMANDS.items():
        sub = jobs.add_parser(name, help=command.help, description=command.help)
        if name == chosen and name != "run":
            module = importlib.import_module(command.module)
            sub.description = (module.__doc__ or command.help).strip()
            sub.formatter_class = argparse.RawDescriptionHelpFormatter
            command.function(name, "arguments")(sub)
    return parser


def main(argv: Sequence[str] | None = None) -> int:
    """Dispatch to one job; its return value is the exit status (None: 0)."""
    argv = list(sys.argv[1:] if argv is None else argv)
    if argv and argv[0] == "run":  # Hydra parses its own command line (overrides, -m, --help, --cfg)
        from harness.hydra_app import main as hydra_main

        hydra_main(argv[1:], prog="cmc-harness run")
        return 0
    args = build_parser(argv[0] if argv else None).parse_args(argv)
    job = COMMANDS[args.command].function(args.command, "main")
    return report_data_errors(lambda: config_errors_as_data_errors(job, args)) or 0


def config_errors_as_data_errors(job: Any, args: argparse.Namespace) -> int | None:
    """A job that composes a config with a bad override or group option (`tables nosuch`,
    `token-match arm=typo`) gets Hydra's or OmegaConf's error as one DataError line, as
    `run` does, instead of a traceback."""
    try:
        return job(args)
    except (HydraException, OmegaConfBaseException) as exc:
        raise DataError("config: " + " ".join(line.strip() for line in str(exc).splitlines() if line.strip())) from exc


if __name__ == "__main__":
    sys.exit(main())
