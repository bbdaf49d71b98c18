"""The seal stage: assemble the bundle from the frozen manifest, the evidence, the requests
and the stored predictions, refusing failed requests unless the user allowed them. A sealed
bundle is final; rerunning only checks that this code still reproduces it."""
from __future__ import annotations

import logging
import re
import shutil
from pathlib import Path
from typing import Any

from omegaconf import DictConfig

from common.calls import Prediction
from common.errors import DataError
from common.io import atomic_write_text, canonical_json, jsonl_text, read_json, sha256_text
from generation.journal import PredictionJournal
from generation.service import no_generation
from generation.sittings import read_sittings, total
from generation.store import PredictionStore
from harness.method_runs import bundle_predictions, bundle_rows, rerun_over, run_method, stored_answers
from harness.packets import write_run_evidence
from harness.runs import Run
from provenance.bundle import SealError, read_manifest, sealed_digests, write_bundle
from provenance.manifest import config_differences, experiment_config

log = logging.getLogger(__name__)


def run_seal(cfg: DictConfig, run: Run | None = None) -> Path:
    """Assemble the bundle from frozen manifest, evidence, requests and stored predictions."""
    run = run or Run(cfg)
    if run.population.shard is not None:
        raise DataError(f"population.shard={cfg.population.shard}: a shard only generates; seal once every shard is "
                        f"done, without population.shard (the seal merges their journals)")
    if run.sealed:
        check_reproduces(run)
        log.info("bundle already sealed, and its evidence and requests reproduce: %s", run.bundle_dir)
        if _left_by_this_seal(run):  # a seal that died between the bundle's rename and the clean-up
            with run.lock:
                if not (run.scores_dir / "sittings.jsonl").is_file():  # moved already: keep the whole file
                    move_sittings(run)
                shutil.rmtree(run.work_dir)
            log.info("finished the interrupted seal's clean-up: %s removed", run.work_dir)
        return run.bundle_dir
    with run.lock:
        if run.sealed:  # sealed by the process that held the lock before us
            return run_seal(cfg, run)
        return _seal(cfg, run)


def _left_by_this_seal(run: Run) -> bool:
    """Whether a work folder beside a sealed bundle is the one that made it (its frozen
    manifest is the bundle's), so removing it loses nothing; any other is left alone."""
    frozen = run.work_dir / "manifest.json"
    return frozen.is_file() and frozen.read_bytes() == (run.bundle_dir / "manifest.json").read_bytes()


def _seal(cfg: DictConfig, run: Run) -> Path:
    manifest = read_json(run.work_dir / "manifest.json")
    if run.extraction_differs(manifest):
        raise DataError(f"{run.work_dir / 'manifest.json'}: froze another extraction than the one this run now reads "
                        f"(its frozen file or journal changed since); move the work folder away to start over")
    store = run.store()
    try:
        return _seal_from(cfg, run, manifest, store)
    finally:
        store.close()


def _seal_from(cfg: DictConfig, run: Run, manifest: dict[str, Any], store: PredictionStore) -> Path:
    for prediction in agreed_answers(run.journals(), store).values():  # shards generated elsewhere fill this store
        store.put(prediction)
    if run.method is not None:
        rows = method_rows(run, store)
    else:
        predictions: list[Prediction] = []
        for request in run.requests:
            prediction = store.get(request.id)
            if prediction is None:
                raise DataError(f"no stored prediction for request {request.id[:12]}; run stage=generate first")
            predictions.append(prediction)
        if failed := check_failures(predictions, cfg.get("allow_errors", False)):
            manifest = {**manifest, "sealed_with_errors": failed}
        rows = {"evidence.jsonl": run.packets(), "requests.jsonl": request_rows(run),
                "predictions.jsonl": [{"question_id": q.qid, **p.to_json()} for q, p in zip(run.questions, predictions)]}
    bundle = write_bundle(run.bundle_dir, manifest, rows["evidence.jsonl"], rows["requests.jsonl"],
                          rows["predictions.jsonl"])
    move_sittings(run)
    shutil.rmtree(run.work_dir)  # manifest and journal now live, sealed, in the bundle
    run.trace_checked = run.method is not None  # its rows were just made from these answers
    return bundle


SHARD_JOURNAL = re.compile(r"predictions\.shard-(\d+)-of-(\d+)\.jsonl")


def agreed_answers(journals: list[PredictionJournal], store: PredictionStore) -> dict[str, Prediction]:
    """Every journal's answers by request id, refused where two sources disagree: two
    journals (a foreign file named like a shard's, a whole run's beside its shards), or a
    journal and this machine's store, which would otherwise keep its own answer silently.
    Shard journals must come from one split (one shard count)."""
    counts = {int(m.group(2)) for j in journals if (m := SHARD_JOURNAL.fullmatch(j.path.name))}
    if len(counts) > 1:
        raise DataError(f"{journals[0].path.parent}: shard journals of {sorted(counts)} shards; a run is split one "
                        f"way: move the foreign ones away")
    merged: dict[str, Prediction] = {}
    source: dict[str, str] = {}
    for journal in journals:
        for request_id, prediction in journal.read().items():
            held, where = merged.get(request_id), source.get(request_id)
            if held is None and (stored := store.get(request_id)) is not None and stored.error is None:
                held, where = stored, f"the prediction store {store.path}"
            if held is not None and held.raw != prediction.raw:
                raise DataError(f"{journal.path}: answers request {request_id[:12]} differently from {where}; "
                                f"nothing was sealed: keep one answer (move a journal away, or seal with an empty "
                                f"paths.cache_dir to take the journals')")
            merged.setdefault(request_id, prediction)
            source.setdefault(request_id, str(journal.path))
    return merged


def method_rows(run: Run, store: PredictionStore) -> dict[str, list[dict[str, Any]]]:
    """A method's bundle rows, from running it over the stored answers. A question whose
    call failed cannot be sealed (allow_errors covers one-call arms only): a method's
    later calls depend on the failed one's answer."""
    answer = stored_answers(store.get, str(run.work_dir))
    return bundle_rows(run, run.method, [run_method(run, run.method, q, answer) for q in run.questions])


def move_sittings(run: Run) -> None:
    """Timings go to the scores, not into the deterministic bundle: the run's sittings and
    every shard's, one file, shards after the whole run's lines in name order."""
    files = sorted(run.work_dir.glob("sittings*.jsonl"), key=lambda p: (p.name != "sittings.jsonl", p.name))
    rows = [row for path in files for row in read_sittings(path)]
    if not rows:
        return
    log.info("generation: %(sittings)d sitting(s), %(requests)d requests, %(seconds).1f s", total(rows))
    atomic_write_text(run.scores_dir / "sittings.jsonl", jsonl_text(rows))


def check_failures(predictions: list[Prediction], allow_errors: bool | float) -> dict[str, Any] | None:
    """Refuse to seal failed requests unless the user allowed that share: a sealed bundle is
    final, so a short outage must not become a permanent 0%. Returns what the manifest
    records when failures are sealed."""
    failed = [p for p in predictions if p.error is not None]
    if not failed:
        return None
    if isinstance(allow_errors, bool):
        share = 1.0 if allow_errors else 0.0
    elif isinstance(allow_errors, (int, float)) and 0 <= allow_errors <= 1:
        share = float(allow_errors)
    else:
        raise DataError(f"allow_errors must be true, false or a share in [0, 1], got {allow_errors!r}")
    if len(failed) > share * len(predictions):
        raise DataError(
            f"{len(failed)} of {len(predictions)} requests failed (first: {failed[0].error[:300]}); nothing was "
            f"sealed. The {len(predictions) - len(failed)} answers are kept: run again to retry only the failed "
            f"requests, or seal them as wrong answers with allow_errors=true (recorded in the manifest)")
    return {"allow_errors": allow_errors, "failed": len(failed), "of": len(predictions)}


def request_rows(run: Run) -> list[dict[str, Any]]:
    """What a bundle keeps of each request: ids, sizes and a hash, not the rendered text."""
    return [
        {"question_id": q.qid, "request_id": r.id, "reader": r.reader, "prompt_version": r.prompt_version,
         "generation": r.generation, "input_tokens": len(r.input_ids) if r.input_ids is not None else None,
         "evidence_truncated_tokens": r.evidence_truncated_tokens,
         "messages_sha256": sha256_text(canonical_json(list(r.messages)))}
        for q, r in zip(run.questions, run.requests)
    ]


def check_reproduces(run: Run) -> None:
    """A sealed bundle stands only if this code and config still produce its config,
    evidence and requests byte for byte; otherwise say so rather than keep a stale result.
    The evidence is recomputed with this code, never read back from an earlier run's file.
    A check generates nothing (an extraction it needs must be frozen or journaled)."""
    with no_generation("a seal check"):
        _check_reproduces(run)


def method_trace_changes(run: Run) -> list[str]:
    """The files of a method bundle (its traces, its requests) that differ from re-executing
    the method over the bundle's own answers: a trace or answer edited and sealed again is
    found here, since the seal proves integrity, not authorship. Sends nothing."""
    with no_generation("a method bundle's check"):
        rows = rerun_over(run, run.method, bundle_predictions(run.bundle_dir), str(run.bundle_dir))
    sealed = sealed_digests(run.bundle_dir)
    run.trace_checked = True
    return [name for name in ("evidence.jsonl", "requests.jsonl") if sha256_text(jsonl_text(rows[name])) != sealed[name]]


def _check_reproduces(run: Run) -> None:
    if not run.evidence_written and run.method is None:
        write_run_evidence(run)
    if run.method is not None:  # re-executed over the bundle's own answers
        changed = method_trace_changes(run)
    else:
        sealed = sealed_digests(run.bundle_dir)
        fresh = {"evidence.jsonl": run.packets(), "requests.jsonl": request_rows(run)}
        changed = [name for name, rows in fresh.items() if sha256_text(jsonl_text(rows)) != sealed[name]]
    manifest = read_manifest(run.bundle_dir)
    if run.extraction_differs(manifest):
        changed.insert(0, "extraction (records_sha256)")
    keys = config_differences(manifest["config"], experiment_config(run.cfg))
    if keys:
        changed.insert(0, f"config ({', '.join(keys[:5])})")
    if changed:
        raise SealError(f"{run.bundle_dir}: sealed from a different {', '.join(changed)} than this code and config "
                        f"produce; move the bundle away to run again")
