"""One (dataset, frontend, population, arm, reader) run: its pieces, built lazily once, and
the folders it writes (evidence, work, bundle, scores)."""
from __future__ import annotations

from dataclasses import dataclass
from functools import cached_property
from pathlib import Path
from typing import Any

from omegaconf import DictConfig

from cmc.evidence import rebuild_text
from cmc.frontends.llm import LLMFrontend
from cmc.graph import Memory, build_memories
from cmc.records import Dataset, Question
from common.calls import Reader, Request
from common.configurable import instantiate_known
from common.io import read_jsonl
from common.prompt import Prompt, load_prompt
from generation.extractor_calls import ExtractorCalls
from generation.journal import PredictionJournal
from generation.locks import RunLock
from generation.service import generation_order
from harness.confine import check_name
from harness.packets import evidence_is_current, evidence_path, write_run_evidence
from harness.views import View, build_view
from provenance.bundle import read_manifest
from sources.population import Population, shard_slice


def build_frontend(node: Any, where: str = "frontend") -> Any:
    """The configured frontend; an LLM one is handed the generation service it extracts
    through (the same store, journal and sittings every generation uses)."""
    frontend = instantiate_known(node, where)
    if isinstance(frontend, LLMFrontend):
        frontend.use_generation(ExtractorCalls)
    return frontend


@dataclass
class Run:
    """One run's context, shared by every stage of one process: its name, folders and files
    fixed when it is made (plain attributes, so a stage reads them instead of asking), and
    its heavier pieces (dataset, memories, reader, requests) built once, when first needed."""

    cfg: DictConfig
    prefill: dict[str, int] | None = None  # the reader's counters after generate
    checked: bool = False  # its bundle re-checked (or just sealed) by this process
    frozen_reader_pin: dict[str, Any] | None = None  # a replayed bundle's; else read from this run's manifest

    def __post_init__(self) -> None:
        parts = {key: self.cfg[key].name for key in ("dataset", "frontend", "population", "arm", "reader")}
        for key, part in {**parts, "experiment": self.cfg.experiment.name}.items():
            check_name(key, part)  # names become folder names
        self.name = "-".join(parts.values())
        shard = self.population.shard
        # "" for a whole run; ".shard-i-of-n" names a shard's own journal, sittings and lock
        self.shard_suffix = "" if shard is None else f".shard-{shard[0]}-of-{shard[1]}"
        paths, experiment = self.cfg.paths, self.cfg.experiment.name
        self.bundle_dir = Path(paths.bundles_dir) / experiment / self.name
        self.work_dir = Path(paths.work_dir) / experiment / self.name
        self.scores_dir = Path(paths.scores_dir) / experiment / self.name
        self.store_path = Path(paths.cache_dir) / "predictions.sqlite"
        self.journal_path = self.work_dir / f"predictions{self.shard_suffix}.jsonl"  # this process's (or shard's)
        self.sittings_path = self.work_dir / f"sittings{self.shard_suffix}.jsonl"

    @cached_property
    def adapter(self) -> Any:
        return instantiate_known(self.cfg.dataset)

    @cached_property
    def dataset(self) -> Dataset:
        return self.adapter.load()

    @cached_property
    def population(self) -> Population:
        return instantiate_known(self.cfg.population, "population")

    @cached_property
    def questions(self) -> list[Question]:
        return self.population.select(self.dataset.questions)

    @cached_property
    def frontend(self) -> Any:
        return build_frontend(self.cfg.frontend)

    @cached_property
    def memories(self) -> dict[str, Memory]:
        return build_memories(self.dataset, self.frontend)

    def extraction_pin(self) -> dict[str, str] | None:
        """The LLM frontends' extraction pin (None for the grammar frontend, which has none)."""
        if not hasattr(self.frontend, "content_pin"):
            return None
        self.memories  # noqa: B018  (prepares the frontend)
        return self.frontend.content_pin

    def extraction_differs(self, manifest: dict[str, Any]) -> bool:
        """Whether a manifest froze an extraction pin other than the one this run reads now
        (a manifest without one, made before pins or by the grammar frontend, never differs)."""
        return manifest.get("extraction") is not None and self.extraction_pin() != manifest["extraction"]

    @cached_property
    def reader(self) -> Reader:
        """The configured reader, held to what this run's frozen manifest fixed (the dtype
        `auto` resolved to, the identity scheme), so resuming or re-checking a run on
        another machine or library version rebuilds the same request ids."""
        reader = instantiate_known(self.cfg.reader)
        frozen = self.frozen_reader_pin if self.frozen_reader_pin is not None else self._recorded_reader_pin()
        if frozen:
            reader.freeze(frozen)
        return reader

    def _recorded_reader_pin(self) -> dict[str, Any] | None:
        for manifest in (self.bundle_dir / "manifest.json", self.work_dir / "manifest.json"):
            if manifest.is_file():
                return read_manifest(manifest.parent).get("reader_pin")
        return None

    @cached_property
    def prompt(self) -> Prompt:
        return load_prompt(self.cfg.prompt)

    @cached_property
    def view(self) -> View:
        """The configured view, an arm or a multi-call method, in the one shape every stage
        asks (harness/views.py)."""
        return build_view(self)

    @cached_property
    def lock(self) -> RunLock:
        """Held from generation to seal: one process per run (generation/locks.py)."""
        where = Path(self.cfg.paths.cache_dir) / "locks" / f"{self.cfg.experiment.name}-{self.name}{self.shard_suffix}.lock"
        return RunLock(where, f"run {self.cfg.experiment.name}/{self.name}{self.shard_suffix}")

    def packets(self) -> list[dict[str, Any]]:
        if not evidence_is_current(self.cfg, self.adapter.pin):
            write_run_evidence(self, only_if_stale=True)
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

    def journals(self) -> list[PredictionJournal]:
        """Every journal in the work folder: the run's and each shard's, merged at seal."""
        return [PredictionJournal(p) for p in sorted(self.work_dir.glob("predictions*.jsonl"))]

    def requests_to_generate(self) -> list[Request]:
        """The whole run's requests, or this shard's contiguous slice of them in generation
        order (a shard then keeps requests that share a prefix together)."""
        shard = self.population.shard
        return self.requests if shard is None else shard_slice(generation_order(self.requests), shard)

    @property
    def sealed(self) -> bool:
        return (self.bundle_dir / "SEAL").is_file()
