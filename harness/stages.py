"""The stages behind run.py: evidence -> prepare -> generate -> seal -> score, or all.

Every stage is a pure function of the composed config and what earlier stages left on
disk: evidence packets under results/evidence, predictions in the crash-safe store, the
frozen manifest and the prediction journal under results/work. So `stage=<name>` reruns
one stage, and an interrupted run resumes where it stopped, on this machine (the store) or
on another (the committed journal): finished generations are never sent again. A sealed
bundle is final: rerunning checks that evidence and requests still reproduce it, and sends
nothing.
"""
from __future__ import annotations

import logging
import time
from pathlib import Path
from typing import Callable

from omegaconf import DictConfig

from analysis.bundle_scores import score_bundle
from common.errors import DataError
from common.io import atomic_write_text, json_text
from harness.confine import confined
from harness.generate import run_generate, run_prepare
from harness.recheck import recheck
from harness.runs import Run
from harness.schemas import check_config
from harness.seal import run_seal
from provenance.bundle import SealError, read_manifest
from provenance.row_types import check_document
from provenance.vault import LabelVault

log = logging.getLogger(__name__)


def run_evidence(cfg: DictConfig, run: Run | None = None) -> Path:
    """An arm's packets; a method has none before generation (what it reads depends on its
    calls' answers: its trace is written at seal)."""
    return (run or Run(cfg)).view.write_evidence()


def run_score(cfg: DictConfig, run: Run | None = None) -> Path:
    """Open labels through the vault (seal verified) and score every item."""
    run = run or Run(cfg)
    if run.view.recheck_before_scoring and not run.checked and (changed := recheck(
            run, run.bundle_dir, read_manifest(run.bundle_dir), compare_config=False)[0]):
        raise SealError(f"{run.bundle_dir}: its {', '.join(d.what for d in changed)} differ from re-executing "
                        f"{run.view.name} over its own answers; not scored")
    labels = LabelVault(run.adapter.load_labels).open(run.bundle_dir)
    return score_bundle(run.bundle_dir, labels, {q.qid: q for q in run.dataset.questions}, run.scores_dir)


def run_all(cfg: DictConfig) -> Path:
    """Every stage; a shard (population.shard=i/n) stops after generating its slice."""
    run = Run(cfg)
    already_sealed = run.sealed
    timings = {}
    stages = (("evidence", run_evidence), ("generate", run_generate), ("seal", run_seal), ("score", run_score))
    if run.population.shard is not None:
        stages = stages[:2]
    for name, stage in stages:
        start = time.perf_counter()
        result = stage(cfg, run)
        timings[name] = round(time.perf_counter() - start, 3)
    if run.population.shard is not None:
        log.info("shard %s generated; once every shard is done, run stage=seal without population.shard",
                 cfg.population.shard)
        return result
    if not already_sealed:  # a rerun over a sealed bundle must not replace the timings of the run that made it
        info = {"seconds": timings, **({"prefill": run.prefill} if run.prefill else {})}
        check_document("timings.json", info, run.scores_dir / "timings.json")
        atomic_write_text(run.scores_dir / "timings.json", json_text(info, sort_keys=False))
    return result


STAGES: dict[str, Callable[..., Path]] = {
    "evidence": run_evidence, "prepare": run_prepare, "generate": run_generate,
    "seal": run_seal, "score": run_score, "all": run_all,
}


def run(cfg: DictConfig) -> Path:
    """Check the composed config against the schemas, then run the chosen stage, writing only
    under the configured folders."""
    check_config(cfg)
    if cfg.stage not in STAGES:
        raise DataError(f"stage={cfg.stage!r} is not a stage; the stages: {', '.join(sorted(STAGES))}")
    with confined(cfg):
        return STAGES[cfg.stage](cfg)
