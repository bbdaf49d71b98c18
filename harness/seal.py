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
from common.io import atomic_write_text, jsonl_text, read_json
from generation.journal import PredictionJournal
from generation.sittings import read_sittings, total
from generation.store import PredictionStore
from harness.recheck import recheck
from harness.runs import Run
from provenance.bundle import SealError, read_manifest, write_bundle
from provenance.row_types import check_rows

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
    store = PredictionStore(run.store_path)
    try:
        return _seal_from(cfg, run, manifest, store)
    finally:
        store.close()


def _seal_from(cfg: DictConfig, run: Run, manifest: dict[str, Any], store: PredictionStore) -> Path:
    for prediction in agreed_answers(run.journals(), store).values():  # shards generated elsewhere fill this store
        store.put(prediction)
    rows, failed = run.view.seal_rows(store.get, cfg.get("allow_errors", False))
    if failed:
        manifest = {**manifest, "sealed_with_errors": failed}
    bundle = write_bundle(run.bundle_dir, manifest, rows["evidence.jsonl"], rows["requests.jsonl"],
                          rows["predictions.jsonl"])
    move_sittings(run)
    shutil.rmtree(run.work_dir)  # manifest and journal now live, sealed, in the bundle
    run.checked = True  # its rows were just made by this code
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


def move_sittings(run: Run) -> None:
    """Timings go to the scores, not into the deterministic bundle: the run's sittings and
    every shard's, one file, shards after the whole run's lines in name order."""
    files = sorted(run.work_dir.glob("sittings*.jsonl"), key=lambda p: (p.name != "sittings.jsonl", p.name))
    rows = [row for path in files for row in read_sittings(path)]
    if not rows:
        return
    log.info("generation: %(sittings)d sitting(s), %(requests)d requests, %(seconds).1f s", total(rows))
    check_rows("sittings.jsonl", rows, run.scores_dir / "sittings.jsonl")
    atomic_write_text(run.scores_dir / "sittings.jsonl", jsonl_text(rows))


def check_reproduces(run: Run) -> None:
    """A sealed bundle stands only if this code and config still produce its config,
    evidence and requests; otherwise say so rather than keep a stale result. Reads only
    (harness/recheck.py): nothing is written or generated."""
    if differences := recheck(run, run.bundle_dir, read_manifest(run.bundle_dir))[0]:
        raise SealError(f"{run.bundle_dir}: sealed from a different {', '.join(d.what for d in differences)} than "
                        f"this code and config produce; move the bundle away to run again")
    run.checked = True
