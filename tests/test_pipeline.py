"""The whole pipeline through a real (tiny, locally trained) reader: evidence -> generate ->
seal -> score, replay, crash-resume, and tables over the resulting bundles."""
from __future__ import annotations

import _thread
import csv
import hashlib
import json
import os
import shutil
import signal
import sqlite3
import subprocess
import sys
import time
from pathlib import Path

import pytest
from hydra.utils import instantiate

from analysis.diagnostics import gold_in_text
from cmc.evidence import rebuild_text
from common.errors import DataError
from generation.service import generation_order
from generation.sittings import read_sittings
from harness.generate import run_generate, run_prepare
from harness.packets import evidence_path
from harness.replay import replay
from harness.runs import Run
from harness.stages import run
from provenance.bundle import SealError, read_bundle_jsonl, verify_seal
from readers.hf import HFReader
from readers.models import HubModel
from readers.serve import ReaderBackend
from tests.conftest import ROOT, compose_config
from tests.readers.faulty_server import FaultyServer

pytestmark = pytest.mark.slow


POPULATION = ["population=quick", "population.name=t40", "population.per_cell=5", "population.lengths=null"]


def overrides(tmp: Path, model: Path, *extra: str) -> list[str]:
    """The tiny reader over a test population of 40 questions (5 per hop x length cell), in
    float32 (`auto` would pick by CPU; the in-process server comparison below is float32)."""
    return ["reader=local", f"reader.model.local_path={model}", "reader.dtype=float32", *POPULATION,
            f"paths.results_dir={tmp / 'results'}", f"paths.cache_dir={tmp / 'cache'}", *extra]


def bundle_bytes(bundle: Path) -> dict[str, bytes]:
    return {p.name: p.read_bytes() for p in sorted(bundle.iterdir())}


@pytest.fixture(scope="module")
def finished(tmp_path_factory, tiny_model_dir):
    """One uninterrupted run of CMC over the quick population."""
    tmp = tmp_path_factory.mktemp("clean")
    cfg = compose_config(*overrides(tmp, tiny_model_dir, "arm=cmc"))
    scores = run(cfg)
    bundle = tmp / "results" / "bundles" / "adhoc" / "factconsolidation-grammar-t40-cmc-local"
    return tmp, bundle, scores


def test_full_run_leaves_a_sealed_bundle_and_scores(finished):
    tmp, bundle, scores = finished
    assert len(verify_seal(bundle)) == 64
    predictions = [json.loads(line) for line in (bundle / "predictions.jsonl").read_text().splitlines()]
    assert len(predictions) == 40 and all(p["raw"] is not None and p["error"] is None for p in predictions)
    summary = json.loads((scores / "summary.json").read_text())
    assert summary["n"] == 40 and set(summary["by_hop"]) == {"sh", "mh"}
    manifest = json.loads((bundle / "manifest.json").read_text())
    assert manifest["population"]["n"] == 40 and manifest["reader_pin"]["backend"] == "transformers"
    assert "paths" not in manifest["config"]


def test_replay_rebuilds_evidence_requests_and_scores(finished, tiny_model_dir):
    tmp, bundle, scores = finished
    report = replay(bundle, [f"reader.model.local_path={tiny_model_dir}"], scores_dir=scores)
    assert report.ok, report.mismatches
    assert report.checked == 40


def test_replay_reports_a_changed_evidence_rule(finished, tiny_model_dir):
    tmp, bundle, scores = finished
    report = replay(bundle, [f"reader.model.local_path={tiny_model_dir}", "arm.max_hops=1"], scores_dir=scores)
    assert not report.ok and any(m.startswith("evidence") for m in report.mismatches)


def test_replay_script_exit_status_says_ok_or_mismatch(finished, tiny_model_dir):
    _, bundle, _ = finished
    script = [sys.executable, "-m", "harness.cli", "replay", str(bundle), f"reader.model.local_path={tiny_model_dir}"]
    ok = subprocess.run(script, cwd=ROOT, capture_output=True, text=True)
    assert ok.returncode == 0 and "40 predictions checked" in ok.stdout and "replay OK" in ok.stdout
    changed = subprocess.run([*script, "arm.max_hops=1"], cwd=ROOT, capture_output=True, text=True)
    assert changed.returncode == 1 and "MISMATCH evidence" in changed.stdout and "replay FAILED" in changed.stdout


def test_rerun_sends_no_request_and_keeps_the_seal(finished, tiny_model_dir, caplog):
    tmp, bundle, scores = finished
    before, timings = bundle_bytes(bundle), (scores / "timings.json").read_bytes()
    with caplog.at_level("INFO", logger="harness"):
        run(compose_config(*overrides(tmp, tiny_model_dir, "arm=cmc")))
    assert "nothing to generate" in caplog.text and "evidence and requests reproduce" in caplog.text
    assert bundle_bytes(bundle) == before
    assert (scores / "timings.json").read_bytes() == timings, "the rerun kept the generating run's timings"
    assert not (tmp / "results" / "work" / "adhoc" / bundle.name).exists(), "sealing retires the work folder"


def test_rerun_with_a_changed_rule_refuses_the_stale_bundle(finished, tiny_model_dir):
    tmp, bundle, _ = finished
    before = bundle_bytes(bundle)
    with pytest.raises(SealError, match=r"config \(arm.max_hops\), evidence.jsonl"):
        run(compose_config(*overrides(tmp, tiny_model_dir, "arm=cmc", "arm.max_hops=1")))
    assert bundle_bytes(bundle) == before


def test_a_seal_check_recomputes_evidence_instead_of_trusting_the_file(finished, tiny_model_dir):
    """stage=seal over a sealed bundle: packets left on disk by other code or another config
    neither fail a bundle this code reproduces nor stand in for the evidence, and the check,
    being read-only, leaves them as they are."""
    tmp, bundle, _ = finished
    cfg = compose_config(*overrides(tmp, tiny_model_dir, "arm=cmc", "stage=seal"))
    path = evidence_path(cfg)
    rows = [json.loads(line) for line in path.read_text().splitlines()]
    stale = "".join(json.dumps({**row, "positions": []}) + "\n" for row in rows)
    path.write_text(stale)
    run(cfg)  # no SealError: the check recomputed the packets in memory
    assert path.read_text() == stale


def test_packets_of_another_budget_are_recomputed_not_reused(finished, tiny_model_dir):
    tmp, _, _ = finished
    run(compose_config(*overrides(tmp, tiny_model_dir, "arm=cmc", "stage=evidence")))
    full = Run(compose_config(*overrides(tmp, tiny_model_dir, "arm=cmc"))).packets()
    small = Run(compose_config(*overrides(tmp, tiny_model_dir, "arm=cmc", "read.budget_chars=300"))).packets()
    assert max(p["chars"] for p in full) > 300 >= max(p["chars"] for p in small)
    assert any(p["truncated"] for p in small) and not any(p["truncated"] for p in full)


def _stored(cache: Path) -> int:
    try:
        with sqlite3.connect(cache / "predictions.sqlite", timeout=1) as db:
            return db.execute("SELECT COUNT(*) FROM predictions").fetchone()[0]
    except sqlite3.OperationalError:
        return 0


def rerun(cfg, caplog) -> str:
    """The run again, in this process (as `run.py` runs it, without a second import of
    torch and transformers); returns what it logged about generation."""
    caplog.clear()
    with caplog.at_level("INFO", logger="generation.service"):
        run(cfg)
    return caplog.text


def test_sigkill_mid_generation_then_rerun_is_byte_identical_and_repeats_nothing(finished, tmp_path, tiny_model_dir):
    _, clean_bundle, _ = finished
    args = [sys.executable, "run.py", *overrides(tmp_path, tiny_model_dir, "arm=cmc"), f"hydra.run.dir={tmp_path / 'h'}"]
    env = {**os.environ, "PYTHONUNBUFFERED": "1"}
    victim = subprocess.Popen(args, cwd=ROOT, env=env, stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL)
    deadline = time.monotonic() + 300
    while _stored(tmp_path / "cache") < 3 and time.monotonic() < deadline and victim.poll() is None:
        time.sleep(0.05)
    victim.send_signal(signal.SIGKILL)
    victim.wait()
    stored = _stored(tmp_path / "cache")
    assert 0 < stored < 40, f"the kill should land mid-generation (stored {stored})"
    bundle = tmp_path / "results" / "bundles" / "adhoc" / clean_bundle.name
    assert not bundle.exists()

    resumed = subprocess.run(args, cwd=ROOT, env=env, capture_output=True, text=True, check=True)
    assert f"{40 - stored} requests to generate ({stored} already stored)" in resumed.stdout + resumed.stderr
    assert bundle_bytes(bundle) == bundle_bytes(clean_bundle)


def test_a_run_resumes_on_another_machine_from_its_committed_journal(finished, tmp_path, tiny_model_dir, caplog):
    """Generate part of a run, then lose the machine-local store (a new machine): the work
    folder (manifest + journal), which a long run commits, is enough to finish it without
    sending a journaled request again, and the bundle is byte-identical to the clean one."""
    _, clean_bundle, _ = finished
    cfg = compose_config(*overrides(tmp_path, tiny_model_dir, "arm=cmc"))
    partial = Run(cfg)
    run_prepare(cfg, partial)  # the manifest freezes all 40 questions
    del partial.requests[16:]  # generation stops after 16 of them
    run_generate(cfg, partial)
    shutil.rmtree(tmp_path / "cache")
    journal = tmp_path / "results" / "work" / "adhoc" / clean_bundle.name / "predictions.jsonl"
    journaled = len(set(r.id for r in partial.requests))
    assert len(journal.read_text().splitlines()) == journaled > 0

    assert f"{40 - journaled} requests to generate ({journaled} already stored)" in rerun(cfg, caplog)
    assert bundle_bytes(tmp_path / "results" / "bundles" / "adhoc" / clean_bundle.name) == bundle_bytes(clean_bundle)
    assert not journal.parent.exists()
    # both sittings' generation time reaches the scores, one line each, outside the bundle
    sittings = read_sittings(tmp_path / "results" / "scores" / "adhoc" / clean_bundle.name / "sittings.jsonl")
    assert [s["requests"] for s in sittings] == [journaled, 40 - journaled]
    assert all(s["seconds"] >= 0 and s["prefill_tokens_total"] > 0 for s in sittings)


@pytest.mark.parametrize("where", ["ctrl_c", "reader_failure"])
def test_an_interrupt_stops_the_queue_and_the_run_resumes(finished, tmp_path, tiny_model_dir, where, caplog):
    """Ctrl-C (in the main thread, as a terminal delivers it) or a reader that raises, at the
    3rd request: the queued requests are not sent (a thread pool given all of them would send
    them and drop the answers), the answer in flight is kept when there is one, and the rerun
    sends only the rest and seals the same bundle."""
    _, clean_bundle, _ = finished
    cfg = compose_config(*overrides(tmp_path, tiny_model_dir, "arm=cmc"))
    interrupted = Run(cfg)
    generate, calls = interrupted.reader.generate, []

    def generate_and_interrupt_at_the_third(request):
        calls.append(request.id)
        if len(calls) == 3:
            if where == "reader_failure":
                raise KeyboardInterrupt
            _thread.interrupt_main()  # raised in the main thread while it waits for this answer
        return generate(request)

    interrupted.reader.generate = generate_and_interrupt_at_the_third
    # interrupt_main does nothing while SIGINT is ignored, as it is inherited by a job started
    # in the background of a non-interactive shell (a CI runner): install Python's own handler
    previous = signal.signal(signal.SIGINT, signal.default_int_handler)
    try:
        with pytest.raises(KeyboardInterrupt):
            run_generate(cfg, interrupted)
    finally:
        signal.signal(signal.SIGINT, previous)
    kept = 3 if where == "ctrl_c" else 2
    assert calls == [r.id for r in generation_order({r.id: r for r in interrupted.requests}.values())][:3], \
        "requests queued behind the interrupt were sent, or not in generation order"
    work = tmp_path / "results" / "work" / "adhoc" / clean_bundle.name
    assert len((work / "predictions.jsonl").read_text().splitlines()) == kept
    assert [s["requests"] for s in read_sittings(work / "sittings.jsonl")] == [kept]

    assert f"{40 - kept} requests to generate ({kept} already stored)" in rerun(cfg, caplog)
    assert bundle_bytes(tmp_path / "results" / "bundles" / "adhoc" / clean_bundle.name) == bundle_bytes(clean_bundle)


def test_generation_order_sends_a_historys_shared_evidence_together(tmp_path, tiny_model_dir):
    """Latest state gives every question of a history the same evidence; in question order
    the single-hop and multi-hop questions of one history are apart, in generation order
    each history's requests are contiguous (so its long prefix is computed once)."""
    run_ = Run(compose_config(*overrides(tmp_path, tiny_model_dir, "arm=latest_state")))
    history = {r.id: q.history_id for q, r in zip(run_.questions, run_.requests)}
    in_question_order = [q.history_id for q in run_.questions]
    ordered = [history[r.id] for r in generation_order(run_.requests)]

    def groups(ids: list[str]) -> int:
        return sum(1 for i, h in enumerate(ids) if i == 0 or ids[i - 1] != h)

    assert sorted(ordered) == sorted(in_question_order)
    assert groups(in_question_order) == 8 and groups(ordered) == 4


def test_four_workers_over_http_give_the_local_readers_answers(finished, tmp_path, tiny_model_dir):
    """The runner's windowed pool with the `openai` reader (4 requests in flight) against
    this repo's server wrapping the same tiny model: every question is answered once, and
    each answer is the one the local reader gave in process."""
    _, clean_bundle, _ = finished
    local = HFReader("local", HubModel("tiny", "local", local_path=str(tiny_model_dir)), dtype="float32",
                     max_new_tokens=32)
    server = FaultyServer(ReaderBackend(local, model_id="tiny-served")).start()
    try:
        cfg = compose_config("reader=openai", f"reader.base_url={server.url}", "reader.model=tiny-served",
                             "reader.max_new_tokens=32", "reader.concurrency=4", *POPULATION,
                             f"paths.results_dir={tmp_path / 'results'}", f"paths.cache_dir={tmp_path / 'cache'}",
                             "arm=cmc")
        run(cfg)
    finally:
        server.stop()
    bundle = tmp_path / "results" / "bundles" / "adhoc" / "factconsolidation-grammar-t40-cmc-openai"
    served = {p["question_id"]: p for p in read_bundle_jsonl(bundle, "predictions.jsonl")}
    in_process = {p["question_id"]: p["raw"] for p in read_bundle_jsonl(clean_bundle, "predictions.jsonl")}
    assert len(served) == 40 and all(p["error"] is None for p in served.values())
    assert {q: p["raw"] for q, p in served.items()} == in_process
    distinct = {r["request_id"] for r in read_bundle_jsonl(bundle, "requests.jsonl")}
    assert set(server.counts.values()) == {1} and len(server.counts) == len(distinct), "a request was sent twice"


def gold_in_evidence(bundle: Path, cfg, hop: str) -> int:
    """How many of a sealed bundle's packets for `hop` hold a gold string, from the rebuilt text."""
    adapter = instantiate(cfg.dataset)
    dataset, labels = adapter.load(), adapter.load_labels()
    questions = {q.qid: q for q in dataset.questions}
    return sum(gold_in_text(rebuild_text(dataset.histories[questions[p["question_id"]].history_id], p),
                            labels[p["question_id"]])
               for p in read_bundle_jsonl(bundle, "evidence.jsonl") if questions[p["question_id"]].hop == hop)


def make_tables(tmp: Path, *extra: str) -> subprocess.CompletedProcess:
    return subprocess.run([sys.executable, "-m", "harness.cli", "tables", "table1", "--bundles", str(tmp / "results" / "bundles"),
                           "--out", str(tmp / "out"), "--n-boot", "500", "--population", "t40", *extra],
                          cwd=ROOT, capture_output=True, text=True, check=True)


def test_tables_and_figures_from_tiny_reader_bundles(tmp_path_factory, tiny_model_dir, cfg):
    tmp = tmp_path_factory.mktemp("tables")
    for arm in ("cmc", "fact_bm25", "stale_closure"):
        run(compose_config(*overrides(tmp, tiny_model_dir, "experiment=table1", f"arm={arm}")))
    out = make_tables(tmp, "--reader", "local")
    assert "Reader: local" in out.stdout
    tables = tmp / "out" / "tables"
    partial = "PARTIAL: views not sealed yet: prior_read_refresh, latest_state, raw_suffix."
    assert partial in out.stdout and partial in (tables / "table1_t40_local.md").read_text()
    for stem in ("table1_t40_local", "table1_t40_local_by_length", "table1_t40_local_strict",
                 "table1_t40_local_contrasts", "table1_t40_local_selection"):
        for ext in ("md", "csv", "tex"):
            assert (tables / f"{stem}.{ext}").stat().st_size > 0
    selection = list(csv.DictReader((tables / "table1_t40_local_selection.csv").open()))
    assert {row["arm"] for row in selection} == {"cmc", "fact_bm25", "stale_closure"}
    assert sum(int(row["n"]) for row in selection) == 3 * 40
    for row in selection:
        assert int(row["correct_with_gold"]) <= int(row["gold_in_evidence"]) <= int(row["n"])
        assert int(row["wrong_with_gold_answer_shown"]) <= int(row["gold_in_evidence"]) - int(row["correct_with_gold"])
    gold = {(row["arm"], row["hop"]): int(row["gold_in_evidence"]) for row in selection}
    for arm, hop in (("cmc", "sh"), ("stale_closure", "mh")):
        bundle = tmp / "results" / "bundles" / "table1" / f"factconsolidation-grammar-t40-{arm}-local"
        assert gold[(arm, hop)] == gold_in_evidence(bundle, cfg, hop)
    assert gold[("cmc", "sh")] > gold[("stale_closure", "sh")]  # stale values hide the current answer
    contrasts = (tables / "table1_t40_local_contrasts.csv").read_text().splitlines()
    assert len(contrasts) == 1 + 2 * 2  # (cmc vs fact_bm25, cmc vs stale_closure) x (sh, mh)
    generation = {row["view"]: row for row in csv.DictReader((tables / "table1_t40_local_generation.csv").open())}
    assert set(generation) == {"cmc", "fact_bm25", "stale_closure"}  # from each run's sittings, moved at seal
    for row in generation.values():
        assert int(row["requests"]) == 40 and 0 < int(row["requests sent"]) <= 40 and float(row["s/request"]) >= 0
        assert row["CPU flags"] != "not recorded" and row["engine"]
    for figure in ("table1_t40_local_by_length.png", "table1_t40_local_tokens.png"):
        assert (tmp / "out" / "figures" / figure).read_bytes()[:4] == b"\x89PNG"
    # A second reader's bundle in the same folder gets its own table and is never pooled into this one.
    before = (tables / "table1_t40_local.csv").read_text()
    run(compose_config(*overrides(tmp, tiny_model_dir, "experiment=table1", "arm=cmc", "reader.name=local2")))
    make_tables(tmp, "--reader", "local")
    assert (tables / "table1_t40_local.csv").read_text() == before
    make_tables(tmp, "--reader", "local2")
    other = list(csv.DictReader((tables / "table1_t40_local2.csv").open()))
    assert [(row["view"], row["n"]) for row in other] == [("cmc", "40")]
    grid = list(csv.DictReader((tables / "table1_t40_readers.csv").open()))
    assert sorted(row["reader"] for row in grid) == ["local", "local2"]
    assert all(row["engine"].startswith("transformers ") for row in grid)  # from each bundle's reader pin
    missing = subprocess.run([sys.executable, "-m", "harness.cli", "tables", "table1", "--bundles", str(tmp / "results" / "bundles"),
                              "--population", "t40"], cwd=ROOT, capture_output=True, text=True)
    assert missing.returncode != 0 and '"reader":"qwen25_coder_15b"' in missing.stderr and "local2" in missing.stderr
    # Section 4.1 coverage: its population is exactly the items CMC answers and the control misses.
    coverage = list(csv.DictReader((tables / "table1_t40_local_coverage.csv").open()))
    assert {(row["b"], row["hop"]) for row in coverage} == {(b, hop) for b in ("fact_bm25", "stale_closure")
                                                            for hop in ("sh", "mh")}
    scores = tmp / "results" / "scores" / "table1"
    right = {arm: {i["question_id"]: (i["hop"], i["substring_em"]) for i in map(json.loads, (
        scores / f"factconsolidation-grammar-t40-{arm}-local" / "items.jsonl").read_text().splitlines())}
        for arm in ("cmc", "fact_bm25", "stale_closure")}
    for row in coverage:
        expected = sum(1 for q, (hop, em) in right["cmc"].items() if hop == row["hop"] and em and not right[row["b"]][q][1])
        n, lacks_record, lacks_gold, a_gold = (int(row[k]) for k in ("n", "lacks_record", "lacks_gold", "a_has_gold"))
        assert n == expected and lacks_record <= n and a_gold <= n
        assert lacks_gold <= (n - a_gold) + lacks_record  # B lacks a gold that A shows only by lacking A's record


def test_reseal_seals_a_bundle_again_from_its_own_answers(finished, tiny_model_dir, tmp_path):
    """With an empty prediction store (a fresh clone's), the bundle's answers seed the journal:
    nothing is sent, its sittings are carried on, and the same code seals the same bytes."""
    from harness.reseal import reseal

    tmp, bundle, scores = finished
    shutil.copytree(tmp / "results", tmp_path / "results")
    copy = tmp_path / "results" / "bundles" / "adhoc" / bundle.name
    before = bundle_bytes(copy)
    sittings = (tmp_path / "results" / "scores" / "adhoc" / bundle.name / "sittings.jsonl").read_text()
    places = [f"reader.model.local_path={tiny_model_dir}", f"paths.results_dir={tmp_path / 'results'}",
              f"paths.cache_dir={tmp_path / 'cache'}"]  # a cache without the store
    out = reseal(copy, places)
    assert bundle_bytes(copy) == before and (out / "sittings.jsonl").read_text() == sittings
    assert not (tmp_path / "results" / "work" / "adhoc" / bundle.name).exists()
    busy = tmp_path / "results" / "work" / "adhoc" / bundle.name
    busy.mkdir(parents=True)
    with pytest.raises(DataError, match="under way"):
        reseal(copy, places)
    assert bundle_bytes(copy) == before
    busy.rmdir()


def test_reseal_keeps_the_old_bundle_when_the_store_disagrees_or_a_stage_fails(finished, tiny_model_dir, tmp_path,
                                                                                monkeypatch):
    """A store that already holds another answer for one of the bundle's requests must not
    slip it into the re-sealed bundle; a stage that fails puts the old bundle back too."""
    import harness.reseal as module
    from common.calls import Prediction
    from generation.store import PredictionStore

    tmp, bundle, _ = finished
    shutil.copytree(tmp / "results", tmp_path / "results")
    copy = tmp_path / "results" / "bundles" / "adhoc" / bundle.name
    before = bundle_bytes(copy)
    places = [f"reader.model.local_path={tiny_model_dir}", f"paths.results_dir={tmp_path / 'results'}",
              f"paths.cache_dir={tmp_path / 'cache'}"]
    work = tmp_path / "results" / "work" / "adhoc" / bundle.name
    first = json.loads((copy / "predictions.jsonl").read_text().splitlines()[0])["request_id"]
    store = PredictionStore(tmp_path / "cache" / "predictions.sqlite")
    store.put(Prediction.from_json({"request_id": first, "raw": "an answer the bundle never gave"}))
    store.close()
    with pytest.raises(DataError, match=r"answers request \w+ differently from the prediction store"):  # seal refuses
        module.reseal(copy, places)
    assert bundle_bytes(copy) == before and not work.exists() and not work.with_name(work.name + ".resealing").exists()
    for leftover in (tmp_path / "cache").glob("predictions.sqlite*"):
        leftover.unlink()

    def broken(*_: object) -> None:
        raise RuntimeError("seal interrupted")

    monkeypatch.setattr(module, "run_seal", broken)
    with pytest.raises(RuntimeError, match="seal interrupted"):
        module.reseal(copy, places)
    assert bundle_bytes(copy) == before and not work.exists()


def files_under(root: Path) -> dict[str, tuple[str, int]]:
    """Every file under root with its content hash and modification time (a rewrite with the
    same bytes still shows)."""
    return {str(p.relative_to(root)): (hashlib.sha256(p.read_bytes()).hexdigest(), p.stat().st_mtime_ns)
            for p in sorted(root.rglob("*")) if p.is_file()}


def test_checking_a_bundle_writes_nothing(finished, tiny_model_dir):
    """Verification is read-only: a replay and a seal check over a sealed bundle leave every
    file under the results and the caches as they were, byte for byte and untouched."""
    tmp, bundle, scores = finished
    before = files_under(tmp)
    assert any(name.startswith("results/evidence/") for name in before) and any(
        name.startswith("cache/") for name in before)
    here = [f"paths.results_dir={tmp / 'results'}", f"paths.cache_dir={tmp / 'cache'}"]
    report = replay(bundle, [f"reader.model.local_path={tiny_model_dir}", *here], scores_dir=scores)
    assert report.ok, report.mismatches
    run(compose_config(*overrides(tmp, tiny_model_dir, "arm=cmc", "stage=seal")))
    assert files_under(tmp) == before


def test_a_recorded_score_may_move_in_its_last_digit_between_cpus_and_nothing_else_may():
    """A trace keeps embedding similarities to 6 decimals, and their last digit moves with the
    CPU's kernels (AVX-512 vs AMX): within 1e-5 a float is the same; a position, a text hash,
    an integer or a larger move is not."""
    from harness.recheck import compare, same_within_kernels

    row = {"positions": [3, 5], "trace": {"steps": [{"score": 0.548131, "fact": "x"}]}, "sha256": "ab"}
    moved = {**row, "trace": {"steps": [{"score": 0.54813, "fact": "x"}]}}
    assert same_within_kernels(row, moved) and compare("trace", [row], [moved], same_within_kernels) is None
    for other in ({**row, "trace": {"steps": [{"score": 0.5482, "fact": "x"}]}}, {**row, "positions": [3, 6]},
                  {**row, "sha256": "ac"}, {**row, "trace": {"steps": [{"score": 1, "fact": "x"}]}}):
        assert not same_within_kernels(row, other)
    assert compare("trace", [row, row], [row, {**row, "positions": [3]}], same_within_kernels) == \
        "trace: 1 of 2 differ (first at row 1)"


def test_a_scored_ranking_may_swap_only_near_tied_neighbours_between_cpus():
    """The dense view's trace keeps its ranking with the scores: on another CPU two items 1e-6
    apart may trade places (the table9 dense bundle, sealed on an Intel AMX machine, swapped
    3 such pairs of 800 on an AMD one); items further apart, another item, or a moved score
    may not."""
    from harness.recheck import same_within_kernels

    row = {"positions": [3, 5, 9], "trace": {"ranked": [9, 3, 5], "scores": [0.71, 0.548131, 0.54813]}}
    swapped = {**row, "trace": {"ranked": [9, 5, 3], "scores": [0.71, 0.548131, 0.548130]}}
    assert same_within_kernels(row, swapped)
    for other in ({"ranked": [3, 9, 5], "scores": [0.71, 0.548131, 0.54813]},   # 0.71 vs 0.548: not a near-tie
                  {"ranked": [9, 3, 7], "scores": [0.71, 0.548131, 0.54813]},   # another item
                  {"ranked": [9, 3, 5], "scores": [0.71, 0.548131, 0.5482]},    # a score that moved
                  {"ranked": [9, 3], "scores": [0.71, 0.548131]}):
        assert not same_within_kernels(row, {**row, "trace": other})
