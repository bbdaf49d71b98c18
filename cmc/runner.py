"""The pipeline stages behind run.py: prepare -> evidence -> generate -> seal -> score.

Every stage is a pure function of the composed config and what earlier stages left on
disk: evidence packets under results/evidence, predictions in the crash-safe store, the
frozen manifest and the prediction journal under results/work. So `stage=<name>` reruns
one stage, and an interrupted run resumes where it stopped, on this machine (the store) or
on another (the committed journal): finished generations are never sent again. A sealed
bundle is final: rerunning checks that evidence and requests still reproduce it, and sends
nothing.
"""
from __future__ import annotations

import json
import logging
import re
import shutil
import time
from concurrent.futures import FIRST_COMPLETED, ThreadPoolExecutor, wait
from dataclasses import dataclass
from functools import cached_property
from itertools import islice
from pathlib import Path
from typing import Any, Callable, Iterable

from omegaconf import DictConfig
from tqdm import tqdm

from arms.base import Arm
from cmc.bundle import SealError, read_manifest, sealed_digests, verify_seal, write_bundle
from cmc.cache import PredictionStore
from cmc.errors import DataError
from cmc.evidence import Evidence, rebuild_text
from cmc.frontends import Frontend
from cmc.graph import Memory, compile_memory
from cmc.io import (atomic_write_text, canonical_json, jsonl_text, read_json, read_jsonl, sha256_file, sha256_text,
                    write_jsonl)
from cmc.journal import PredictionJournal
from cmc.locks import RunLock
from cmc.manifest import build_manifest, config_differences, experiment_config, git_state
from cmc.prompt import load_prompt
from cmc.readers.base import Prediction, Request
from cmc.records import Question
from cmc.sittings import Sitting, read_sittings, total
from cmc.sources import Dataset
from cmc.targets import instantiate_known
from cmc.vault import LabelVault

log = logging.getLogger(__name__)
ROOT = Path(__file__).resolve().parent.parent
SAFE_NAME = re.compile(r"[A-Za-z0-9_-][A-Za-z0-9_.-]*")


def build_memories(dataset: Dataset, frontend: Frontend) -> dict[str, Memory]:
    """Compile each history once; every arm and question shares the result."""
    frontend.prepare(list(dataset.histories.values()))
    return {hid: compile_memory(h, frontend.extract(h)) for hid, h in dataset.histories.items()}


def select_all(arm: Arm, dataset: Dataset, memories: dict[str, Memory],
               questions: Iterable[Question] | None = None) -> Iterable[Evidence]:
    """Evidence for every question (or the given ones), in dataset order."""
    for question in dataset.questions if questions is None else questions:
        yield arm.select(question, memories[question.history_id])


def evidence_path(cfg: DictConfig) -> Path:
    return Path(cfg.paths.evidence_dir) / cfg.dataset.name / cfg.frontend.name / f"{cfg.arm.name}.jsonl"


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


@dataclass
class Run:
    """Lazily built pieces of one (dataset, frontend, arm, reader) run."""

    cfg: DictConfig
    prefill: dict[str, int] | None = None  # the reader's prefix-cache counters after generate
    evidence_written: bool = False  # by this process, with this code
    frozen_reader_pin: dict[str, Any] | None = None  # a replayed bundle's; else read from this run's manifest

    @cached_property
    def adapter(self) -> Any:
        return instantiate_known(self.cfg.dataset)

    @cached_property
    def dataset(self) -> Dataset:
        return self.adapter.load()

    @cached_property
    def questions(self) -> list[Question]:
        return instantiate_known(self.cfg.population).select(self.dataset.questions)

    @cached_property
    def memories(self) -> dict[str, Memory]:
        return build_memories(self.dataset, instantiate_known(self.cfg.frontend))

    @cached_property
    def reader(self) -> Any:
        """The configured reader, held to what this run's frozen manifest fixed (the dtype
        `auto` resolved to, the identity scheme), so resuming or re-checking a run on
        another machine or library version rebuilds the same request ids."""
        reader = instantiate_known(self.cfg.reader)
        frozen = self.frozen_reader_pin if self.frozen_reader_pin is not None else self._recorded_reader_pin()
        if frozen and hasattr(reader, "freeze"):
            reader.freeze(frozen)
        return reader

    def _recorded_reader_pin(self) -> dict[str, Any] | None:
        for manifest in (self.bundle_dir / "manifest.json", self.work_dir / "manifest.json"):
            if manifest.is_file():
                return read_manifest(manifest.parent).get("reader_pin")
        return None

    @cached_property
    def prompt(self) -> Any:
        return load_prompt(self.cfg.prompt)

    @property
    def name(self) -> str:
        parts = {key: self.cfg[key].name for key in ("dataset", "frontend", "population", "arm", "reader")}
        for key, part in {**parts, "experiment": self.cfg.experiment.name}.items():
            if not isinstance(part, str) or not SAFE_NAME.fullmatch(part):  # names become folder names
                raise DataError(f"{key}.name = {part!r}: use letters, digits, '_', '.' and '-' (not leading '.')")
        return "-".join(parts.values())

    @cached_property
    def lock(self) -> RunLock:
        """Held from generation to seal: one process per run (cmc/locks.py)."""
        where = Path(self.cfg.paths.cache_dir) / "locks" / f"{self.cfg.experiment.name}-{self.name}.lock"
        return RunLock(where, f"run {self.cfg.experiment.name}/{self.name}")

    @property
    def bundle_dir(self) -> Path:
        return Path(self.cfg.paths.bundles_dir) / self.cfg.experiment.name / self.name

    @property
    def work_dir(self) -> Path:
        return Path(self.cfg.paths.work_dir) / self.cfg.experiment.name / self.name

    @property
    def scores_dir(self) -> Path:
        return Path(self.cfg.paths.scores_dir) / self.cfg.experiment.name / self.name

    def packets(self) -> list[dict[str, Any]]:
        if not evidence_is_current(self.cfg, self.adapter.pin):
            run_evidence(self.cfg, self)
        packets = {p["question_id"]: p for p in read_jsonl(evidence_path(self.cfg))}
        return [packets[q.qid] for q in self.questions]

    @cached_property
    def requests(self) -> list[Request]:
        """Built once per run: prepare, generate and seal share them (tokenizing long
        evidence three times was measurable)."""
        return self.requests_for(self.packets())

    def requests_for(self, packets: list[dict[str, Any]]) -> list[Request]:
        """Rebuild each question's request from its evidence packet (tokenizer only, no weights)."""
        out = []
        for question, packet in zip(self.questions, packets):
            text = rebuild_text(self.dataset.histories[question.history_id], packet)
            out.append(self.reader.prepare(self.prompt, text, question.text))
        return out

    def store(self) -> PredictionStore:
        return PredictionStore(Path(self.cfg.paths.cache_dir) / "predictions.sqlite")

    def journal(self) -> PredictionJournal:
        return PredictionJournal(self.work_dir / "predictions.jsonl")

    @property
    def sealed(self) -> bool:
        return (self.bundle_dir / "SEAL").is_file()


def run_evidence(cfg: DictConfig, run: Run | None = None) -> Path:
    run = run or Run(cfg)
    arm = instantiate_known(cfg.arm)
    packets = (e.packet() for e in select_all(arm, run.dataset, run.memories))
    progress = tqdm(packets, total=len(run.dataset.questions), desc=f"evidence {arm.name}", disable=None, mininterval=2)
    path = write_evidence(cfg, run.adapter.pin, progress)
    run.evidence_written = True
    log.info("wrote %d evidence packets to %s", len(run.dataset.questions), path)
    return path


def run_prepare(cfg: DictConfig, run: Run | None = None) -> Path:
    """Freeze the manifest (config, pins, preregistered contrasts) before any generation."""
    run = run or Run(cfg)
    if not run.questions:  # nothing to seal or score: say so before anything is frozen
        raise DataError(f"population {cfg.population.name!r} selects no question of {cfg.dataset.name}")
    requests = run.requests
    pin = requests[0].pin
    manifest = build_manifest(cfg, [q.qid for q in run.questions], run.adapter.pin, pin, run.prompt.version, ROOT)
    path = run.work_dir / "manifest.json"
    if not path.is_file():
        atomic_write_text(path, json.dumps(manifest, indent=1, sort_keys=True, ensure_ascii=False) + "\n")
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
        return _generate(cfg, run)


def _generate(cfg: DictConfig, run: Run) -> Path:
    run_prepare(cfg, run)
    store, journal = run.store(), run.journal()
    journaled = journal.read()
    pending: dict[str, Request] = {}
    backfill: dict[str, Prediction] = {}  # stored successes of this run the journal lacks
    for request in run.requests:
        stored = store.get(request.id)
        if (stored is None or stored.error is not None) and request.id in journaled:
            stored = journaled[request.id]  # resuming on another machine: the journal seeds the store
            store.put(stored)
        if stored is None or stored.error is not None:
            pending[request.id] = request
        elif request.id not in journaled:
            backfill[request.id] = stored
    journal.append(list(backfill.values()))
    log.info("%d requests to generate (%d already stored)", len(pending), len(run.questions) - len(pending))
    if pending and hasattr(run.reader, "preflight"):
        run.reader.preflight()  # a wrong URL or key fails here, not as 800 error predictions
    workers = max(1, int(getattr(run.reader, "concurrency", 1)))
    sitting = Sitting(run.work_dir / "sittings.jsonl", code=git_state(ROOT))
    progress = tqdm(total=len(pending), desc=f"generate {run.name}", disable=None, mininterval=2)

    def keep(prediction: Prediction) -> None:
        store.put(prediction)
        journal.append([prediction])
        sitting.finished(**prefill_counters(run.reader))
        progress.update(1)

    queue = iter(generation_order(pending.values()))
    with ThreadPoolExecutor(max_workers=workers) as pool:
        # At most `workers` requests are handed to the pool at a time: a pool given every
        # request up front would, on Ctrl-C or a failure, go on sending all of them (hours on
        # a CPU) and drop the answers.
        in_flight = {pool.submit(run.reader.generate, r) for r in islice(queue, workers)}
        try:
            while in_flight:
                for future in wait(in_flight, return_when=FIRST_COMPLETED).done:
                    in_flight.discard(future)
                    keep(future.result())
                    in_flight |= {pool.submit(run.reader.generate, r) for r in islice(queue, 1)}
        except BaseException:
            # The requests still in flight finish anyway: keep their answers, then stop.
            for future in wait(in_flight).done:
                if future.exception() is None:
                    keep(future.result())
            raise
    progress.close()
    store.close()
    run.prefill = prefill_counters(run.reader) or None
    if run.prefill:
        log.info("prefill tokens: %(prefill_tokens_total)d computed-or-reused, %(prefill_tokens_saved)d from the "
                 "prefix cache", run.prefill)
    return store.path


def generation_order(requests: Iterable[Request]) -> list[Request]:
    """Requests sorted by their input tokens (messages for readers without a tokenizer), so
    those sharing a prefix, such as every question over one history's latest state, are
    sent one after another and a prefix cache (ours, or a server's) computes it once. In
    question order the single-hop and multi-hop questions of a history are far apart, and
    each long history was prefilled twice. The bundle keeps question order either way."""
    return sorted(requests, key=lambda r: r.input_ids if r.input_ids is not None else canonical_json(list(r.messages)))


def prefill_counters(reader: Any) -> dict[str, int]:
    """The prefix-cache counters of a reader that keeps them (the local transformers one)."""
    if not hasattr(reader, "prefill_tokens_saved"):
        return {}
    return {"prefill_tokens_total": reader.prefill_tokens_total, "prefill_tokens_saved": reader.prefill_tokens_saved}


def run_seal(cfg: DictConfig, run: Run | None = None) -> Path:
    """Assemble the bundle from frozen manifest, evidence, requests and stored predictions."""
    run = run or Run(cfg)
    if run.sealed:
        check_reproduces(run)
        log.info("bundle already sealed, and its evidence and requests reproduce: %s", run.bundle_dir)
        return run.bundle_dir
    with run.lock:
        if run.sealed:  # sealed by the process that held the lock before us
            return run_seal(cfg, run)
        return _seal(cfg, run)


def _seal(cfg: DictConfig, run: Run) -> Path:
    manifest = read_json(run.work_dir / "manifest.json")
    requests, packets, store = run.requests, run.packets(), run.store()
    predictions: list[Prediction] = []
    for request in requests:
        prediction = store.get(request.id)
        if prediction is None:
            raise DataError(f"no stored prediction for request {request.id[:12]}; run stage=generate first")
        predictions.append(prediction)
    store.close()
    if failed := check_failures(predictions, cfg.get("allow_errors", False)):
        manifest = {**manifest, "sealed_with_errors": failed}
    preds = [{"question_id": q.qid, **p.to_json()} for q, p in zip(run.questions, predictions)]
    bundle = write_bundle(run.bundle_dir, manifest, packets, request_rows(run), preds)
    sittings = run.work_dir / "sittings.jsonl"
    if sittings.is_file():  # timings go to the scores, not into the deterministic bundle
        log.info("generation: %(sittings)d sitting(s), %(requests)d requests, %(seconds).1f s",
                 total(read_sittings(sittings)))
        run.scores_dir.mkdir(parents=True, exist_ok=True)
        shutil.move(sittings, run.scores_dir / "sittings.jsonl")
    shutil.rmtree(run.work_dir)  # manifest and journal now live, sealed, in the bundle
    return bundle


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
    The evidence is recomputed with this code, never read back from an earlier run's file."""
    if not run.evidence_written:
        run_evidence(run.cfg, run)
    sealed = sealed_digests(run.bundle_dir)
    fresh = {"evidence.jsonl": run.packets(), "requests.jsonl": request_rows(run)}
    changed = [name for name, rows in fresh.items() if sha256_text(jsonl_text(rows)) != sealed[name]]
    keys = config_differences(read_manifest(run.bundle_dir)["config"], experiment_config(run.cfg))
    if keys:
        changed.insert(0, f"config ({', '.join(keys[:5])})")
    if changed:
        raise SealError(f"{run.bundle_dir}: sealed from a different {', '.join(changed)} than this code and config "
                        f"produce; move the bundle away to run again")


def run_score(cfg: DictConfig, run: Run | None = None) -> Path:
    """Open labels through the vault (seal verified) and score every item."""
    from scoring.report import score_bundle  # scoring imports stay out of label-free stages

    run = run or Run(cfg)
    labels = LabelVault(run.adapter.load_labels).open(run.bundle_dir)
    return score_bundle(run.bundle_dir, labels, {q.qid: q for q in run.dataset.questions}, run.scores_dir)


def run_all(cfg: DictConfig) -> Path:
    run = Run(cfg)
    already_sealed = run.sealed
    timings = {}
    for name, stage in (("evidence", run_evidence), ("generate", run_generate), ("seal", run_seal), ("score", run_score)):
        start = time.perf_counter()
        result = stage(cfg, run)
        timings[name] = round(time.perf_counter() - start, 3)
    if not already_sealed:  # a rerun over a sealed bundle must not replace the timings of the run that made it
        info = {"seconds": timings, **({"prefill": run.prefill} if run.prefill else {})}
        atomic_write_text(run.scores_dir / "timings.json", json.dumps(info, indent=1) + "\n")
    return result


STAGES: dict[str, Callable[..., Path]] = {
    "evidence": run_evidence, "prepare": run_prepare, "generate": run_generate,
    "seal": run_seal, "score": run_score, "all": run_all,
}


def run(cfg: DictConfig) -> Path:
    if cfg.stage not in STAGES:
        raise ValueError(f"unknown stage {cfg.stage!r}; valid stages: {', '.join(sorted(STAGES))}")
    return STAGES[cfg.stage](cfg)
