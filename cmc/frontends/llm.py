"""Direct LLM extraction (paper section 3, appendix D.1): a frozen reader reads the history in
batches of numbered records, gives each record one status and names its relations itself.
Literal-span validation, a per-record repair and one source-only alignment call turn its
replies into a validated Extraction (the reply parsing is cmc/frontends/llm_replies.py). It
never sees a question or an answer.

Extraction reads each unique statement of the dataset once (the paper's 18,336 for
FactConsolidation), with one relation catalogue and one alignment; every occurrence in every
history is then served from it. Every call is an ordinary reader Request, so any backend
(local transformers, an OpenAI-compatible server) serves it and the prediction store makes
it content-addressed: a rerun sends nothing. The finished extraction is frozen to a JSON file
named by the frontend fingerprint and the statements' content; that file is what every arm,
and a run on another machine, reuses, because extraction is the expensive stage and must not
drift between arms.
A record the reader never gets right stays `unresolved`: the question's reader then sees its
original text (the paper's residual set), rather than a fact nobody checked.
"""
from __future__ import annotations

import dataclasses
import json
import logging
from functools import cached_property
from pathlib import Path
from typing import Iterable, Sequence

from tqdm import tqdm

from cmc.cache import PredictionStore
from cmc.errors import DataError
from cmc.generation import GenerationService
from cmc.extraction import Extraction, RecordExtraction, validate
from cmc.frontends.llm_replies import PARSER_VERSION, one_value_per_slot, parse_alignment, parse_reply
from cmc.io import atomic_write_text, canonical_json, sha256_text
from cmc.prompt import load_prompt
from cmc.readers.base import Prediction, Reader, Request
from cmc.records import History, Record

log = logging.getLogger(__name__)


def corpus_of(histories: Iterable[History]) -> History:
    """The unique statements of these histories in order of first occurrence, numbered from
    1, as one pseudo-history: what extraction reads (the paper extracts each of the 18,336
    unique FactConsolidation statements once, then serves every occurrence from that cache)."""
    statements = dict.fromkeys(r.text for h in histories for r in h)
    digest = sha256_text(canonical_json(list(statements)))
    return History(f"corpus-{digest[:16]}", "", tuple(Record(i, text) for i, text in enumerate(statements, 1)))


class LLMFrontend:
    """Extraction by a frozen reader (`extractor`), validated against the source records.

    `frozen` names a frozen extraction to use as it is, whoever made it (another machine,
    another URL for the same model): it must hold exactly this corpus's statements. Without
    it, the file is found under `extractions_dir` by the fingerprint of this extractor.
    `empty_fallback` is what a read with an empty selection falls back to under this
    frontend: the original history (Algorithm 1); `read.empty_fallback` takes it from here.
    """

    def __init__(self, extractor: Reader, cache_dir: str, extractions_dir: str, name: str = "llm",
                 batch_records: int = 20, repair_rounds: int = 1, frozen: str | None = None,
                 empty_fallback: str = "history") -> None:
        if batch_records < 1 or repair_rounds < 0:
            raise ValueError(f"batch_records must be >= 1 and repair_rounds >= 0, got {batch_records}, {repair_rounds}")
        self.extractor, self.name = extractor, name
        self.cache_dir, self.extractions_dir = Path(cache_dir), Path(extractions_dir)
        self.batch_records, self.repair_rounds, self.empty_fallback = batch_records, repair_rounds, empty_fallback
        self.frozen = Path(frozen) if frozen else None
        self.extract_prompt, self.align_prompt = load_prompt("extract_direct"), load_prompt("align_relations")
        self._corpus: Extraction | None = None
        self._statements: dict[str, RecordExtraction] = {}  # statement text -> its extraction

    @cached_property
    def frontend_id(self) -> str:
        """Name plus a fingerprint of what decides the extraction: the ids of an example
        extraction and alignment request (prompts, the wording built here, the extractor's
        identity, chat template and generation parameters), batching, repair, parse rules."""
        example = [Record(1, "The capital of Peru is Lima.")]
        probes = [self.batch_request(example, {"capital": example[0].text}, {1: "example"}),
                  self._align_request({"capital": example[0].text, "capital_city": example[0].text})]
        fingerprint = sha256_text(canonical_json({
            "probes": [p.id for p in probes], "batch_records": self.batch_records,
            "repair_rounds": self.repair_rounds, "parser": PARSER_VERSION,
        }))[:12]
        return f"{self.name}@{fingerprint}"

    def frozen_path(self, corpus: History) -> Path:
        if self.frozen is not None:
            return self.frozen
        return self.extractions_dir / self.frontend_id.replace("@", "-") / f"{corpus.history_id}.json"

    def prepare(self, histories: Sequence[History]) -> None:
        """Extract every unique statement of these histories once, or load the frozen
        extraction of exactly this set: one catalogue and one alignment for the corpus, so a
        statement means the same in every history that repeats it."""
        corpus = corpus_of(histories)
        extraction = self._load(corpus) or self._extract_and_freeze(corpus)
        self._corpus = extraction
        self._statements = {r.text: e for r, e in zip(corpus, extraction.records)}

    def extract(self, history: History) -> Extraction:
        """Each record served from its statement's extraction, with the record's position.
        Without a prepared corpus the history is prepared on its own; a history outside a
        prepared corpus is refused (extracting it apart would give it its own catalogue)."""
        if self._corpus is None:
            self.prepare([history])
        if missing := sum(r.text not in self._statements for r in history):
            raise DataError(f"{self.name}: history {history.history_id!r} has {missing} statements outside the "
                            f"prepared corpus {self._corpus.history_id}; prepare every history together")
        records = tuple(dataclasses.replace(self._statements[r.text], pos=r.pos, triples=tuple(
            dataclasses.replace(t, pos=r.pos) for t in self._statements[r.text].triples)) for r in history)
        extraction = Extraction(self._corpus.frontend_id, history.history_id, records, self._corpus.relations)
        validate(extraction, history)
        return extraction

    def _load(self, corpus: History) -> Extraction | None:
        """The frozen extraction of this corpus, if there is one, checked against it."""
        path = self.frozen_path(corpus)
        if not path.is_file():
            if self.frozen is not None:
                raise DataError(f"{path}: frontend.frozen names no file")
            return None
        try:
            data = json.loads(path.read_text(encoding="utf-8"))
            extraction = Extraction.from_json(data)
            statements = data["statements"]
        except (OSError, ValueError, KeyError, TypeError) as exc:
            raise DataError(f"{path}: unreadable frozen extraction ({exc}); delete it to extract again") from exc
        if statements != [r.text for r in corpus] or extraction.history_id != corpus.history_id:
            raise DataError(f"{path}: holds the extraction of {extraction.history_id}, not of this dataset's "
                            f"{len(corpus)} statements ({corpus.history_id})")
        if self.frozen is None and extraction.frontend_id != self.frontend_id:
            raise DataError(f"{path}: made by {extraction.frontend_id}, not {self.frontend_id}")
        validate(extraction, corpus)
        log.info("%s: using the frozen extraction %s (made by %s)", self.name, path, extraction.frontend_id)
        return extraction

    def _extract_and_freeze(self, corpus: History) -> Extraction:
        """Extract through the prediction store (a rerun after a failure resends only what
        is missing), validate, and freeze with the statements and the alignment beside it.
        If another process froze this corpus meanwhile, its file wins and is used."""
        store = PredictionStore(self.cache_dir / "predictions.sqlite")
        try:
            extraction, alignment = self._extract(corpus, GenerationService(self.extractor, store, label=self.name))
        finally:
            store.close()
        validate(extraction, corpus)
        path = self.frozen_path(corpus)
        if path.is_file():
            return self._load(corpus)
        frozen = {**extraction.to_json(), "alignment": alignment, "statements": [r.text for r in corpus]}
        atomic_write_text(path, canonical_json(frozen) + "\n")
        return extraction

    def _extract(self, corpus: History, service: GenerationService) -> tuple[Extraction, dict[str, str]]:
        catalogue: dict[str, str] = {}  # relation -> the first statement that used it (alignment's example)
        records: list[RecordExtraction] = []
        given_up = 0
        starts = range(0, len(corpus), self.batch_records)
        for start in tqdm(starts, desc=f"extract {corpus.history_id}", disable=None, mininterval=2):
            batch = corpus.records[start:start + self.batch_records]
            accepted, problems = self._ask(service, batch, catalogue, {})
            for _ in range(self.repair_rounds):
                # One statement per repair call, told what was wrong: short enough that a
                # reply cut by the token cap cannot recur, and a bad neighbour cannot spoil it.
                retried: dict[int, str] = {}
                for pos, problem in sorted(problems.items()):
                    fixed, still = self._ask(service, [corpus.record(pos)], catalogue, {pos: problem})
                    accepted.update(fixed)
                    retried.update(still)
                problems = retried
            given_up += len(problems)
            for record in batch:
                result = accepted.get(record.pos, RecordExtraction(record.pos, "unresolved"))
                records.append(result)
                for triple in result.triples:
                    catalogue.setdefault(triple.relation, record.text)
        alignment = self._align(service, catalogue)
        final = lambda relation: alignment.get(relation, relation)  # noqa: E731
        aligned = [one_value_per_slot(dataclasses.replace(r, triples=tuple(
            dataclasses.replace(t, relation=final(t.relation)) for t in r.triples))) for r in records]
        split = sum(a.status == "unresolved" and r.status == "facts" for a, r in zip(aligned, records))
        log.info("%s: %d statements, %d relation names (%d merged by alignment), %d unresolved after repair, "
                 "%d with two values for one slot", corpus.history_id, len(records), len(catalogue), len(alignment),
                 given_up, split)
        relations = tuple(dict.fromkeys(t.relation for r in aligned for t in r.triples))
        return Extraction(self.frontend_id, corpus.history_id, tuple(aligned), relations), alignment

    def batch_request(self, batch: Sequence[Record], catalogue: dict[str, str], problems: dict[int, str]) -> Request:
        names = ", ".join(catalogue) or "(none yet)"
        lines = [f"Relation names already in use: {names}"]
        lines += [f"Your last answer for record {pos} was rejected: {why}." for pos, why in problems.items()]
        lines.append(f"Give the JSON for {self._span(batch)}.")
        return self.extractor.prepare(self.extract_prompt, "\n".join(r.line() for r in batch), "\n".join(lines))

    def _align_request(self, catalogue: dict[str, str]) -> Request:
        evidence = "\n".join(f"{i}. {name}: {example}" for i, (name, example) in enumerate(catalogue.items(), 1))
        return self.extractor.prepare(self.align_prompt, evidence, "Give the JSON.")

    @staticmethod
    def _span(batch: Sequence[Record]) -> str:
        return f"record {batch[0].pos}" if len(batch) == 1 else f"records {batch[0].pos} to {batch[-1].pos}"

    def _ask(self, service: GenerationService, batch: Sequence[Record], catalogue: dict[str, str],
             problems: dict[int, str]) -> tuple[dict[int, RecordExtraction], dict[int, str]]:
        prediction = self._answer(service, self.batch_request(batch, catalogue, problems), self._span(batch))
        accepted, rejected = parse_reply(prediction.raw or "", batch)
        if prediction.finish_reason == "length":  # say so: the repair then knows to be brief
            rejected = {pos: f"{why} (the answer was cut at the token cap)" for pos, why in rejected.items()}
        return accepted, rejected

    def _align(self, service: GenerationService, catalogue: dict[str, str]) -> dict[str, str]:
        if len(catalogue) < 2:
            return {}
        prediction = self._answer(service, self._align_request(catalogue), "the relation alignment")
        if prediction.finish_reason == "length":
            raise DataError(f"{self.name}: the relation alignment of {len(catalogue)} names was cut at the token cap; "
                            f"raise frontend.extractor.max_new_tokens")
        return parse_alignment(prediction.raw or "", list(catalogue))

    def _answer(self, service: GenerationService, request: Request, where: str) -> Prediction:
        """The stored answer to this exact request, else a fresh generation (the service
        stores it). A failed generation stops extraction: freezing around it would make the
        failure part of every arm's memory. It is retried on the next run."""
        if request.evidence_truncated_tokens:
            raise DataError(f"{self.name}: {where} does not fit the extractor's input cap; lower batch_records")
        prediction = service.answer(request)
        if prediction.error is not None:
            raise DataError(f"{self.name}: the extractor failed on {where}: {prediction.error}; rerun to retry")
        return prediction
