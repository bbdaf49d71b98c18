"""A method run killed (SIGKILL) in the middle of a question, or stopped by a failed call,
resumes where it stopped: the rerun re-executes the method over the answers it kept, sends
only the calls never answered, and seals the bundle an uninterrupted run seals, byte for
byte."""
from __future__ import annotations

import os
import signal
import subprocess
import sys
import time
from pathlib import Path

import pytest

from common.errors import DataError
from common.io import read_jsonl
from harness.stages import run
from provenance.bundle import read_bundle_jsonl
from tests.conftest import ROOT, compose_config
from tests.methods.conftest import bundle_files, bundle_path, run_overrides, scripted_reader
from tests.methods.scripted import ScriptedBackend
from tests.readers.faulty_server import FaultyServer

ANSWERED_BEFORE_KILL = 2  # question 0 takes 4 calls: killed while its third is in flight


def generate_until_blocked(overrides: list[str], backend: ScriptedBackend, log: Path) -> None:
    """run.py stage=generate in a subprocess, killed with SIGKILL once the scripted model
    holds its next call unanswered."""
    with log.open("w") as err:
        process = subprocess.Popen([sys.executable, "run.py", "stage=generate", *overrides,
                                    f"hydra.run.dir={log.parent / 'hydra'}"], cwd=ROOT, stdout=err, stderr=err)
        try:
            deadline = time.monotonic() + 300
            while not backend.reached.wait(0.5):
                assert process.poll() is None, f"run.py ended before it was killed:\n{log.read_text()[-3000:]}"
                assert time.monotonic() < deadline, "the run never reached the blocked call"
            os.kill(process.pid, signal.SIGKILL)
        finally:
            if process.poll() is None:
                process.kill()
            process.wait(timeout=60)
    assert process.returncode == -signal.SIGKILL


@pytest.mark.slow
def test_a_run_killed_mid_question_resumes_and_seals_the_uninterrupted_bundle(tmp_path, embeddings_dir):
    backend = ScriptedBackend(block_after=ANSWERED_BEFORE_KILL)
    server = FaultyServer(backend).start()
    try:
        killed = run_overrides(tmp_path / "killed", "mello", scripted_reader(server), embeddings_dir)
        generate_until_blocked(killed, backend, tmp_path / "killed.log")
        assert sum(backend.answered.values()) == ANSWERED_BEFORE_KILL and sum(server.counts.values()) == 3
        (journal,) = (tmp_path / "killed" / "results" / "work").rglob("predictions.jsonl")
        assert len(list(read_jsonl(journal))) == ANSWERED_BEFORE_KILL  # kept before the kill
        backend.block_after, backend.abandoned = None, True
        backend.release.set()  # the killed call's handler gives up (its client is gone)

        run(compose_config(*killed))  # the rerun: generate, seal, score
        assert set(backend.answered.values()) == {1} and sum(backend.answered.values()) == 6, \
            "an answered call was sent again"
        assert sorted(server.counts.values()) == [1] * 5 + [2]  # only the call in flight at the kill, again
        resumed = bundle_files(bundle_path(tmp_path / "killed", "mello", "openai"))

        backend.answered.clear()
        run(compose_config(*run_overrides(tmp_path / "whole", "mello", scripted_reader(server), embeddings_dir)))
        assert sum(backend.answered.values()) == 6
        whole = bundle_files(bundle_path(tmp_path / "whole", "mello", "openai"))
    finally:
        backend.release.set()
        server.stop()
    assert set(resumed) == set(whole) and len(whole) >= 5
    assert resumed == whole


def test_a_failed_call_ends_its_question_and_a_rerun_sends_only_what_is_missing(tmp_path, embeddings_dir):
    backend = ScriptedBackend()
    server = FaultyServer(backend).start()
    server.inject("ok", "ok", "500")  # question 0's third call fails (no retries configured)
    overrides = run_overrides(tmp_path, "mello", scripted_reader(server), embeddings_dir)
    try:
        with pytest.raises(DataError, match=r"mh_6k_no0: call 'answer' failed: .*nothing was sealed"):
            run(compose_config(*overrides))
        assert sum(backend.answered.values()) == 4  # question 1 still ran; question 0 stopped at the failure
        assert not bundle_path(tmp_path, "mello", "openai").exists()
        run(compose_config(*overrides))
    finally:
        server.stop()
    assert set(backend.answered.values()) == {1} and sum(backend.answered.values()) == 6
    assert sorted(server.counts.values()) == [1] * 5 + [2]  # the failed call, sent again; then the one after it
    evidence = read_bundle_jsonl(bundle_path(tmp_path, "mello", "openai"), "evidence.jsonl")
    assert [row["answer"] for row in evidence] == ["Belgium", "pesäpallo"]
