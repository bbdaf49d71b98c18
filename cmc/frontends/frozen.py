"""A frozen extraction file: the records of a corpus, the statements they were made from and
their content hash, written once and checked on every load, so every arm, and a run on
another machine, reads the very extraction the first run made (extraction must not drift
between arms), and a hand edit is refused instead of used."""
from __future__ import annotations

import json
from pathlib import Path
from typing import Any

from cmc.extraction import Extraction, validate
from cmc.records import History
from common.errors import DataError
from common.io import atomic_write_text, canonical_json, sha256_text


def records_sha256(extraction: Extraction) -> str:
    """The content hash frozen beside an extraction: a hand edit (a triple added) is then
    refused on load instead of being used as is by every arm."""
    return sha256_text(canonical_json(extraction.to_json()))


def read_frozen(path: Path, corpus: History, frontend_id: str | None) -> tuple[Extraction, dict[str, Any]]:
    """The extraction in `path` and the metadata frozen beside it, refused unless it holds
    exactly this corpus's statements, its records still match their hash, and (when
    `frontend_id` is given) this frontend made it."""
    try:
        data = json.loads(path.read_text(encoding="utf-8"))
        extraction = Extraction.from_json(data)
        statements = data["statements"]
    except (OSError, ValueError, KeyError, TypeError) as exc:
        raise DataError(f"{path}: unreadable frozen extraction ({exc}); delete it to extract again") from exc
    if statements != [r.text for r in corpus] or extraction.history_id != corpus.history_id:
        raise DataError(f"{path}: holds the extraction of {extraction.history_id}, not of this dataset's "
                        f"{len(corpus)} statements ({corpus.history_id})")
    if frontend_id is not None and extraction.frontend_id != frontend_id:
        raise DataError(f"{path}: made by {extraction.frontend_id}, not {frontend_id}")
    if "records_sha256" in data and data["records_sha256"] != records_sha256(extraction):
        raise DataError(f"{path}: its records no longer match the records_sha256 frozen with them (edited after "
                        f"freezing?); restore it, or delete it to extract again from the journal")
    validate(extraction, corpus)
    return extraction, {k: v for k, v in data.items() if k not in (*extraction.to_json(), "statements", "records_sha256")}


def write_frozen(path: Path, extraction: Extraction, metadata: dict[str, Any], corpus: History) -> None:
    """Freeze the extraction with its metadata (alignment, cost), hash and statements."""
    atomic_write_text(path, canonical_json({**extraction.to_json(), **metadata, "records_sha256": records_sha256(
        extraction), "statements": [r.text for r in corpus]}) + "\n")
