"""Direct LLM extraction (paper section 3, appendix D.1): a frozen reader reads the history in
batches of numbered records, gives each record one status and names its relations itself.
Literal-span validation, repair (per record, or batched: cmc/frontends/batched.py) and one
source-only alignment call turn its replies into a validated Extraction (the reply parsing is
cmc/frontends/llm_replies.py). It never sees a question or an answer.

Extraction reads each unique statement of the dataset once (the paper's 18,336 for
FactConsolidation), with one relation catalogue and one alignment; every occurrence in every
history is then served from it. Every call is an ordinary reader Request, so any backend
(local transformers, an OpenAI-compatible server) serves it, through the shared generation
service (generation/extractor_calls.py): the prediction store and a committed journal make it
content-addressed, so a rerun, here or on another machine, sends nothing already answered.
The finished extraction is frozen to a JSON file named by the frontend fingerprint and the
statements' content, with its cost (calls, tokens, seconds); that file is what every arm,
and a run on another machine, reuses, because extraction is the expensive stage and must not
drift between arms.
A record the reader never gets right stays `unresolved`: the question's reader then sees its
original text (the paper's residual set), rather than a fact nobody checked.
"""
from __future__ import annotations

import dataclasses
import logging
from functools import cached_property
from pathlib import Path
from typing import Any, Iterable, Sequence

from cmc.extraction import Extraction, RecordExtraction, validate
from cmc.frontends import ExtractorCalls, OpenCalls
from cmc.frontends.alignment import ALIGN_MODES, Alignment
from cmc.frontends.batched import REPAIR_MODES, SWEEP_VERSION, BatchedCalls, learn, span_of
from cmc.frontends.frozen import read_frozen, records_sha256, write_frozen
from cmc.frontends.llm_replies import LINES_PARSER_VERSION, PARSER_VERSION, REPLY_FORMATS, subject_named_first
from cmc.frontends.reply_grammar import GRAMMAR_VERSION, OBJECT_POSITIONS
from cmc.frontends.tightening import TIGHTEN_VERSION
from cmc.records import History, Record
from common.calls import Reader, Request
from common.configurable import configurable
from common.errors import DataError
from common.io import canonical_json, sha256_text
from common.progress import Progress
from common.prompt import load_prompt

log = logging.getLogger(__name__)


def corpus_of(histories: Iterable[History]) -> History:
    """The unique statements of these histories in order of first occurrence, numbered from
    1, as one pseudo-history: what extraction reads (the paper extracts each of the 18,336
    unique FactConsolidation statements once, then serves every occurrence from that cache)."""
    statements = dict.fromkeys(r.text for h in histories for r in h)
    digest = sha256_text(canonical_json(list(statements)))
    return History(f"corpus-{digest[:16]}", "", tuple(Record(i, text) for i, text in enumerate(statements, 1)))


@configurable
class LLMFrontend(BatchedCalls, Alignment):
    """Extraction by a frozen reader (`extractor`), validated against the source records.

    `frozen` names a frozen extraction to use as it is, whoever made it (another machine,
    another URL for the same model): it must hold exactly this corpus's statements. Without
    it, the file is found under `extractions_dir` by the fingerprint of this extractor.
    `empty_fallback` is what a read with an empty selection falls back to under this
    frontend: the original history (Algorithm 1); `read.empty_fallback` takes it from here.
    After `prepare`, `metadata` holds what the frozen file records beside the records (the
    alignment, the cost; an older file may lack the cost). `constrained` decodes each batch
    under its reply format's grammar (cmc/frontends/reply_grammar.py); off, ids stay as before.
    `object_position` (constrained lines only) is where the grammar lets each object lie against
    its subject: `any` span of the record (the default; ids as before), `after_subject`, or
    `apart` from it, before or after (reply_grammar.OBJECT_POSITIONS).
    `repair` asks a batch's rejected records one a call (`per_record`) or all in one (`batched`).
    `prompt` names another extraction prompt for the reply format (common/prompts/), such as
    one with worked examples; unset, the format's own (`extract_direct`, `extract_lines`).
    `align: forms` aligns names by literal sentence form instead of by a call
    (cmc/frontends/alignment.py).
    `subject_first` turns round every accepted triple whose subject the record names after its
    object: the convention of extract_lines_examples, which a small model breaks by putting the
    person first ("Tim Cook | chief_executive_officer | Apple Inc."). It assumes the corpus
    names subjects first, as every FactConsolidation form does ("Coco Chanel founded Chanel"
    would be turned wrongly); off, ids stay as before.
    `tighten` drops framing words a triple's spans share with a more specific sentence form other
    triples were read in (cmc/frontends/tightening.py), before alignment; no call, off by default.
    `sweep` asks every statement still unresolved after the whole pass once more on its own
    (cmc/frontends/batched.py); off by default.
    """

    def __init__(self, extractor: Reader, cache_dir: str, extractions_dir: str, name: str = "llm",
                 batch_records: int = 20, repair_rounds: int = 1, frozen: str | None = None,
                 empty_fallback: str = "history", reply_format: str = "json", constrained: bool = False,
                 repair: str = "per_record", prompt: str | None = None, subject_first: bool = False,
                 align: str = "llm", tighten: bool = False, sweep: bool = False, object_position: str = "any") -> None:
        if batch_records < 1 or repair_rounds < 0:
            raise ValueError(f"batch_records must be >= 1 and repair_rounds >= 0, got {batch_records}, {repair_rounds}")
        if reply_format not in REPLY_FORMATS:
            raise ValueError(f"reply_format must be one of {', '.join(REPLY_FORMATS)}, got {reply_format!r}")
        if align not in ALIGN_MODES:
            raise ValueError(f"align must be one of {', '.join(ALIGN_MODES)}, got {align!r}")
        if repair not in REPAIR_MODES:
            raise ValueError(f"repair must be one of {', '.join(REPAIR_MODES)}, got {repair!r}")
        if object_position not in OBJECT_POSITIONS:
            raise ValueError(f"object_position must be one of {', '.join(OBJECT_POSITIONS)}, got {object_position!r}")
        placed = constrained and object_position in REPLY_FORMATS[reply_format].object_positions
        if object_position != "any" and not placed:
            raise ValueError(f"object_position {object_position!r} needs constrained: true and a reply format whose "
                             f"grammar places objects (lines), got constrained={constrained}, reply_format={reply_format!r}")
        self.extractor, self.name = extractor, name
        self.cache_dir, self.extractions_dir = Path(cache_dir), Path(extractions_dir)
        self.batch_records, self.repair_rounds, self.empty_fallback = batch_records, repair_rounds, empty_fallback
        self.frozen = Path(frozen) if frozen else None
        self.reply_format, self.reply, self.constrained = reply_format, REPLY_FORMATS[reply_format], constrained
        self.repair, self.align, self.subject_first, self.tighten = repair, align, subject_first, tighten
        self.sweep, self.object_position = sweep, object_position
        self.tightened = 0  # triples whose spans the last extraction tightened
        self.turned: dict[int, int] = {}  # statement -> triples turned round in its last accepted answer
        self.extract_prompt = load_prompt(prompt or self.reply.prompt)
        self.align_prompt = load_prompt("align_relations")
        self._corpus: Extraction | None = None
        self._statements: dict[str, RecordExtraction] = {}  # statement text -> its extraction
        self.metadata: dict[str, Any] = {}
        self.open_calls: OpenCalls | None = None

    def use_generation(self, open_calls: OpenCalls) -> None:
        """Hand the frontend the generation service it extracts through (the stage driver
        does; a viewer or a check does not, and then only a frozen or journaled extraction
        loads)."""
        self.open_calls = open_calls

    @cached_property
    def frontend_id(self) -> str:
        """Name plus a fingerprint of what decides the extraction (`decisive`)."""
        return f"{self.name}@{sha256_text(canonical_json(self.decisive()))[:12]}"

    def decisive(self) -> dict[str, Any]:
        """What decides the extraction: the ids of an example extraction and alignment
        request (prompts, the wording built here, the extractor's identity, chat template and
        generation parameters), batching, repair, parse rules."""
        example = [Record(1, "The capital of Peru is Lima.")]
        probes = [self.batch_request(example, {"capital": example[0].text}, {1: "example"}),
                  self._align_request({"capital": example[0].text, "capital_city": example[0].text})]
        lines = {"lines_parser": LINES_PARSER_VERSION} if self.reply_format == "lines" else {}
        position = {"object_position": self.object_position} if self.object_position != "any" else {}
        grammar = {"reply_grammar": GRAMMAR_VERSION, **position} if self.constrained else {}
        return {"probes": [p.id for p in probes], "batch_records": self.batch_records,
                "repair_rounds": self.repair_rounds, "parser": PARSER_VERSION, **lines, **grammar,
                **self.repair_decisive(), **self.align_decisive(),
                **({"subject_first": True} if self.subject_first else {}),
                **({"tighten": TIGHTEN_VERSION} if self.tighten else {}),
                **({"sweep": SWEEP_VERSION} if self.sweep else {})}

    def reading_metadata(self) -> dict[str, Any]:
        """What the frozen file records of how replies were read: the triples turned round."""
        return {**({"subject_first_turned": sum(self.turned.values())} if self.subject_first else {}),
                **({"spans_tightened": self.tightened} if self.tighten else {})}

    def work_path(self, corpus: History, suffix: str) -> Path:
        """A file of this corpus's extraction under `extractions_dir`, named by the
        fingerprint: `.json` the frozen extraction, `.journal.jsonl` every answered call (the
        committed record a rerun on another machine resumes from), `.sittings.jsonl` their
        timing."""
        return self.extractions_dir / self.frontend_id.replace("@", "-") / f"{corpus.history_id}{suffix}"

    def frozen_path(self, corpus: History) -> Path:
        return self.frozen if self.frozen is not None else self.work_path(corpus, ".json")

    @property
    def content_pin(self) -> dict[str, str] | None:
        """What a manifest records of the prepared extraction: who made it and the hash of its
        records. A replay or seal check rebuilds it (from the frozen file or, without one,
        from the journal's replies) and compares: an edited file or a forged reply differs."""
        if self._corpus is None:
            return None
        return {"frontend_id": self._corpus.frontend_id, "records_sha256": records_sha256(self._corpus)}

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
        extraction, self.metadata = read_frozen(path, corpus, None if self.frozen is not None else self.frontend_id)
        log.info("%s: using the frozen extraction %s (made by %s)", self.name, path, extraction.frontend_id)
        return extraction

    def _extract_and_freeze(self, corpus: History) -> Extraction:
        """Extract through the generation service (a rerun after a failure, here or on
        another machine with the journal, resends only what is missing), validate, and
        freeze with the statements, the metadata and the cost beside it. If another process
        froze this corpus meanwhile, its file wins and is used."""
        if self.open_calls is None:
            raise DataError(f"{self.frozen_path(corpus)}: no frozen extraction here, and this frontend was handed no "
                            f"generation service to extract with (only a run's stages extract)")
        with self.open_calls(self.extractor, self.cache_dir / "predictions.sqlite",
                             self.work_path(corpus, ".journal.jsonl"), self.work_path(corpus, ".sittings.jsonl"),
                             self.name) as calls:
            self.turned = {}
            extraction, metadata = self._extract(corpus, calls)
            metadata = {**metadata, "cost": calls.cost()}
        validate(extraction, corpus)
        path = self.frozen_path(corpus)
        if path.is_file():
            return self._load(corpus)
        cost = metadata["cost"]
        log.info("%s: %d calls, %d input and %d output tokens, %.1f s", self.name, cost["calls"],
                 cost["input_tokens"], cost["output_tokens"], cost["seconds"])
        write_frozen(path, extraction, metadata, corpus)
        self.metadata = metadata
        return extraction

    def _extract(self, corpus: History, calls: ExtractorCalls) -> tuple[Extraction, dict[str, Any]]:
        """Every statement in batches, in corpus order, then one alignment; the metadata
        frozen beside the records is the alignment."""
        catalogue: dict[str, str] = {}  # relation -> the first statement that used it (alignment's example)
        records: list[RecordExtraction] = []
        left: dict[int, str] = {}  # statement -> why its last answer was rejected
        progress = Progress(f"extract {corpus.history_id}", len(corpus), done_word="statements extracted")
        for start in range(0, len(corpus), self.batch_records):
            batch = corpus.records[start:start + self.batch_records]
            sent_before = calls.sent
            accepted, problems = self.extract_batch(calls, batch, catalogue)
            left.update(problems)
            records += [accepted.get(r.pos, RecordExtraction(r.pos, "unresolved")) for r in batch]
            learn(catalogue, batch, accepted)
            progress.update(len(batch), replayed=calls.sent == sent_before)
        progress.close()
        log.info("%s: %d unresolved after repair", corpus.history_id, sum(r.status == "unresolved" for r in records))
        if self.sweep:
            records = self.sweep_unresolved(calls, corpus.records, records, catalogue, left)
        extraction, alignment = self.finish(corpus, calls, catalogue, records)
        return extraction, {"alignment": alignment, **self.reading_metadata()}

    def extract_batch(self, calls: ExtractorCalls, batch: Sequence[Record], catalogue: dict[str, str]
                      ) -> tuple[dict[int, RecordExtraction], dict[int, str]]:
        """One batch asked directly, then its rejected records repaired, told what was wrong,
        up to `repair_rounds` times (`repair_round`): the validated extractions, and what is
        still wrong with every record never got right."""
        accepted, problems = self._ask(calls, batch, catalogue, {}, "extract")
        for _ in range(self.repair_rounds):
            fixed, problems = self.repair_round(calls, batch, catalogue, problems)
            accepted.update(fixed)
        return accepted, problems

    def batch_request(self, batch: Sequence[Record], catalogue: dict[str, str], problems: dict[int, str],
                      span: str | None = None) -> Request:
        names = ", ".join(catalogue) or "(none yet)"
        lines = [f"Relation names already in use: {names}"]
        lines += [f"Your last answer for record {pos} was rejected: {why}." for pos, why in problems.items()]
        lines.append(f"{self.reply.ask} {span or span_of(batch)}.")
        request = self.extractor.prepare(self.extract_prompt, "\n".join(r.line() for r in batch), "\n".join(lines))
        # `constrained`: the engine decodes the reply under the format's grammar for this batch
        if not self.constrained:
            return request
        return dataclasses.replace(request, constraint=self.reply.grammar(batch, self.object_position))

    def _ask(self, calls: ExtractorCalls, batch: Sequence[Record], catalogue: dict[str, str],
             problems: dict[int, str], purpose: str, span: str | None = None
             ) -> tuple[dict[int, RecordExtraction], dict[int, str]]:
        prediction = calls.answer(self.batch_request(batch, catalogue, problems, span), span or span_of(batch),
                                  purpose)
        accepted, rejected = self.reply.parse(prediction.raw or "", batch)
        if self.subject_first:
            for pos, (record, turned) in [(pos, subject_named_first(r)) for pos, r in accepted.items()]:
                accepted[pos], self.turned[pos] = record, turned
        if prediction.finish_reason == "length":  # say so: the repair then knows to be brief
            rejected = {pos: f"{why} (the answer was cut at the token cap)" for pos, why in rejected.items()}
        return accepted, rejected
