"""The prepare and generate stages: freeze the manifest, then hand every request to the
generation service (generation/service.py), which sends only what is not stored yet."""
from __future__ import annotations

import logging
from pathlib import Path

from omegaconf import DictConfig

from common.errors import DataError
from common.io import atomic_write_text, json_text
from common.locations import checkout_root
from generation.journal import PredictionJournal
from generation.service import GenerationService
from generation.sittings import Sitting
from generation.store import PredictionStore
from harness.runs import Run
from provenance.bundle import read_manifest
from provenance.manifest import build_manifest, config_differences, git_state
from provenance.row_types import check_document

log = logging.getLogger(__name__)


def run_prepare(cfg: DictConfig, run: Run | None = None) -> Path:
    """Freeze the manifest (config, pins, preregistered contrasts) before any generation."""
    run = run or Run(cfg)
    if not run.questions:  # nothing to seal or score: say so before anything is frozen
        raise DataError(f"population {cfg.population.name!r} selects no question of {cfg.dataset.name}")
    manifest = build_manifest(cfg, [q.qid for q in run.questions], run.adapter.pin, run.view.reader_pin(),
                              run.view.prompt_version, checkout_root())
    if extraction := run.extraction_pin():
        manifest["extraction"] = extraction
    path = run.work_dir / "manifest.json"
    if not path.is_file():
        check_document("manifest.json", manifest, path)
        atomic_write_text(path, json_text(manifest))
    elif changed := config_differences(read_manifest(path.parent).get("config", {}), manifest["config"]):
        raise DataError(f"{path}: a different config was frozen for this run ({', '.join(changed[:5])} differ); "
                        f"move it away to start over")
    return path


def run_generate(cfg: DictConfig, run: Run | None = None) -> Path:
    """Send every request without a stored successful prediction; store each on arrival."""
    run = run or Run(cfg)
    if run.sealed:
        log.info("bundle already sealed, nothing to generate: %s", run.bundle_dir)
        return run.bundle_dir
    with run.lock:
        run_prepare(cfg, run)
        store = PredictionStore(run.store_path)
        sitting = Sitting(run.sittings_path, code=git_state(checkout_root()))
        service = GenerationService(run.reader, store, PredictionJournal(run.journal_path), label=f"generate {run.name}{run.shard_suffix}",
                                    on_finished=lambda _: sitting.finished(**run.reader.counters()),
                                    also_read=run.journals(),  # shards' journals: done elsewhere
                                    reuse_caps=cfg.get("reuse_answers_of_caps") or ())
        try:
            run.view.generate(service)
        finally:
            store.close()
    run.prefill = run.reader.counters() or None
    if run.prefill:
        log.info("prefill tokens: %(prefill_tokens_total)d computed-or-reused, %(prefill_tokens_saved)d from the "
                 "prefix cache", run.prefill)
    return store.path
