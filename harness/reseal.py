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

from omegaconf import DictConfig

from common.errors import DataError
from common.io import writable_dir
from generation.journal import PredictionJournal
from harness.confine import confined
from harness.generate import run_generate
from harness.method_runs import bundle_predictions
from harness.recheck import recheck
from harness.replay import ADDRESSES, overridden_keys, reader_keys, replay_config
from harness.runs import Run
from harness.seal import run_seal
from harness.stages import run_evidence, run_score
from provenance.bundle import read_manifest, verify_seal

log = logging.getLogger(__name__)


def seed_journal(bundle: Path, journal: PredictionJournal) -> int:
    """The bundle's answers as journal lines (the journal skips failures, so a failed request
    is sent again); returns how many requests were seeded."""
    answers = bundle_predictions(bundle)
    journal.append(list(answers.values()))
    return len(answers)


def set_aside_path(run: Run) -> Path:
    """Where the old bundle waits while the new one is made: beside the run's work folder
    (which the seal deletes), never under results/bundles (where a table would find it)."""
    return run.work_dir.with_name(run.work_dir.name + ".resealing")


def changed_answers(old: Path, new: Path) -> list[str]:
    """Request ids whose sealed answer differs between two bundles: a prediction store that
    already held another answer for a request (a greedy bf16 answer can move with how a
    prompt was cut into prefill passes) must not slip into a re-sealed bundle."""
    before, after = bundle_predictions(old), bundle_predictions(new)
    return sorted(i for i, p in after.items() if i in before and p.raw != before[i].raw)


def _restore(bundle: Path, aside: Path, run: Run) -> None:
    if aside.is_dir():
        shutil.rmtree(bundle, ignore_errors=True)
        shutil.move(str(aside), str(bundle))
    shutil.rmtree(run.work_dir, ignore_errors=True)  # answers sent meanwhile stay in the prediction store


def refuse_recorded_addresses(recorded: dict, overrides: Sequence[str], where: Path) -> None:
    """A reseal may send the requests a bundle lacks, so every server address it uses is one
    the caller gives: the address a bundle records (possibly someone else's server) would
    receive this machine's requests and credentials."""
    overridden = overridden_keys(overrides)
    if recorded_only := [key for key in reader_keys(recorded, ADDRESSES) if key not in overridden]:
        raise DataError(f"{where}: config.{recorded_only[0]} is an address the bundle records; a reseal sends only "
                        f"where you say: pass {recorded_only[0]}=<your server>")


def reseal(bundle: str | Path, overrides: Sequence[str] = ()) -> Path:
    """Re-seal `bundle` in place; returns its scores folder. The old bundle is set aside and
    put back if anything fails, or if the new bundle answers a request of the old one
    differently. Overrides are for this machine (paths, threads) and are recorded in the
    new manifest like a run's."""
    bundle = Path(bundle)
    verify_seal(bundle)
    manifest = read_manifest(bundle)
    refuse_recorded_addresses(manifest["config"], overrides, bundle / "manifest.json")
    cfg = replay_config(bundle, overrides, manifest)
    with confined(cfg):
        return _reseal_in_place(bundle, cfg, manifest)


def _reseal_in_place(bundle: Path, cfg: DictConfig, manifest: dict) -> Path:
    run = Run(cfg, frozen_reader_pin=manifest["reader_pin"])
    aside = set_aside_path(run)
    if run.bundle_dir.resolve() != bundle.resolve():
        raise DataError(f"{bundle}: its config seals to {run.bundle_dir}; reseal a bundle in its own place "
                        f"(or point paths.results_dir at the results folder that holds it)")
    differences, _ = recheck(run, bundle, manifest, compare_config=False)
    log.info("%s: the current code rebuilds %s", bundle, ", ".join(d.detail for d in differences) or "it unchanged")
    with run.lock:
        if aside.exists():
            raise DataError(f"{aside}: an interrupted reseal left the old bundle there; move it back to {bundle}")
        if run.work_dir.exists():
            raise DataError(f"{run.work_dir}: a run of this bundle is under way there; finish or move it first")
        shutil.move(str(bundle), str(aside))
        try:
            writable_dir(run.work_dir)
            seeded = seed_journal(aside, PredictionJournal(run.journal_path))
            sittings = run.scores_dir / "sittings.jsonl"
            if sittings.is_file():  # the seal moves the work folder's sittings to the scores: carry them on
                shutil.copyfile(sittings, run.sittings_path)
            for stage in (run_evidence, run_generate, run_seal):
                stage(cfg, run)
            if changed := changed_answers(aside, bundle):
                raise DataError(f"{bundle}: the prediction store answers {len(changed)} of its requests differently "
                                f"(first {changed[0][:12]}); the old bundle is kept. Reseal with an empty "
                                f"paths.cache_dir to take the bundle's own answers")
        except BaseException:
            _restore(bundle, aside, run)
            raise
        shutil.rmtree(aside)
    log.info("%s: re-sealed from %d of its own answers", bundle, seeded)
    try:
        return run_score(cfg, run)
    except DataError as exc:
        raise DataError(f"{bundle}: re-sealed, but scoring failed ({exc}); run stage=score for it") from exc
