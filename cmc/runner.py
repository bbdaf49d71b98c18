"""The pipeline stages behind run.py. Each stage is a function of the composed config.

Only the evidence stage exists so far; it never touches labels.
"""
from __future__ import annotations

import logging
from pathlib import Path
from typing import Callable, Iterable

from hydra.utils import instantiate
from omegaconf import DictConfig

from arms.base import Arm
from cmc.evidence import Evidence
from cmc.frontends import Frontend
from cmc.graph import Memory, compile_memory
from cmc.io import write_jsonl
from cmc.sources import Dataset

log = logging.getLogger(__name__)


def build_memories(dataset: Dataset, frontend: Frontend) -> dict[str, Memory]:
    """Compile each history once; every arm and question shares the result."""
    return {hid: compile_memory(h, frontend.extract(h)) for hid, h in dataset.histories.items()}


def select_all(arm: Arm, dataset: Dataset, memories: dict[str, Memory]) -> Iterable[Evidence]:
    """Evidence for every question, in dataset order."""
    for question in dataset.questions:
        yield arm.select(question, memories[question.history_id])


def evidence_path(cfg: DictConfig) -> Path:
    return Path(cfg.paths.evidence_dir) / cfg.dataset.name / cfg.frontend.name / f"{cfg.arm.name}.jsonl"


def run_evidence(cfg: DictConfig) -> Path:
    dataset = instantiate(cfg.dataset).load()
    memories = build_memories(dataset, instantiate(cfg.frontend))
    arm = instantiate(cfg.arm)
    path = write_jsonl(evidence_path(cfg), (e.packet() for e in select_all(arm, dataset, memories)))
    log.info("wrote %d evidence packets to %s", len(dataset.questions), path)
    return path


STAGES: dict[str, Callable[[DictConfig], Path]] = {"evidence": run_evidence}


def run(cfg: DictConfig) -> Path:
    if cfg.stage not in STAGES:
        raise ValueError(f"unknown stage {cfg.stage!r}; valid stages: {', '.join(sorted(STAGES))}")
    return STAGES[cfg.stage](cfg)
