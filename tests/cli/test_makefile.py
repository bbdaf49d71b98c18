"""The Makefile's job targets call the command line (`$(VENV)/bin/cmc-harness ...`), and every
such recipe line parses: a subcommand's arguments against its parser, a run's overrides
composed and checked against the schemas (a multirun's sweeps at their first value). The
jobs themselves are smoke-tested in test_commands.py and test_tiny_pipeline.py."""
from __future__ import annotations

import re
import shlex
import subprocess

import pytest

from harness.cli import build_parser
from tests.conftest import ROOT, compose_config

JOB_TARGETS = ("evidence", "diagnostics", "retrieval", "screen", "bench", "bench-readers", "memstream", "table1",
               "tables", "frontends", "ports", "view", "synthetic", "llm-corpus", "llm-tables")
VARS = ["VENV=/nonexistent/venv", "EXP=table1", "BUNDLE=results/bundles/x/y", "SRC=cf3k.json", "QUICK=1"]


def recipe_commands(target: str) -> list[list[str]]:
    """The cmc-harness invocations `make -n TARGET` would run (nothing is executed)."""
    done = subprocess.run(["make", "-n", target, *VARS], cwd=ROOT, capture_output=True, text=True, timeout=60)
    assert done.returncode == 0, done.stderr
    assert "scripts/" not in re.sub(r"scripts/build_llamacpp\.sh", "", done.stdout), done.stdout
    return [shlex.split(line)[1:] for line in done.stdout.splitlines() if line.startswith("/nonexistent/venv/bin/cmc-harness ")]


def first_of_each_sweep(overrides: list[str]) -> list[str]:
    return [re.sub(r"=([^\[\]]*?),.*$", r"=\1", o) if not o.startswith("+") else o for o in overrides if o != "-m"]


@pytest.mark.parametrize("target", JOB_TARGETS)
def test_every_job_target_calls_the_command_line_with_arguments_it_accepts(target):
    commands = recipe_commands(target)
    assert commands, f"make {target} runs no cmc-harness command"
    for argv in commands:
        if argv[0] == "run":
            compose_config(*first_of_each_sweep(argv[1:]))
        else:
            assert build_parser(argv[0]).parse_args(argv).command == argv[0]


def test_make_help_lists_the_job_targets():
    done = subprocess.run(["make", "help"], cwd=ROOT, capture_output=True, text=True, timeout=60)
    listed = {line.split()[0] for line in done.stdout.splitlines() if line.strip()}
    assert set(JOB_TARGETS) <= listed


def test_llm_tables_builds_tables_of_the_frontends_its_runs_compose():
    """`tables --frontend NAME` finds bundles by the composed frontend name: a name typed in the
    Makefile that the runs' overrides do not compose would find no bundle after hours of runs."""
    commands = recipe_commands("llm-tables")
    ran = {compose_config(*first_of_each_sweep(argv[1:])).frontend.name for argv in commands if argv[0] == "run"}
    tabled = {argv[argv.index("--frontend") + 1] for argv in commands if argv[0] == "tables"}
    assert tabled == ran and {name.split("_")[0] for name in ran} == {"llm", "hybrid"}
