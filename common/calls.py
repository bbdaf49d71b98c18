"""Requests, predictions and the reader interface.

A Request carries everything that determines a reader's output, and its id is the sha256
of exactly that; a stored Prediction is reused only for an identical id. Question id and
arm are bookkeeping, not identity, so two arms that hand the reader identical messages
share one generation.
"""
from __future__ import annotations

import re
from dataclasses import asdict, dataclass, field
from typing import Any, Protocol, Sequence, runtime_checkable

from common.errors import DataError
from common.io import canonical_json, sha256_text
from common.prompt import Prompt

_THINK_BLOCK = re.compile(r"<think>.*?</think>", re.DOTALL)


def strip_think(text: str) -> str:
    """Drop reasoning before parsing: whole <think> blocks, everything up to a closing tag
    whose opening tag was in the prompt, and an unterminated block (cut by the token cap).
    Shared by every backend so answers are parsed by one rule."""
    text = _THINK_BLOCK.sub("", text)
    text = text.rsplit("</think>", 1)[-1]
    return text.split("<think>", 1)[0].strip()


CONSTRAINT_KINDS = ("json_schema", "gbnf")


@dataclass(frozen=True)
class Constraint:
    """What a reply must match, enforced by the engine while it decodes (constrained
    decoding): `json_schema`, a JSON schema as canonical JSON text; or `gbnf`, a grammar in
    llama.cpp's GBNF (which llguidance reads too). Part of a request's identity when set."""

    kind: str
    grammar: str

    def __post_init__(self) -> None:
        if self.kind not in CONSTRAINT_KINDS:
            raise DataError(f"constraint kind {self.kind!r} is not one of {', '.join(CONSTRAINT_KINDS)}")
        if not isinstance(self.grammar, str) or not self.grammar.strip():
            raise DataError("a constraint needs a non-empty grammar text")

    @classmethod
    def json_schema(cls, schema: dict[str, Any]) -> "Constraint":
        return cls("json_schema", canonical_json(schema))

    def to_json(self) -> dict[str, str]:
        return {"kind": self.kind, "grammar": self.grammar}


@dataclass(frozen=True)
class Request:
    reader: str  # reader config name, e.g. "qwen35_4b"
    pin: dict[str, Any]  # model id, revision, chat-template hash, backend, dtype...
    prompt_version: str
    messages: tuple[dict[str, str], ...]
    generation: dict[str, Any]  # max_new_tokens, temperature, ...
    input_ids: tuple[int, ...] | None = None  # local readers: the exact tokens fed to the model
    evidence_truncated_tokens: int = 0  # tokens cut from the evidence's oldest end by the input cap
    # A completion-style request (multi-call methods' released prompts): the raw text is the
    # whole input, no chat template, and `messages` is empty. Chat requests leave it None and
    # keep the identity they always had.
    completion: str | None = None
    # What the reply must match (constrained decoding). Unconstrained requests leave it None
    # and keep the identity they always had; a set constraint enters the id.
    constraint: Constraint | None = None

    @property
    def identity(self) -> dict[str, Any]:
        identity = {
            "reader": self.reader, "pin": self.pin, "prompt_version": self.prompt_version,
            "messages": list(self.messages), "generation": self.generation,
            "input_ids": list(self.input_ids) if self.input_ids is not None else None,
        }
        if self.completion is not None:
            identity["completion"] = self.completion
        if self.constraint is not None:
            identity["constraint"] = self.constraint.to_json()
        return identity

    @property
    def id(self) -> str:
        return sha256_text(canonical_json(self.identity))

    @property
    def stop(self) -> tuple[str, ...]:
        """A completion's stop strings (none for chat requests)."""
        return tuple(self.generation.get("stop") or ())

    def to_json(self) -> dict[str, Any]:
        return {"id": self.id, **self.identity, "evidence_truncated_tokens": self.evidence_truncated_tokens}

    @classmethod
    def from_json(cls, data: dict[str, Any]) -> "Request":
        ids, constraint = data.get("input_ids"), data.get("constraint")
        return cls(data["reader"], data["pin"], data["prompt_version"], tuple(data["messages"]),
                   data["generation"], tuple(ids) if ids is not None else None,
                   data.get("evidence_truncated_tokens", 0), data.get("completion"),
                   Constraint(constraint["kind"], constraint["grammar"]) if constraint is not None else None)


def cut_at_stop(text: str, stops: Sequence[str]) -> tuple[str, bool]:
    """A completion's text up to and including its first stop string, and whether one was
    found. The stop string is kept, as the released multi-call methods' text keeps it (their
    parsers read it); every engine applies this one rule to what it decoded, so an engine
    that stops early and one that decodes to the cap return the same text."""
    ends = [(i + len(s)) for s in stops if s and (i := text.find(s)) >= 0]
    return (text[:min(ends)], True) if ends else (text, False)


def check_greedy(reader: str, temperature: float) -> None:
    """Local engines decode greedily only: a sampled completion would not be a pure
    function of its request id."""
    if temperature != 0:
        raise DataError(f"{reader}: temperature={temperature}: this engine decodes greedily only (temperature 0); "
                        f"sample through an OpenAI-compatible server (reader=openai)")


@dataclass(frozen=True)
class Prediction:
    """What the reader returned. A terminal failure is a Prediction with `error` set and
    `raw` None: it stays in the denominator and scores wrong."""

    request_id: str
    raw: str | None
    finish_reason: str | None = None
    usage: dict[str, int] = field(default_factory=dict)  # prompt_tokens, completion_tokens
    model: str | None = None  # the model id the backend reports
    error: str | None = None
    # Where it ran, recorded but not identity: library versions, the CPU features of the
    # build (kernels differ between CPUs), the device. Rows made before it existed lack it.
    runtime: dict[str, Any] = field(default_factory=dict)

    def to_json(self) -> dict[str, Any]:
        data = asdict(self)
        if not data["runtime"]:
            del data["runtime"]  # rows without one keep the shape of older bundles
        return data

    @classmethod
    def from_json(cls, data: dict[str, Any]) -> "Prediction":
        """A stored row, checked field by field (journals and stores travel between machines
        and may be edited): ValueError names the first bad field."""
        if not isinstance(data, dict):
            raise ValueError(f"a prediction is a JSON object, got {type(data).__name__}")
        if unknown := set(data) - set(_PREDICTION_FIELDS):
            raise ValueError(f"unknown field(s) {sorted(unknown)}")
        for name, (kinds, required) in _PREDICTION_FIELDS.items():
            if name not in data and required:
                raise ValueError(f"missing field {name!r}")
            if name in data and not isinstance(data[name], kinds):
                raise ValueError(f"field {name!r} is {type(data[name]).__name__}, not {' or '.join(k.__name__ for k in kinds)}")
        if not all(isinstance(k, str) and isinstance(v, int) and not isinstance(v, bool)
                   for k, v in data.get("usage", {}).items()):
            raise ValueError("field 'usage' must map names to integer counts")
        if (data.get("raw") is None) == (data.get("error") is None):
            raise ValueError("exactly one of 'raw' and 'error' is set in a prediction")
        return cls(**data)


_NONE = type(None)
_PREDICTION_FIELDS: dict[str, tuple[tuple[type, ...], bool]] = {  # field -> (types, required)
    "request_id": ((str,), True), "raw": ((str, _NONE), True), "finish_reason": ((str, _NONE), False),
    "usage": ((dict,), False), "model": ((str, _NONE), False), "error": ((str, _NONE), False),
    "runtime": ((dict,), False),
}


@runtime_checkable
class Reader(Protocol):
    """What the generation service (generation/service.py) and the runner may rely on; every
    engine implements all of it, so nothing is probed with hasattr."""

    name: str
    concurrency: int  # requests one instance serves at once (1 for an in-process model)

    def prepare(self, prompt: Prompt, evidence: str, question: str) -> Request:
        """Fix the exact input without generating: build the messages, and for local
        readers tokenize them and left-truncate the evidence alone to the input cap."""

    def prepare_completion(self, text: str, prompt_version: str, max_new_tokens: int, stop: Sequence[str] = (),
                           temperature: float = 0.0) -> Request:
        """Fix a raw-text completion (no chat template) without generating: the released
        G-Walk and MeLLo prompts are base-model text. Its answer is the decoded continuation
        cut after the first stop string (`cut_at_stop`), at most `max_new_tokens` tokens."""

    def generate(self, request: Request) -> Prediction:
        """Run one request. Transport faults may be retried inside; answer content never is."""

    def preflight(self) -> None:
        """Fail fast (RuntimeError) when the reader cannot answer at all (a wrong URL or
        key); a no-op for in-process models."""

    def counters(self) -> dict[str, int]:
        """Running totals worth recording with a sitting (prefix-cache tokens); {} if none."""

    def freeze(self, frozen_pin: dict[str, Any]) -> None:
        """Hold the reader to the pin a run's manifest froze (the dtype `auto` resolved to,
        an earlier identity scheme), so a resumed run rebuilds the same request ids."""
