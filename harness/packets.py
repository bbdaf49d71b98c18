"""Evidence packets on disk: where an arm's packets live, what made them, and whether the
ones there may be reused by this config."""
from __future__ import annotations

import logging
from pathlib import Path
from typing import TYPE_CHECKING, Any, Iterable

from omegaconf import DictConfig
from tqdm import tqdm

from cmc.evidence import select_all
from common.configurable import instantiate_known
from common.io import atomic_write_text, canonical_json, read_json, sha256_file, write_jsonl
from generation.locks import FileLock
from provenance.manifest import experiment_config

if TYPE_CHECKING:
    from harness.runs import Run

log = logging.getLogger(__name__)


def evidence_path(cfg: DictConfig) -> Path:
    """results/evidence/<dataset>[-<lengths>]/<frontend>/<arm>.jsonl: a dataset cut to some
    length slices (`dataset.lengths`) has fewer packets, so they live apart."""
    lengths = cfg.dataset.get("lengths")
    dataset = cfg.dataset.name + (f"-{'+'.join(lengths)}" if lengths else "")
    return Path(cfg.paths.evidence_dir) / dataset / cfg.frontend.name / f"{cfg.arm.name}.jsonl"


def evidence_config(cfg: DictConfig, dataset_pin: dict[str, Any]) -> dict[str, Any]:
    """What determines a run's evidence packets besides the code: the data file's pin (a
    rebuilt MemStream keeps its path) and the dataset, frontend and arm config (read.* and
    the embedder resolve into the arm). A frozen extraction named by path (`frontend.frozen`)
    is pinned by content too: a re-extraction written over it must not reuse old packets."""
    config = experiment_config(cfg)
    pins = {"dataset_pin": dataset_pin}
    if frozen := cfg.frontend.get("frozen"):  # None when the file is gone: the frontend then says so
        pins["frozen_extraction_sha256"] = sha256_file(frozen) if Path(frozen).is_file() else None
    return {**pins, **{key: config[key] for key in ("dataset", "frontend", "arm")}}


def write_evidence(cfg: DictConfig, dataset_pin: dict[str, Any], packets: Iterable[dict[str, Any]]) -> Path:
    """Write an arm's packets with what made them beside them (<arm>.config.json): packets on
    disk are reused only by a run that matches (an arm name alone does not say which budget).
    The old record goes first, so a crash mid-write leaves packets that nothing vouches for."""
    path = evidence_path(cfg)
    path.with_suffix(".config.json").unlink(missing_ok=True)
    write_jsonl(path, packets)
    atomic_write_text(path.with_suffix(".config.json"), canonical_json(evidence_config(cfg, dataset_pin)) + "\n")
    return path


def evidence_is_current(cfg: DictConfig, dataset_pin: dict[str, Any]) -> bool:
    path = evidence_path(cfg)
    config = path.with_suffix(".config.json")
    return path.is_file() and config.is_file() and read_json(config) == evidence_config(cfg, dataset_pin)


def write_run_evidence(run: "Run", only_if_stale: bool = False) -> Path:
    """Select evidence for every question of the dataset (not only the population: packets
    are shared by every population of the arm) and write it. Views running in parallel
    (a joblib launcher, two readers of one arm) take turns on the arm's file, and with
    `only_if_stale` a view finding the packets written meanwhile uses them."""
    path = evidence_path(run.cfg)
    with FileLock(path.with_suffix(".lock")):
        if only_if_stale and evidence_is_current(run.cfg, run.adapter.pin):
            return path
        arm = instantiate_known(run.cfg.arm)
        packets = (e.packet() for e in select_all(arm, run.dataset, run.memories))
        progress = tqdm(packets, total=len(run.dataset.questions), desc=f"evidence {arm.name}", disable=None,
                        mininterval=2)
        write_evidence(run.cfg, run.adapter.pin, progress)
    log.info("wrote %d evidence packets to %s", len(run.dataset.questions), path)
    return path
