"""Every job of the command line over bundles the tiny reader seals (tests/readers/tiny_model.py):
a multirun through `cmc-harness run -m`, the same run through `python run.py`, then replay,
reseal, tables, view, retrieval, the screen's bound, token matching, regeneration and serve.
No expected text from the random model: outputs are compared across two code paths or
checked for shape and consistency."""
from __future__ import annotations

import json
import re
import shutil
import subprocess
import sys
import urllib.request
from pathlib import Path

import pandas as pd
import pytest

from harness.cli import main
from provenance.bundle import read_bundle_jsonl, verify_seal
from tests.cli.test_commands import CHECKOUT_FIRST
from tests.conftest import ROOT

pytestmark = pytest.mark.slow

ARMS = ("cmc", "fact_bm25")


def reader(model: Path) -> list[str]:
    return ["reader=local", f"reader.model.local_path={model}", "reader.dtype=float32"]


def run_overrides(tmp: Path, model: Path) -> list[str]:
    return ["experiment=table1", *reader(model), "population=quick",
            f"paths.results_dir={tmp / 'results'}", f"paths.cache_dir={tmp / 'cache'}"]


def bundle_of(tmp: Path, arm: str) -> Path:
    return tmp / "results" / "bundles" / "table1" / f"factconsolidation-grammar-quick-{arm}-local"


@pytest.fixture(scope="module")
def sealed(tmp_path_factory, tiny_model_dir) -> Path:
    """Two views sealed by one multirun of the console command, run from outside the checkout."""
    tmp = tmp_path_factory.mktemp("cli_pipeline")
    done = subprocess.run([sys.executable, "-m", "harness.cli", "run", "-m", f"arm={','.join(ARMS)}",
                           *run_overrides(tmp, tiny_model_dir), f"hydra.sweep.dir={tmp / 'multirun'}"],
                          cwd=tmp, env=CHECKOUT_FIRST, capture_output=True, text=True, timeout=900)
    assert done.returncode == 0, done.stderr[-3000:]
    return tmp


def test_the_multirun_seals_every_view(sealed):
    for arm in ARMS:
        assert len(verify_seal(bundle_of(sealed, arm))) == 64
        assert len(read_bundle_jsonl(bundle_of(sealed, arm), "predictions.jsonl")) == 8
    assert (sealed / "multirun" / "0" / "run.log").is_file()  # Hydra's job folders, where they were sent


def test_run_py_and_the_console_command_make_the_same_bundle(sealed, tiny_model_dir, tmp_path):
    done = subprocess.run([sys.executable, "run.py", "arm=cmc", *run_overrides(tmp_path, tiny_model_dir),
                           f"hydra.run.dir={tmp_path / 'h'}"], cwd=ROOT, capture_output=True, text=True, timeout=600)
    assert done.returncode == 0, done.stderr[-3000:]
    ours, theirs = bundle_of(sealed, "cmc"), bundle_of(tmp_path, "cmc")
    for name in ("evidence.jsonl", "requests.jsonl"):
        assert (ours / name).read_bytes() == (theirs / name).read_bytes(), name
    assert [p["raw"] for p in read_bundle_jsonl(ours, "predictions.jsonl")] == \
        [p["raw"] for p in read_bundle_jsonl(theirs, "predictions.jsonl")]


def test_replay_says_ok_and_fails_on_a_changed_rule(sealed, tiny_model_dir, capsys):
    bundle = str(bundle_of(sealed, "cmc"))
    assert main(["replay", bundle, f"reader.model.local_path={tiny_model_dir}"]) == 0
    assert "8 predictions checked" in capsys.readouterr().out
    assert main(["replay", bundle, f"reader.model.local_path={tiny_model_dir}", "arm.max_hops=1"]) == 1
    assert "MISMATCH evidence" in capsys.readouterr().out


def test_reseal_of_an_unchanged_bundle_keeps_its_seal(sealed, tiny_model_dir, tmp_path, capsys):
    shutil.copytree(sealed / "results", tmp_path / "results")
    copy = tmp_path / "results" / "bundles" / "table1" / bundle_of(sealed, "cmc").name
    before = verify_seal(copy)
    assert main(["reseal", str(copy), f"reader.model.local_path={tiny_model_dir}", f"paths.results_dir={tmp_path / 'results'}",
                 f"paths.cache_dir={tmp_path / 'cache'}"]) == 0
    assert verify_seal(copy) == before and f"{before[:16]} -> {before[:16]}" in capsys.readouterr().out


def test_tables_report_and_view(sealed, tmp_path, capsys):
    assert main(["tables", "table1", "--bundles", str(sealed / "results" / "bundles"), "--out", str(tmp_path),
                 "--population", "quick", "--reader", "local", "--n-boot", "100"]) == 0
    views = pd.read_csv(tmp_path / "tables" / "table1_quick_local.csv")
    assert list(views["view"]) == list(ARMS) and set(views["n"]) == {8}
    assert main(["view", *(str(bundle_of(sealed, arm)) for arm in ARMS), "--out", str(tmp_path / "view")]) == 0
    assert (tmp_path / "view" / "index.html").is_file() and len(list((tmp_path / "view" / "q").glob("*.html"))) == 8


def test_retrieval_and_the_screens_bound_read_the_sealed_views(sealed, tmp_path):
    bundles = str(sealed / "results" / "bundles")
    assert main(["retrieval", "--population", "quick", "--reader", "local", "--bundles", bundles,
                 "--out", str(tmp_path), "--no-dense"]) == 0
    curve = pd.read_csv(tmp_path / "retrieval_quick.csv")
    assert set(curve["arm"]) == {"cmc", "fact_bm25"} and set(curve["n"]) <= {4, 8}  # pooled 8, per hop 4
    assert main(["screen", "--out", str(tmp_path), "--bundles", bundles, "--population", "quick"]) == 0
    assert "## Least-favourable rescoring bound (multi-hop)" in (tmp_path / "label_screen.md").read_text()


def test_token_match_counts_both_arms_in_the_readers_tokens(tiny_model_dir, tmp_path):
    assert main(["token-match", *reader(tiny_model_dir), "population=quick", f"paths.results_dir={tmp_path}",
                 f"paths.cache_dir={tmp_path / 'cache'}"]) == 0
    table = pd.read_csv(tmp_path / "tables" / "disjoint_token_match_quick_local.csv")
    pooled = table[table["hop"] == "all"].iloc[0]
    assert pooled["n"] == 8 and pooled["max_abs_delta"] >= abs(pooled["mean_delta"])


def test_regenerating_a_sample_reproduces_the_sealed_answers(sealed, tmp_path, capsys):
    """The bundle's requests rebuilt and sent again in this environment: same inputs, same answers."""
    out = tmp_path / "regenerated.json"
    assert main(["regenerate-sample", str(bundle_of(sealed, "cmc")), "--max-input-tokens", "100000",
                 "--out", str(out)]) == 0
    (result,) = json.loads(out.read_text())["bundles"]
    assert result["sampled"] >= 1 and result["same_input_ids"] == result["same_raw"] == result["sampled"]


def test_serve_answers_on_the_port_it_prints(tiny_model_dir):
    server = subprocess.Popen([sys.executable, "-m", "harness.cli", "serve", "--model-dir", str(tiny_model_dir),
                               "--port", "0", "--dtype", "float32"], cwd=ROOT, env=CHECKOUT_FIRST,
                              stdout=subprocess.PIPE, stderr=subprocess.DEVNULL, text=True)
    try:
        line = server.stdout.readline()
        url = re.search(r"at (http://\S+)", line).group(1)
        with urllib.request.urlopen(f"{url}/models", timeout=30) as reply:
            models = json.loads(reply.read())
        assert [m["id"] for m in models["data"]] == [tiny_model_dir.name]
    finally:
        server.terminate()
        server.wait(timeout=30)
