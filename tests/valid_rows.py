"""Smallest rows each bundle file's type accepts (provenance/row_types.py), for tests that make
bundles by hand: a test states only the fields it is about."""
from __future__ import annotations

from typing import Any

from common.io import canonical_json, sha256_text


def manifest(question_ids: list[str] = (), **fields: Any) -> dict[str, Any]:
    ids = list(question_ids)
    return {"config": {}, "git": {"commit": None, "dirty": None}, "packages": {}, "dataset_pin": {}, "reader_pin": {},
            "prompt_version": "v1", "preregistered": {"contrasts": [], "by": "hop"},
            "population": {"name": "t", "n": len(ids), "question_ids_sha256": sha256_text(canonical_json(ids))},
            **fields}


def packet(question_id: str, **fields: Any) -> dict[str, Any]:
    return {"question_id": question_id, "arm": "cmc", "positions": [0], "chars": 5, "sha256": "0" * 64,
            "truncated": False, "trace": {}, **fields}


def trace(question_id: str, **fields: Any) -> dict[str, Any]:
    """A multi-call method's evidence row."""
    return packet(question_id, **{"answer": None, "calls": [], **fields})


def request(question_id: str, request_id: str, **fields: Any) -> dict[str, Any]:
    return {"question_id": question_id, "request_id": request_id, "reader": "r", "prompt_version": "v1",
            "generation": {}, "input_tokens": None, "evidence_truncated_tokens": 0, "messages_sha256": "0" * 64,
            **fields}


def prediction(question_id: str, request_id: str, **fields: Any) -> dict[str, Any]:
    return {"question_id": question_id, "request_id": request_id, "raw": "", **fields}
