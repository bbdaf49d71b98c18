"""Seal a bundle again under the current code, from its own answers.

A fix that changes what a bundle records but not what its reader was asked (the relation
scores a G-Walk trace keeps, say) leaves committed bundles that no longer replay. Running
them again from scratch would resend every request wherever the prediction store is empty
(a fresh clone's is). Here the bundle's successful answers seed the run's journal, its
sittings are carried on, and the reader is frozen to the bundle's pin (the dtype `auto`
chose then, not now); then the usual stages run: only requests the current code makes that
the bundle lacks are sent, and the bundle is sealed and scored again in its place, with a
manifest naming the code that sealed it. Its timings.json is left as the first run wrote it.
"""
from __future__ import annotations

import logging
import shutil
from pathlib import Path
from typing import Sequence

from cmc.bundle import read_bundle_jsonl, read_manifest, verify_seal
from cmc.errors import DataError
from cmc.journal import PredictionJournal
from cmc.readers.base import Prediction
from harness.generate import run_generate
from harness.replay import replay_config
from harness.runs import Run
from harness.seal import run_seal
from harness.stages import run_evidence, run_score

log = logging.getLogger(__name__)


def seed_journal(bundle: Path, journal: PredictionJournal) -> int:
    """The bundle's answers as journal lines: successes only (a journal holds no failure, so
    a failed request is sent again), each request once, without the bundle's question ids."""
    seen: dict[str, Prediction] = {}
    for row in read_bundle_jsonl(bundle, "predictions.jsonl"):
        fields = {k: v for k, v in row.items() if k != "question_id"}
        if fields.get("error") is None and fields["request_id"] not in seen:
            seen[fields["request_id"]] = Prediction.from_json(fields)
    journal.append(list(seen.values()))
    return len(seen)


def reseal(bundle: str | Path, overrides: Sequence[str] = ()) -> Path:
    """Re-seal `bundle` in place; returns its scores folder. The old bundle is set aside in
    the run's work folder and put back if anything fails before the new one is sealed."""
    bundle = Path(bundle)
    verify_seal(bundle)
    manifest = read_manifest(bundle)
    cfg = replay_config(bundle, overrides, manifest)
    run = Run(cfg, frozen_reader_pin=manifest["reader_pin"])
    if run.bundle_dir.resolve() != bundle.resolve():
        raise DataError(f"{bundle}: its config seals to {run.bundle_dir}; reseal a bundle in its own place "
                        f"(or point paths.results_dir at the results folder that holds it)")
    if run.work_dir.exists():
        raise DataError(f"{run.work_dir}: a run of this bundle is under way there; finish or move it first")
    run.work_dir.mkdir(parents=True)
    seeded = seed_journal(bundle, run.journal())
    sittings = run.scores_dir / "sittings.jsonl"
    if sittings.is_file():  # the seal moves the work folder's sittings to the scores: carry the old ones on
        shutil.copyfile(sittings, run.sittings_path())
    aside = run.work_dir / "resealing" / bundle.name
    aside.parent.mkdir(parents=True)
    shutil.move(str(bundle), str(aside))
    try:
        for stage in (run_evidence, run_generate, run_seal):
            stage(cfg, run)
    except BaseException:
        if not (bundle / "SEAL").is_file():
            shutil.rmtree(bundle, ignore_errors=True)
            shutil.move(str(aside), str(bundle))
        shutil.rmtree(run.work_dir, ignore_errors=True)  # answers sent meanwhile stay in the prediction store
        raise
    log.info("%s: re-sealed from %d of its own answers", bundle, seeded)
    return run_score(cfg, run)
