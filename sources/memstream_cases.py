"""The MQuAKE-Remastered CF-3k source of MQuAKE-MemStream: the pinned release, read from either
released layout (GitHub JSON, hub parquet) into one validated internal form (Case, Hop, Rewrite).

Separate from sources/memstream_builder.py (pools, audit, dataset) and
sources/memstream_writer.py (files): reading and verifying the released file is the one
step that touches someone else's data, and every malformed field is a DataError here, before
any pool is built.
"""
from __future__ import annotations

import json
import os
from dataclasses import dataclass
from pathlib import Path
from typing import Any, Mapping

import pyarrow.parquet as pq

from common.errors import DataError
from common.io import sha256_file

# The public pin (../shared/data/README.md). A file carrying the pinned name must match it.
PIN: Mapping[str, Any] = {
    "hub_repo": "henryzhongsc/MQuAKE-Remastered",
    "revision": "b54712d4b464d7e2d4edccd4022f95ddbcb719e7",
    "filename": "data/CF3k-00000-of-00001.parquet",
    "bytes": 1405488,
    "sha256": "12c8bc1fe1a5e6b9edc15e2348898a92b4c6b50f6a0693793239af9c0cf9eee0",
}


# --- cases: one internal form for both released layouts ------------------------------------

@dataclass(frozen=True)
class Hop:
    question: str
    cloze: str
    answer: str
    aliases: tuple[str, ...]

    def assertion(self) -> str:
        return f"{self.cloze} {self.answer}."


@dataclass(frozen=True)
class Rewrite:
    subject: str
    prompt: str  # "{} is a citizen of"
    target_true: str
    target_new: str

    def assertion(self, target: str) -> str:
        return f"{self.prompt.format(self.subject)} {target}."


@dataclass(frozen=True)
class Case:
    case_id: int
    question: str  # the first released composite question
    new_answer: str
    new_answer_alias: tuple[str, ...]
    single_hops: tuple[Hop, ...]
    new_single_hops: tuple[Hop, ...]
    rewrites: tuple[Rewrite, ...]


def _text(obj: Mapping[str, Any], field: str, where: str) -> str:
    value = obj.get(field)
    if not isinstance(value, str) or not value.strip():
        raise DataError(f"{where}: field {field!r} must be a non-empty string, got {value!r}")
    return value


def _aliases(obj: Mapping[str, Any], field: str, where: str) -> tuple[str, ...]:
    value = obj.get(field)
    value = [] if value is None else value
    if not isinstance(value, (list, tuple)) or not all(isinstance(a, str) for a in value):
        raise DataError(f"{where}: field {field!r} must be a list of strings, got {value!r}")
    return tuple(value)


def _target(item: Mapping[str, Any], name: str, where: str) -> str:
    """GitHub JSON nests `target_new: {str, id}`; the hub parquet flattens `target_new_str`."""
    nested = item.get(name)
    if isinstance(nested, Mapping):
        return _text(nested, "str", f"{where}.{name}")
    return _text(item, f"{name}_str", where)


def _hops(raw: Mapping[str, Any], field: str, where: str) -> tuple[Hop, ...]:
    items = raw.get(field)
    if not isinstance(items, (list, tuple)) or not items:
        raise DataError(f"{where}: {field!r} must be a non-empty list")
    return tuple(
        Hop(_text(h, "question", f"{where}.{field}[{i}]"), _text(h, "cloze", f"{where}.{field}[{i}]"),
            _text(h, "answer", f"{where}.{field}[{i}]"), _aliases(h, "answer_alias", f"{where}.{field}[{i}]"))
        for i, h in enumerate(items)
    )


def _rewrites(raw: Mapping[str, Any], where: str) -> tuple[Rewrite, ...]:
    items = raw.get("requested_rewrite")
    if not isinstance(items, (list, tuple)) or not items:
        raise DataError(f"{where}: 'requested_rewrite' must be a non-empty list")
    out = []
    for i, item in enumerate(items):
        at = f"{where}.requested_rewrite[{i}]"
        prompt = _text(item, "prompt", at)
        if prompt.count("{}") != 1:
            raise DataError(f"{at}: prompt must hold exactly one '{{}}' subject slot: {prompt!r}")
        out.append(Rewrite(_text(item, "subject", at), prompt, _target(item, "target_true", at), _target(item, "target_new", at)))
    return tuple(out)


def normalize_case(raw: Mapping[str, Any], where: str) -> Case:
    """Either layout in, one Case out; anything missing or mistyped is a DataError."""
    case_id = raw.get("case_id")
    if isinstance(case_id, bool) or not isinstance(case_id, int):
        raise DataError(f"{where}: case_id must be an integer, got {case_id!r}")
    where = f"{where} (case_id {case_id})"
    questions = raw.get("questions")
    if not isinstance(questions, (list, tuple)) or not questions or not isinstance(questions[0], str):
        raise DataError(f"{where}: 'questions' must be a non-empty list of strings")
    single, new = _hops(raw, "single_hops", where), _hops(raw, "new_single_hops", where)
    if len(single) != len(new):
        raise DataError(f"{where}: {len(single)} single_hops but {len(new)} new_single_hops")
    return Case(case_id, questions[0], _text(raw, "new_answer", where), _aliases(raw, "new_answer_alias", where),
                single, new, _rewrites(raw, where))


@dataclass(frozen=True)
class Source:
    path: str
    layout: str  # "github-json" | "hub-parquet"
    sha256: str
    pinned: bool
    cases: tuple[Case, ...]

    def describe(self) -> dict[str, Any]:
        return {"path": self.path, "layout": self.layout, "sha256": self.sha256, "pinned": self.pinned,
                "pin": dict(PIN), "cases_in_file": len(self.cases)}


def load_source(path: str | os.PathLike[str], require_pin: bool = False) -> Source:
    """Read and verify a CF-3k file. A file named like the pinned one must carry its hash;
    any other file is accepted (for fixtures and other releases) but marked unpinned."""
    where = Path(path)
    if not where.is_file():
        raise DataError(f"{where}: no such file")
    digest = sha256_file(where)
    pinned = digest == PIN["sha256"]
    if not pinned and (where.name == Path(PIN["filename"]).name or require_pin):
        raise DataError(f"{where}: sha256 {digest} does not match the pinned CF-3k file "
                        f"({PIN['hub_repo']}@{PIN['revision']}/{PIN['filename']}, sha256 {PIN['sha256']})")
    if where.suffix == ".parquet":
        layout, rows = "hub-parquet", pq.read_table(where).to_pylist()
    elif where.suffix == ".json":
        layout = "github-json"
        try:
            rows = json.loads(where.read_text(encoding="utf-8"))
        except (OSError, json.JSONDecodeError) as exc:
            raise DataError(f"{where}: cannot read JSON cases: {exc}") from exc
        if not isinstance(rows, list) or not all(isinstance(r, dict) for r in rows):
            raise DataError(f"{where}: expected a JSON list of case objects")
    else:
        raise DataError(f"{where}: unknown layout; expected .json (GitHub) or .parquet (hub)")
    cases = tuple(normalize_case(row, f"{where}: case #{i}") for i, row in enumerate(rows))
    seen: set[int] = set()
    for case in cases:
        if case.case_id in seen:
            raise DataError(f"{where}: duplicate case_id {case.case_id}")
        seen.add(case.case_id)
    return Source(str(path), layout, digest, pinned, cases)
