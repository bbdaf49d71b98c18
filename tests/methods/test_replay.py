"""Replaying a sealed method bundle re-executes the method over the bundle's own answers
(paper D.4). An honest bundle replays clean; one edited and sealed again (the seal proves
integrity, not authorship) fails with the mismatch that names what changed."""
from __future__ import annotations

import json
import re
from pathlib import Path
from typing import Callable

import pytest

from harness.replay import replay
from harness.stages import run
from provenance.bundle import read_bundle_jsonl, read_manifest, write_bundle
from tests.conftest import compose_config
from tests.methods.conftest import QIDS, bundle_path, run_overrides, scored, scores_path, scripted_reader
from tests.methods.scripted import ScriptedBackend
from tests.readers.faulty_server import FaultyServer

FILES = ("evidence.jsonl", "requests.jsonl", "predictions.jsonl")
Rows = dict[str, list[dict]]


@pytest.fixture(scope="module")
def sealed(tmp_path_factory: pytest.TempPathFactory, embeddings_dir: Path) -> tuple[Path, Path]:
    """A MeLLo run over the two questions, the scripted model answering; (bundle, scores)."""
    tmp = tmp_path_factory.mktemp("replay")
    server = FaultyServer(ScriptedBackend()).start()
    try:
        run(compose_config(*run_overrides(tmp, "mello", scripted_reader(server), embeddings_dir)))
    finally:
        server.stop()
    return bundle_path(tmp, "mello", "openai"), scores_path(tmp, "mello", "openai")


def test_a_sealed_bundle_scores_its_answers_and_replays_clean(sealed, embeddings_dir):
    bundle, scores = sealed
    evidence = read_bundle_jsonl(bundle, "evidence.jsonl")
    assert [(row["question_id"], row["answer"], len(row["calls"])) for row in evidence] == [
        (QIDS[0], "Belgium", 4), (QIDS[1], "pesäpallo", 2)]
    summary = json.loads((scores / "summary.json").read_text())
    assert summary["n"] == 2 and {hop: h["correct"] for hop, h in summary["by_hop"].items()} == {"mh": 1, "sh": 1}
    assert scored(scores) == [True, True]
    report = replay(bundle, [f"arm.cache_dir={embeddings_dir}"], scores_dir=scores)
    assert report.ok and report.checked == 2, report.mismatches


def resealed(bundle: Path, dest: Path, edit: Callable[[Rows], None]) -> Path:
    rows = {name: read_bundle_jsonl(bundle, name) for name in FILES}
    edit(rows)
    return write_bundle(dest, read_manifest(bundle), *(rows[name] for name in FILES))


def set_answer(rows: Rows) -> None:
    rows["evidence.jsonl"][0]["answer"] = "France"


def set_call_id(rows: Rows) -> None:
    rows["evidence.jsonl"][1]["calls"][0]["request_id"] = "0" * 64


def set_request_id(rows: Rows) -> None:
    rows["requests.jsonl"][3]["request_id"] = "0" * 64


def set_final_line(rows: Rows) -> None:  # the fourth call of question 0 wrote its final answer
    prediction = rows["predictions.jsonl"][3]
    assert "Final answer: Belgium" in prediction["raw"]
    prediction["raw"] = prediction["raw"].replace("Final answer: Belgium", "Final answer: France")


@pytest.mark.parametrize("edit, mismatches", [
    (set_answer, ["trace: 1 of 2 differ (first at row 0)"]),
    (set_call_id, ["trace: 1 of 2 differ (first at row 1)"]),
    (set_request_id, ["request id: 1 of 6 differ (first at row 3)"]),
    # the method now answers France: its trace and its score change; its calls do not
    (set_final_line, ["trace: 1 of 2 differ (first at row 0)", "score: 1 of 2 differ (first at row 0)"]),
], ids=lambda x: x.__name__ if callable(x) else None)
def test_an_edited_and_resealed_bundle_fails_replay_naming_what_changed(sealed, tmp_path, edit, mismatches,
                                                                      embeddings_dir):
    bundle, scores = sealed
    report = replay(resealed(bundle, tmp_path / bundle.name, edit), [f"arm.cache_dir={embeddings_dir}"], scores_dir=scores)
    assert report.mismatches == mismatches


def test_an_edited_answer_that_changes_the_methods_path_names_the_call_it_has_no_answer_for(sealed, tmp_path,
                                                                                          embeddings_dir):
    bundle, scores = sealed

    def tentative(rows: Rows) -> None:  # the first call's tentative answer: the next call's text changes
        prediction = rows["predictions.jsonl"][0]
        assert "Charles Dickens." in prediction["raw"]
        prediction["raw"] = prediction["raw"].replace("Charles Dickens.", "Charles Darwin.")

    report = replay(resealed(bundle, tmp_path / bundle.name, tentative), [f"arm.cache_dir={embeddings_dir}"],
                    scores_dir=scores)
    (mismatch,) = report.mismatches
    assert mismatch.startswith("calls: ") and "no stored answer for request " in mismatch
    missing = mismatch.split("no stored answer for request ")[1][:12]
    sealed_ids = [r["request_id"] for r in read_bundle_jsonl(bundle, "requests.jsonl")]
    assert len(missing) == 12 and not any(i.startswith(missing) for i in sealed_ids)


def test_the_viewer_shows_a_methods_answer_and_calls(sealed):
    """The question page scores the trace's answer, not the last call's text, and lists the
    calls in order with their outputs."""
    from tests.conftest import DATA_DIR
    from viewer.load import load_bundles
    from viewer.write import build_pages

    bundle, _ = sealed
    page = build_pages(load_bundles([bundle], DATA_DIR))[f"q/{QIDS[0]}.html"]
    evidence = read_bundle_jsonl(bundle, "evidence.jsonl")[0]
    steps = re.findall(r'<li><span class="chip">([a-z]+)</span>', page)
    assert steps == [call["step"] for call in evidence["calls"]] == ["answer"] * 4
    assert re.search(r'<pre class="out raw"><mark>Belgium</mark></pre>', page)  # the answer, gold marked
    assert "the trace ended: final_answer" in page


def test_make_tables_adds_cost_and_outcome_tables_for_a_method(sealed, tmp_path):
    import csv
    import subprocess
    import sys

    from tests.conftest import ROOT

    bundle, _ = sealed
    out = tmp_path / "out"
    done = subprocess.run([sys.executable, "-m", "harness.cli", "tables", "adhoc", "--bundles", str(bundle.parent.parent),
                           "--out", str(out), "--population", "m2", "--reader", "openai", "--n-boot", "100"],
                          cwd=ROOT, capture_output=True, text=True)
    assert done.returncode == 0, done.stderr[-2000:]
    stem = out / "tables" / "adhoc_m2_openai"
    cost = list(csv.DictReader(open(f"{stem}_cost.csv")))
    assert [(r["view"], r["calls/q"], r["max calls"]) for r in cost] == [("mello", "3.0", "4")]
    outcomes = list(csv.DictReader(open(f"{stem}_outcomes.csv")))
    assert sorted((r["hop"], r["outcome"], r["n"], r["correct"], r["steps"]) for r in outcomes) == [
        ("mh", "final_answer", "1", "1", "3"), ("sh", "final_answer", "1", "1", "1")]


@pytest.mark.parametrize("edit", [set_answer, set_final_line], ids=lambda f: f.__name__)
def test_scoring_an_edited_and_resealed_method_bundle_is_refused(sealed, tmp_path, embeddings_dir, edit):
    """stage=score re-executes the method over the bundle's own answers before any label is
    opened (the seal proves integrity, not authorship), sending nothing."""
    from provenance.bundle import SealError

    bundle, _ = sealed
    url = read_manifest(bundle)["config"]["reader"]["base_url"]  # the stopped server's: a send would fail
    reader = ("reader=openai", f"reader.base_url={url}", "reader.model=scripted", "reader.api_key_env=null",
              "reader.max_retries=0", "reader.concurrency=1")
    resealed(bundle, bundle_path(tmp_path, "mello", "openai"), edit)
    with pytest.raises(SealError, match=r"its evidence.jsonl differ from re-executing mello over its own answers"):
        run(compose_config(*run_overrides(tmp_path, "mello", reader, embeddings_dir, "stage=score")))
    assert not scores_path(tmp_path, "mello", "openai").exists()
