"""A run's view, in one shape for every stage: an arm or a multi-call method.

An arm selects an evidence packet per question before generation and asks one request of
it; a method is a selection that makes calls: what it reads depends on its calls' answers,
so it has no packet before generation and writes its trace at seal. The stages (evidence,
generate, seal, the re-check, score) ask the view and never branch on which kind it is.
Each method here is handed the answers it works from (the generation service, a lookup of
stored answers, a bundle's own) rather than fetching them.
"""
from __future__ import annotations

import logging
from pathlib import Path
from typing import TYPE_CHECKING, Any, Callable, Protocol

from arms.multicall import Method
from cmc.evidence import select_all
from common.calls import Prediction, Request
from common.configurable import instantiate_known
from common.errors import DataError
from common.io import canonical_json, sha256_text
from generation.service import GenerationService
from harness.method_runs import bundle_rows, generate_method, rerun_over, run_method, stored_answers
from harness.packets import write_run_evidence

if TYPE_CHECKING:
    from harness.runs import Run

log = logging.getLogger(__name__)
Rows = dict[str, list[dict[str, Any]]]
Lookup = Callable[[str], Prediction | None]


class View(Protocol):
    name: str
    evidence_label: str  # what a replay calls a differing evidence row
    recheck_before_scoring: bool  # whether stage=score re-executes it over its own answers first

    @property
    def prompt_version(self) -> str: ...

    def reader_pin(self) -> dict[str, Any]: ...

    def write_evidence(self) -> Path: ...

    def generate(self, service: GenerationService) -> None: ...

    def seal_rows(self, lookup: Lookup, allow_errors: bool | float) -> tuple[Rows, dict[str, Any] | None]: ...

    def rebuilt_rows(self, answers: dict[str, Prediction], where: str) -> Rows: ...

    def scored_outputs(self, rows: Rows) -> list[tuple[str, str | None]]: ...


class ArmView:
    """One request per question, built from the packet the arm selected."""

    evidence_label, recheck_before_scoring = "evidence", False

    def __init__(self, run: "Run", arm: Any) -> None:
        self.run, self.arm, self.name = run, arm, run.cfg.arm.name

    @property
    def prompt_version(self) -> str:
        return self.run.prompt.version

    def reader_pin(self) -> dict[str, Any]:
        return self.run.requests[0].pin

    def write_evidence(self) -> Path:
        return write_run_evidence(self.run)

    def generate(self, service: GenerationService) -> None:
        service.generate(self.run.requests_to_generate())

    def seal_rows(self, lookup: Lookup, allow_errors: bool | float) -> tuple[Rows, dict[str, Any] | None]:
        """The bundle rows from the packets on disk and the stored answers; refused while a
        request has none, or more failed than the user allowed."""
        run, predictions = self.run, []
        for request in run.requests:
            if (prediction := lookup(request.id)) is None:
                raise DataError(f"no stored prediction for request {request.id[:12]}; run stage=generate first")
            predictions.append(prediction)
        failed = check_failures(predictions, allow_errors)
        return {"evidence.jsonl": run.packets(), "requests.jsonl": request_rows(run.questions, run.requests),
                "predictions.jsonl": [{"question_id": q.qid, **p.to_json()} for q, p in zip(run.questions, predictions)]
                }, failed

    def rebuilt_rows(self, answers: dict[str, Prediction], where: str) -> Rows:
        """Packets selected anew in memory (never read back from an earlier run's file, never
        written) and the requests built from them; the answers are not needed."""
        run = self.run
        packets = [e.packet() for e in select_all(self.arm, run.dataset, run.memories, run.questions)]
        return {"evidence.jsonl": packets, "requests.jsonl": request_rows(run.questions, run.requests_for(packets))}

    def scored_outputs(self, rows: Rows) -> list[tuple[str, str | None]]:
        return [(row["question_id"], row["raw"]) for row in rows["predictions.jsonl"]]


class MethodView:
    """A selection that makes calls: run over whichever answers a stage hands it."""

    evidence_label, recheck_before_scoring = "trace", True

    def __init__(self, run: "Run", method: Method) -> None:
        self.run, self.method, self.name = run, method, method.name

    @property
    def prompt_version(self) -> str:
        return self.method.prompt_version

    def reader_pin(self) -> dict[str, Any]:
        """Read off an empty completion, prepared, never sent."""
        return self.run.reader.prepare_completion("", self.prompt_version, 1).pin

    def write_evidence(self) -> Path:
        log.info("%s is a multi-call method: no evidence stage, its reads are traced at seal", self.name)
        return self.run.work_dir

    def generate(self, service: GenerationService) -> None:
        done = generate_method(self.run, self.method, service.answer)
        log.info("%s: %d of its %d calls sent now, the rest held (store or journal)", self.name,
                 service.counters()["requests_sent"], sum(len(q.calls) for q in done))

    def seal_rows(self, lookup: Lookup, allow_errors: bool | float) -> tuple[Rows, dict[str, Any] | None]:
        """A question whose call failed cannot be sealed (allow_errors covers one-call arms
        only): a method's later calls depend on the failed one's answer."""
        answer = stored_answers(lookup, str(self.run.work_dir))
        done = [run_method(self.run, self.method, q, answer) for q in self.run.questions]
        return bundle_rows(self.run, self.method, done), None

    def rebuilt_rows(self, answers: dict[str, Prediction], where: str) -> Rows:
        return rerun_over(self.run, self.method, answers, where)

    def scored_outputs(self, rows: Rows) -> list[tuple[str, str | None]]:
        return [(row["question_id"], row["answer"]) for row in rows["evidence.jsonl"]]


def build_view(run: "Run") -> View:
    """The configured view: a multi-call method if the arm config builds one, else an arm."""
    view = instantiate_known(run.cfg.arm)
    return MethodView(run, view) if isinstance(view, Method) else ArmView(run, view)


def request_rows(questions: list[Any], requests: list[Request]) -> list[dict[str, Any]]:
    """What a bundle keeps of each request: ids, sizes and a hash, not the rendered text."""
    return [
        {"question_id": q.qid, "request_id": r.id, "reader": r.reader, "prompt_version": r.prompt_version,
         "generation": r.generation, "input_tokens": len(r.input_ids) if r.input_ids is not None else None,
         "evidence_truncated_tokens": r.evidence_truncated_tokens,
         "messages_sha256": sha256_text(canonical_json(list(r.messages)))}
        for q, r in zip(questions, requests)
    ]


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
