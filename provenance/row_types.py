"""One row type per file a run publishes: the bundle's five files and the scores written
beside it. Writers and readers check every row against its type (provenance/typed.py), and
docs/schemas/ holds the same types as JSON Schema, made by `schema_texts` and tested equal,
so a notebook or another tool can read a bundle without this package.

Optional fields are the ones older committed rows lack (a prediction without `runtime`, a
manifest without `extraction`); engine-specific parts (a config, a pin, a trace, generation
parameters, a runtime) are open objects, checked by the code that reads them.
"""
from __future__ import annotations

from dataclasses import dataclass
from pathlib import Path
from typing import Any, Iterable

from common.io import json_text
from provenance.typed import DRAFT, check, doc, schema_of


@dataclass
class GitState:
    """The code state a run was made with."""
    commit: str | None = doc("git commit (null outside a checkout)")
    dirty: bool | None = doc("whether tracked files outside results/ had changed")
    installed: str = doc("the installed distribution, outside a checkout", optional=True)
    diff_sha256: str = doc("sha256 of the uncommitted diff (allow_dirty runs)", optional=True)
    diff: str = doc("the uncommitted diff, credentials scrubbed", optional=True)


@dataclass
class Population:
    """Which questions the run covers."""
    name: str = doc("population name")
    n: int = doc("number of questions")
    question_ids_sha256: str = doc("sha256 of the canonical JSON list of question ids")


@dataclass
class Preregistered:
    """The experiment's paired contrasts, fixed before generation."""
    contrasts: list[list[str]] = doc("pairs of views to contrast")
    by: str = doc("the item column the contrasts are split by")
    pooled: bool = doc("whether contrasts are also reported over all questions", optional=True)
    populations: list[str] = doc("populations the contrasts are reported on", optional=True)


@dataclass
class SealedWithErrors:
    """Failed requests sealed as wrong answers, and the share the user allowed."""
    allow_errors: bool | float = doc("true, or the allowed share of failures")
    failed: int = doc("failed requests")
    of: int = doc("requests in the run")


@dataclass
class Manifest:
    """manifest.json: how a bundle was made, frozen before generation."""
    config: dict[str, Any] = doc("resolved experiment config (checked by harness/schemas.py)")
    git: GitState = doc("code state of the first sitting")
    packages: dict[str, str | None] = doc("package versions, null where not installed")
    dataset_pin: dict[str, Any] = doc("the dataset's pinned source and sha256")
    reader_pin: dict[str, Any] = doc("the reader's pinned identity (engine-specific)")
    prompt_version: str = doc("version of the reader prompt")
    preregistered: Preregistered = doc("preregistered contrasts")
    population: Population = doc("the questions asked")
    extraction: dict[str, Any] = doc("the frozen LLM extraction read (LLM and hybrid frontends)", optional=True)
    sealed_with_errors: SealedWithErrors = doc("failed requests sealed as wrong answers", optional=True)


@dataclass
class Packet:
    """evidence.jsonl, an arm's row: the evidence packet put in front of the reader."""
    question_id: str = doc("question id")
    arm: str = doc("the view that selected the evidence")
    positions: list[int] = doc("record positions in the history, rendered in this order")
    chars: int = doc("characters of the rendered evidence")
    sha256: str = doc("sha256 of the rendered evidence text")
    truncated: bool = doc("whether the character budget cut the evidence")
    trace: dict[str, Any] = doc("how the view selected it (view-specific)")


@dataclass
class CallRef:
    """One reader call of a method, in order."""
    step: str = doc("the method's step name")
    request_id: str = doc("the call's request id (a row of requests.jsonl)")


@dataclass
class MethodTrace(Packet):
    """evidence.jsonl, a multi-call method's row: the records it read as a packet, its
    answer and its calls in order."""
    answer: str | None = doc("the method's final answer (null: none reached)")
    calls: list[CallRef] = doc("the method's reader calls, in order")


@dataclass
class RequestRow:
    """What requests.jsonl keeps of every reader request, an arm's or a method's call."""
    question_id: str = doc("question id")
    request_id: str = doc("request id (sha256 of the request's identity)")
    reader: str = doc("reader name")
    prompt_version: str = doc("version of the reader prompt")
    generation: dict[str, Any] = doc("generation parameters (engine-specific)")
    input_tokens: int | None = doc("input tokens (null: not counted by this engine)")
    evidence_truncated_tokens: int = doc("evidence tokens cut by the input cap")


@dataclass
class ArmRequest(RequestRow):
    """requests.jsonl, an arm's row: what the bundle keeps of the reader request."""
    messages_sha256: str = doc("sha256 of the canonical JSON messages")


@dataclass
class MethodRequest(RequestRow):
    """requests.jsonl, a multi-call method's row: one reader call."""
    step: str = doc("the method's step name")
    text_sha256: str = doc("sha256 of the completion text, or of the canonical JSON messages")
    completion: bool = doc("whether the request is a raw completion rather than chat messages")


@dataclass
class PredictionRow:
    """predictions.jsonl: what the reader returned for one request."""
    question_id: str = doc("question id")
    request_id: str = doc("request id")
    raw: str | None = doc("raw output (null: a terminal failure)")
    finish_reason: str | None = doc("why generation stopped", optional=True)
    usage: dict[str, int] = doc("token counts (prompt_tokens, completion_tokens)", optional=True)
    model: str | None = doc("the model id the backend reported", optional=True)
    error: str | None = doc("a terminal failure, scored wrong", optional=True)
    runtime: dict[str, Any] = doc("where it ran: library versions, CPU features, device", optional=True)


@dataclass
class SealFiles:
    """sha256 of each sealed file."""
    manifest: str = doc("sha256 of manifest.json", name="manifest.json")
    evidence: str = doc("sha256 of evidence.jsonl", name="evidence.jsonl")
    requests: str = doc("sha256 of requests.jsonl", name="requests.jsonl")
    predictions: str = doc("sha256 of predictions.jsonl", name="predictions.jsonl")


@dataclass
class Seal:
    """SEAL: the sha256 of each bundle file and of the set."""
    files: SealFiles = doc("sha256 of each file")
    seal: str = doc("sha256 of the canonical JSON of `files`")


@dataclass
class Item:
    """items.jsonl (scores): one question's score."""
    question_id: str = doc("question id")
    hop: str = doc("hop class (sh, mh)")
    length: str = doc("history length class")
    substring_em: float = doc("substring exact match, 0 or 1")
    strict_em: float = doc("strict exact match, 0 or 1")
    parsed: str | None = doc("the parsed answer")
    error: str | None = doc("the reader's terminal failure, if any")


@dataclass
class HopScore:
    """Accuracy over one hop class."""
    n: int = doc("questions")
    correct: int = doc("questions answered right")
    accuracy: float = doc("correct / n")
    wilson95: list[float] = doc("Wilson 95% interval [low, high]")


@dataclass
class Summary:
    """summary.json (scores): one bundle's accuracy by hop class."""
    bundle: str = doc("the bundle scored")
    seal: str | None = doc("its seal (null: no items)")
    n: int = doc("questions scored")
    by_hop: dict[str, HopScore] = doc("accuracy per hop class")
    unwinnable: list[str] = doc("questions no answer can match (no gold left after normalisation)", optional=True)


@dataclass
class Timings:
    """timings.json (scores): the stages' wall seconds of the run that made the bundle."""
    seconds: dict[str, float] = doc("wall seconds per stage")
    prefill: dict[str, int] = doc("the reader's prefix-cache counters", optional=True)


@dataclass
class TimingsV0:
    """timings.json (scores) as first written: wall seconds per stage at top level."""
    evidence: float = doc("seconds", optional=True)
    generate: float = doc("seconds", optional=True)
    seal: float = doc("seconds", optional=True)
    score: float = doc("seconds", optional=True)


@dataclass
class SittingRow:
    """sittings.jsonl (scores): one sitting of generation."""
    started_utc: str = doc("when the sitting started, ISO 8601 UTC")
    requests: int = doc("requests it finished")
    seconds: float = doc("its wall seconds")
    cpus: int = doc("CPUs it could use")
    git: GitState = doc("the code state it generated with", optional=True)
    prefill_tokens_total: int = doc("prompt tokens generated over", optional=True)
    prefill_tokens_saved: int = doc("prompt tokens whose KV the prefix cache reused", optional=True)


# file name -> (row types, JSON Lines?); a file with two row kinds accepts either per line
BUNDLE_ROWS: dict[str, tuple[tuple[type, ...], bool]] = {
    "manifest.json": ((Manifest,), False), "evidence.jsonl": ((Packet, MethodTrace), True),
    "requests.jsonl": ((ArmRequest, MethodRequest), True), "predictions.jsonl": ((PredictionRow,), True),
    "SEAL": ((Seal,), False),
}
SCORE_ROWS: dict[str, tuple[tuple[type, ...], bool]] = {
    "items.jsonl": ((Item,), True), "summary.json": ((Summary,), False),
    "timings.json": ((Timings, TimingsV0), False), "sittings.jsonl": ((SittingRow,), True),
}
FILES = {**BUNDLE_ROWS, **SCORE_ROWS}


def check_rows(name: str, rows: Iterable[Any], where: str | Path) -> None:
    """DataError `<where>: line <n>: <field problem>` for the first row of file `name`
    (a bundle or score file name) that breaks its type."""
    row_types, _ = FILES[name]
    for number, row in enumerate(rows, start=1):
        check(row_types, row, f"{where}: line {number}")


def check_document(name: str, value: Any, where: str | Path) -> None:
    """DataError `<where>: <field problem>` unless `value` is file `name`'s document."""
    check(FILES[name][0], value, str(where))


def schema(name: str) -> dict[str, Any]:
    """The JSON Schema of one file; for a JSON Lines file, of each of its lines."""
    row_types, lines = FILES[name]
    kinds = [schema_of(t) for t in row_types]
    what = "Each line of" if lines else "The JSON document"
    return {"$schema": DRAFT, "title": name,
            "description": f"{what} {name}, as cmc-harness writes and reads it (provenance/row_types.py).",
            **(kinds[0] if len(kinds) == 1 else {"oneOf": kinds})}


def schema_file(name: str) -> str:
    return f"{name.split('.')[0]}.schema.json"


def schema_texts() -> dict[str, str]:
    """docs/schemas/'s files, by name: the published form of these row types."""
    return {schema_file(name): json_text(schema(name), indent=2, sort_keys=False) for name in FILES}


def publish_schemas(folder: str | Path) -> None:
    """Write docs/schemas/ (run after changing a row type; a test keeps them equal)."""
    for name, text in schema_texts().items():
        (Path(folder) / name).write_text(text, encoding="utf-8")
