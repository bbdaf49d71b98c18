"""Runs whose view is a multi-call method (arms/multicall.py): the pieces harness/views.py's
MethodView is made of.

A method has no evidence packet before generation: what it reads depends on its calls'
answers. So every stage runs the method itself, over a different source of answers: the
generation service while generating (stored answers are reused, the rest sent), the store
at seal, the bundle's own predictions at replay. A greedy method over the same answers
rebuilds the same calls, so each of these is the same function of the same data.

A method bundle keeps the four files of an arm's: evidence.jsonl has one row per question
(the records it read as a packet, its answer, its trace and its calls in order),
requests.jsonl and predictions.jsonl one row per call, tagged with question and step.
"""
from __future__ import annotations

import logging
from dataclasses import dataclass
from pathlib import Path
from typing import TYPE_CHECKING, Any, Callable

from arms.multicall import Call, Caller, CallFailed, Method, MethodAnswer, trace_row
from cmc.records import Question
from common.calls import Prediction, Request
from common.errors import DataError
from common.io import canonical_json, sha256_text
from provenance.bundle import read_bundle_jsonl
from sources.population import shard_slice

if TYPE_CHECKING:
    from harness.runs import Run

log = logging.getLogger(__name__)
Answer = Callable[[Request], Prediction]


@dataclass
class QuestionRun:
    question: Question
    calls: list[Call]
    result: MethodAnswer | None  # None: a call failed and the question could not finish
    failure: CallFailed | None = None


def run_method(run: "Run", method: Method, question: Question, answer: Answer) -> QuestionRun:
    caller = Caller(run.reader, answer, method.prompt_version)
    try:
        result = method.answer(question, run.memories[question.history_id], caller)
    except CallFailed as failure:
        return QuestionRun(question, caller.calls, None, failure)
    return QuestionRun(question, caller.calls, result)


def questions_to_generate(run: "Run") -> list[Question]:
    """The run's questions, or this shard's contiguous slice of them."""
    shard = run.population.shard
    return run.questions if shard is None else shard_slice(run.questions, shard)


def generate_method(run: "Run", method: Method, answer: Answer) -> list[QuestionRun]:
    """Run the method on every question, one call at a time. A failed call ends its
    question (the next questions still run); a rerun resends only failed calls."""
    done = []
    for question in questions_to_generate(run):
        done.append(run_method(run, method, question, answer))
        if done[-1].failure is not None:
            log.warning("%s: %s", question.qid, done[-1].failure)
    failed = sum(q.failure is not None for q in done)
    log.info("%s: %d questions, %d calls, %d stopped by a failed call", method.name, len(done),
             sum(len(q.calls) for q in done), failed)
    return done


def stored_answers(lookup: Callable[[str], Prediction | None], where: str) -> Answer:
    """Answers from what is already held, by request id (the store's `get` at seal, a
    bundle's predictions at check and replay); a request not there means the method took a
    path its generation did not."""
    def answer(request: Request) -> Prediction:
        if (prediction := lookup(request.id)) is None:
            raise DataError(f"{where}: no stored answer for request {request.id[:12]}; run stage=generate first "
                            f"(a sealed bundle: the method no longer makes the calls it made)")
        return prediction
    return answer


def predictions_by_id(rows: list[dict[str, Any]]) -> dict[str, Prediction]:
    """A method bundle's prediction rows by request id (the rows carry the question id besides)."""
    return {row["request_id"]: Prediction.from_json({k: v for k, v in row.items() if k != "question_id"})
            for row in rows}


def bundle_predictions(bundle: Path) -> dict[str, Prediction]:
    """A method bundle's answers by request id."""
    return predictions_by_id(read_bundle_jsonl(bundle, "predictions.jsonl"))


def bundle_rows(run: "Run", method: Method, done: list[QuestionRun]) -> dict[str, list[dict[str, Any]]]:
    """The evidence, request and prediction rows of a method bundle."""
    evidence, requests, predictions = [], [], []
    for item in done:
        if item.result is None:
            raise DataError(f"{item.question.qid}: {item.failure}; nothing was sealed, run again to retry the "
                            f"failed call")
        memory = run.memories[item.question.history_id]
        evidence.append(trace_row(item.question, memory, method, item.result, item.calls))
        for call in item.calls:
            requests.append({"question_id": item.question.qid, "step": call.step, **request_row(call.request)})
            predictions.append({"question_id": item.question.qid, **call.prediction.to_json()})
    return {"evidence.jsonl": evidence, "requests.jsonl": requests, "predictions.jsonl": predictions}


def request_row(request: Request) -> dict[str, Any]:
    """What a bundle keeps of a request: ids, sizes and a hash of the text, not the text."""
    text = request.completion if request.completion is not None else canonical_json(list(request.messages))
    return {"request_id": request.id, "reader": request.reader, "prompt_version": request.prompt_version,
            "generation": request.generation, "input_tokens": len(request.input_ids) if request.input_ids is not None
            else None, "evidence_truncated_tokens": request.evidence_truncated_tokens,
            "text_sha256": sha256_text(text), "completion": request.completion is not None}


def rerun_over(run: "Run", method: Method, predictions: dict[str, Prediction],
               where: str) -> dict[str, list[dict[str, Any]]]:
    """Re-execute the method over held answers and return the bundle rows it gives."""
    answer = stored_answers(predictions.get, where)
    return bundle_rows(run, method, [run_method(run, method, q, answer) for q in run.questions])
