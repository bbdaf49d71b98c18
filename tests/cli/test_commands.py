"""`cmc-harness`: every subcommand answers --help, reports bad input as one line (exit 2),
and the light jobs run end to end on the real data without a reader."""
from __future__ import annotations

import os
import subprocess
import sys
from pathlib import Path

import pandas as pd
import pytest

from harness.cli import COMMANDS, build_parser, main
from tests.conftest import ROOT

CLI = [sys.executable, "-m", "harness.cli"]
CHECKOUT_FIRST = {**os.environ, "PYTHONPATH": str(ROOT)}  # this checkout's code from any working directory


def cli(*args: str, cwd: Path = ROOT, timeout: int = 300) -> subprocess.CompletedProcess:
    return subprocess.run([*CLI, *args], cwd=cwd, capture_output=True, text=True, timeout=timeout, env=CHECKOUT_FIRST)


def one_line_error(done: subprocess.CompletedProcess) -> str:
    """The exit status is 2 and stderr is a single `cmc: error:` line, no traceback."""
    assert done.returncode == 2, (done.returncode, done.stdout[-1000:], done.stderr[-2000:])
    lines = done.stderr.strip().splitlines()
    assert len(lines) == 1 and lines[0].startswith("cmc: error: "), done.stderr[-2000:]
    return lines[0]


@pytest.mark.parametrize("name", sorted(set(COMMANDS) - {"run"}))
def test_every_subcommand_has_help_naming_itself(name, capsys):
    with pytest.raises(SystemExit) as done:
        main([name, "--help"])
    assert done.value.code == 0
    assert capsys.readouterr().out.startswith(f"usage: cmc-harness {name} ")
    assert callable(COMMANDS[name].function(name, "main"))


def test_the_top_level_help_lists_every_subcommand(capsys):
    with pytest.raises(SystemExit):
        main(["--help"])
    listed = capsys.readouterr().out
    assert all(f"\n    {name}" in listed for name in COMMANDS)


def test_run_help_is_hydras_over_the_same_config():
    done = cli("run", "--help", timeout=120)
    assert done.returncode == 0 and "== Configuration groups ==" in done.stdout
    assert "arm: " in done.stdout and "reader: " in done.stdout


def test_an_unknown_subcommand_is_refused_by_argparse(capsys):
    with pytest.raises(SystemExit) as done:
        main(["tabels"])
    assert done.value.code == 2 and "invalid choice: 'tabels'" in capsys.readouterr().err


@pytest.mark.parametrize("args, names", [
    (["view", "no/such/bundle"], "no/such/bundle: not a bundle folder"),
    (["replay", "no/such/bundle"], "no/such/bundle"),
    (["reseal", "no/such/bundle"], "no/such/bundle"),
    (["tables", "nosuch"], "Could not find 'experiment/nosuch'"),
    (["tables", "table1", "--bundles", "no/such/dir"], "no sealed bundles"),
    (["token-match", "arm.max_hops=x"], "config: "),
    (["bench", "--histories", "factconsolidation_1m"], "factconsolidation_1m not in"),
    (["bench-readers", "--engines", "fp64"], "--engines: unknown fp64"),
    (["retrieval", "--bundles", "no/such/dir", "--no-dense"], "need sealed cmc and fact_bm25 bundles"),
    (["synthetic-report", "--bundles", "no/such/dir"], "no sealed bundles"),
    (["frontend-report"], "no frozen extraction under results/extractions"),
    (["build-memstream", "--src", "no/such/cf3k.json", "--out", "{tmp}/out"], "no/such/cf3k.json"),
    (["serve", "--reader", "no_such_reader"], "no_such_reader"),
])
def test_bad_input_is_one_line_naming_it(tmp_path, monkeypatch, capsys, args, names):
    """In this process for speed (the next test checks a real process the same way)."""
    monkeypatch.chdir(tmp_path)
    with pytest.raises(SystemExit) as done:
        main([a.replace("{tmp}", str(tmp_path)) for a in args])
    err = capsys.readouterr().err.strip().splitlines()
    assert done.value.code == 2 and len(err) == 1 and err[0].startswith("cmc: error: ") and names in err[0], err
    assert not (tmp_path / "results").exists() and not (tmp_path / "out").exists()


def test_a_real_process_reports_bad_input_as_one_line(tmp_path):
    assert "no/such/bundle: not a bundle folder" in one_line_error(cli("view", "no/such/bundle", cwd=tmp_path))


def test_bench_runs_a_small_measurement_and_both_reads_agree():
    """`make bench` with a small option set: the indexed read and the naive scan are timed on
    the same questions, and the job fails if their selections ever differ."""
    done = cli("bench", "--histories", "factconsolidation_6k", "--read-history", "factconsolidation_6k",
               "--questions", "3", "--repeats", "2")
    assert done.returncode == 0, done.stderr[-2000:]
    assert "| factconsolidation_6k |" in done.stdout and "over 3 questions" in done.stdout
    assert "speed-up of the indexed read over the naive scan" in done.stdout


def test_diagnostics_tabulates_the_asked_arms(tmp_path, dataset):
    done = cli("diagnostics", "cmc", "no_context", "--override", f"paths.results_dir={tmp_path}")
    assert done.returncode == 0, done.stderr[-2000:]
    table = pd.read_csv(tmp_path / "tables" / "evidence_diagnostics.csv")
    assert set(table["arm"]) == {"cmc", "no_context"}
    by_arm = table.groupby("arm")["n"].sum()
    assert (by_arm == len(dataset.questions)).all()
    assert table.loc[table["arm"] == "no_context", "gold_present"].sum() == 0  # no evidence, no gold
    assert table.loc[table["arm"] == "cmc", "gold_present"].sum() > 0


def test_screen_writes_its_tables_where_asked(tmp_path):
    done = cli("screen", "--out", str(tmp_path))
    assert done.returncode == 0, done.stderr[-2000:]
    flags = pd.read_csv(tmp_path / "label_screen.csv")
    assert len(flags) == 800 and set(flags["hop"]) == {"sh", "mh"}
    rows = [[cell.strip() for cell in line.strip("|").split("|")]
            for line in (tmp_path / "label_screen.md").read_text().splitlines() if line.startswith(("| sh ", "| mh "))]
    from_md = {row[0]: (int(row[1]), int(row[2])) for row in rows[:2]}  # the counts table comes first
    assert from_md == {hop: (int((flags["hop"] == hop).sum()), int(flags[flags["hop"] == hop]["flagged"].sum()))
                       for hop in ("sh", "mh")}


def test_report_from_the_committed_tables_equals_the_committed_report(tmp_path):
    """The same narrative through the command line as through analysis.narrative (tests/scoring)."""
    done = cli("report", "--out", str(tmp_path / "REPORT.md"))
    assert done.returncode == 0, done.stderr[-2000:]
    assert (tmp_path / "REPORT.md").read_text() == (ROOT / "results" / "REPORT.md").read_text()


def test_python_m_serve_is_an_alias_of_the_subcommand(capsys):
    """`python -m readers.serve` keeps working, with the same arguments."""
    from readers.serve import main as serve_main

    with pytest.raises(SystemExit):
        serve_main(["--help"])
    alias = capsys.readouterr().out
    with pytest.raises(SystemExit):
        build_parser("serve").parse_args(["serve", "--help"])
    ours = capsys.readouterr().out
    options = ("--model-dir", "--reader", "--host", "--port", "--served-model-name", "--dtype")
    assert all(o in alias and o in ours for o in options)
