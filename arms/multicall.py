"""Multi-call memory methods: a method answers a question with a sequence of reader calls
(decompose, answer a sub-question, retrieve a fact, judge it, continue), as the released
G-Walk and MeLLo do.

Every call is a Request with the usual identity, made through a `Caller`; the caller hands
it to whatever answers requests (the generation service while generating: cached,
journaled, resumable, counted; the stored predictions when sealing or replaying) and keeps
the calls in order. A greedy method is a pure function of its inputs and its calls'
answers, so running it again over the stored answers rebuilds every request id, the trace
and the final answer: that is how a crashed run resumes without sending a call twice, and
how a sealed bundle is replayed (paper D.4). An arm is the one-call special case and keeps
its own pipeline.
"""
from __future__ import annotations

from dataclasses import dataclass, field
from typing import TYPE_CHECKING, Any, Callable, Protocol, Sequence, runtime_checkable

from cmc.evidence import Evidence
from cmc.render import render
from common.calls import Prediction, Reader, Request
from common.io import canonical_json, sha256_text
from common.prompt import Prompt

if TYPE_CHECKING:
    from cmc.graph import Memory
    from cmc.records import Question


class CallFailed(Exception):
    """A call's prediction is a failure: the question stops here; a rerun retries the call."""

    def __init__(self, step: str, prediction: Prediction) -> None:
        super().__init__(f"call {step!r} failed: {prediction.error}")
        self.step, self.prediction = step, prediction


@dataclass(frozen=True)
class Call:
    step: str  # the method's name for the call ("answer", "breakdown", ...)
    request: Request
    prediction: Prediction


class Caller:
    """A method's only way to the reader. `answer` turns a Request into its Prediction."""

    def __init__(self, reader: Reader, answer: Callable[[Request], Prediction], prompt_version: str) -> None:
        self.reader, self._answer, self.prompt_version = reader, answer, prompt_version
        self.calls: list[Call] = []

    def complete(self, step: str, text: str, max_new_tokens: int, stop: Sequence[str] = (),
                 temperature: float = 0.0) -> str:
        """A raw-text completion: the continuation, cut after its first stop string."""
        return self._call(step, self.reader.prepare_completion(text, self.prompt_version, max_new_tokens, stop,
                                                               temperature))

    def chat(self, step: str, prompt: Prompt, evidence: str, question: str) -> str:
        """A chat call in a reader prompt's shape (an arm's one call is this), greedy, at the
        reader's own caps; the answer as the reader returns it."""
        return self._call(step, self.reader.prepare(prompt, evidence, question))

    def _call(self, step: str, request: Request) -> str:
        prediction = self._answer(request)
        self.calls.append(Call(step, request, prediction))
        if prediction.error is not None or prediction.raw is None:
            raise CallFailed(step, prediction)
        return prediction.raw


@dataclass(frozen=True)
class MethodAnswer:
    """A method's final answer (None: it gave none, which scores wrong), the record
    positions it read, and its trace: JSON values saying which branch it took and why."""

    answer: str | None
    positions: tuple[int, ...] = ()
    trace: dict[str, Any] = field(default_factory=dict)


@runtime_checkable
class Method(Protocol):
    """A multi-call memory method: one question and the compiled memory in, calls through
    the caller, one MethodAnswer out. `prompt_version` (a hash of its prompts and settings
    that shape the text it sends) enters every call's identity."""

    name: str
    prompt_version: str

    def answer(self, question: "Question", memory: "Memory", caller: Caller) -> MethodAnswer: ...


def prompt_hash(*parts: Any) -> str:
    """A method's prompt version from its prompt texts and text-shaping settings."""
    return sha256_text(canonical_json(list(parts)))[:16]


def trace_row(question: "Question", memory: "Memory", method: Method, result: MethodAnswer,
              calls: Sequence[Call]) -> dict[str, Any]:
    """A method's per-question row of a bundle's evidence.jsonl: an evidence packet of the
    records it read (so scoring's gold-in-evidence check works as for an arm), plus its
    answer and its calls in order."""
    positions = tuple(sorted(set(result.positions)))
    text = render(memory.history, positions, None).text if positions else ""
    packet = Evidence(question.qid, method.name, positions, text, False, result.trace).packet()
    return {**packet, "answer": result.answer, "calls": [{"step": c.step, "request_id": c.request.id} for c in calls]}
