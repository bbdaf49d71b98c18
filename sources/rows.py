"""Datasets in MemoryAgentBench's row format as histories + questions.

Each row holds one context, its questions, their answers and metadata.source
`<name>_<sh|mh>_<slice>` (FactConsolidation: slice = history length such as 262k;
MQuAKE-MemStream: slice = pool such as pool3). The sh and mh rows of one slice share one
context; they become one History so that it is compiled once. Answers are read only by
`load_labels`, which the evidence stage never calls.
"""
from __future__ import annotations

import json
import re
from pathlib import Path
from typing import Any, Sequence

import pyarrow as pa
import pyarrow.parquet as pq

from cmc.records import Dataset, History, Question
from common.configurable import configurable
from common.errors import DataError
from sources.pinned import fetch_pinned

REQUIRED_COLUMNS = ("context", "questions", "answers", "metadata")


@configurable
class RowDataset:
    def __init__(
        self,
        name: str,
        path: str | None,
        sha256: str | None = None,
        card: str | None = None,
        hub_repo: str | None = None,
        hub_revision: str | None = None,
        hub_filename: str | None = None,
        lengths: Sequence[str] | None = None,
    ) -> None:
        """`sha256` pins a published file; a derived file (MQuAKE-MemStream) is instead
        checked against the hash its builder wrote into `card` (card.json). `lengths` keeps
        only the histories of these length slices and their questions: what a frontend too
        slow for the whole corpus (direct LLM extraction on a CPU) is run on."""
        self.name = name
        self.lengths = None if lengths is None else tuple(lengths)
        self._source = re.compile(rf"{re.escape(name)}_(sh|mh)_(\w+)\Z")
        self._card = card
        self._pin = dict(local=path, sha256=sha256, hub_repo=hub_repo, hub_revision=hub_revision, hub_filename=hub_filename)
        self._rows: list[dict[str, Any]] | None = None
        self.path: Path | None = None

    @property
    def pin(self) -> dict[str, Any]:
        """What identifies the data file in a manifest: its hub pin (if published) and sha256."""
        if self._pin["sha256"] is None:
            self._pin["sha256"] = _card_sha256(self._card, self._pin["local"])
        return {k: self._pin[k] for k in ("hub_repo", "hub_revision", "hub_filename", "sha256")}

    def _read(self) -> list[dict[str, Any]]:
        if self._rows is None:
            self.path = fetch_pinned(local=self._pin["local"], **self.pin)
            self._rows = _read_columns(self.path, REQUIRED_COLUMNS)
        return self._rows

    def _row_fields(self, index: int, row: dict[str, Any]) -> tuple[str, str, list[str], list[str]]:
        where = f"{self.path}: row {index}"
        metadata = row["metadata"] or {}
        source, ids = metadata.get("source"), metadata.get("qa_pair_ids")
        match = self._source.match(source or "")
        if match is None:
            raise DataError(f"{where}: metadata.source {source!r} is not {self.name}_{{sh|mh}}_{{slice}}")
        questions, answers = row["questions"], row["answers"]
        if not ids or not (len(ids) == len(questions) == len(answers)):
            raise DataError(f"{where}: metadata.qa_pair_ids, questions and answers differ in length")
        if not isinstance(row["context"], str):
            raise DataError(f"{where}: context is not a string")
        if blank := [qid for qid, text in zip(ids, questions) if not isinstance(text, str) or not text.strip()]:
            raise DataError(f"{where}: question {blank[0]!r} has no text; a reader would be asked nothing")
        return match.group(1), match.group(2), ids, questions

    def load(self) -> Dataset:
        rows = self._read()
        parsed = [self._row_fields(i, row) for i, row in enumerate(rows)]
        if self.lengths is not None:
            found = list(dict.fromkeys(length for _, length, _, _ in parsed))
            if unknown := [length for length in self.lengths if length not in found]:
                raise DataError(f"{self.path}: dataset.lengths {unknown} not among the file's {found}")
            kept = [i for i, (_, length, _, _) in enumerate(parsed) if length in self.lengths]
            rows, parsed = [rows[i] for i in kept], [parsed[i] for i in kept]
        contexts_by_length: dict[str, set[str]] = {}
        for (_, length, _, _), row in zip(parsed, rows):
            contexts_by_length.setdefault(length, set()).add(row["context"])
        histories: dict[str, History] = {}
        questions: list[Question] = []
        for index, ((hop, length, ids, texts), row) in enumerate(zip(parsed, rows)):
            shared = len(contexts_by_length[length]) == 1
            history_id = f"{self.name}_{length}" if shared else f"{self.name}_{hop}_{length}"
            if history_id not in histories:
                histories[history_id] = History.parse(history_id, row["context"], source=f"{self.path}: row {index}")
            questions.extend(Question(qid, text, history_id, hop, length) for qid, text in zip(ids, texts))
        if len({q.qid for q in questions}) != len(questions):
            raise DataError(f"{self.path}: qa_pair_ids are not unique")
        return Dataset(self.name, histories, tuple(questions))

    def load_labels(self) -> dict[str, tuple[str, ...]]:
        """Gold answers by question id. Only label-opening stages may call this."""
        labels: dict[str, tuple[str, ...]] = {}
        for index, row in enumerate(self._read()):
            _, _, ids, _ = self._row_fields(index, row)
            for qid, answer in zip(ids, row["answers"]):
                labels[qid] = tuple(answer)
        return labels


def _read_columns(path: Path, columns: tuple[str, ...]) -> list[dict[str, Any]]:
    """The rows of a parquet file; a damaged file or a string cell that is not UTF-8 is a
    DataError naming the file (pyarrow would raise its own error or a bare UnicodeDecodeError)."""
    try:
        table = pq.read_table(path)
        missing = [c for c in columns if c not in table.column_names]
        if missing:
            raise DataError(f"{path}: missing column(s) {missing}; found {table.column_names}")
        return table.select(list(columns)).to_pylist()
    except UnicodeDecodeError as exc:
        raise DataError(f"{path}: a text cell is not UTF-8 ({exc})") from exc
    except (pa.ArrowException, OSError) as exc:
        raise DataError(f"{path}: not a readable parquet file ({exc})") from exc


def _card_sha256(card: str | None, path: str | None) -> str:
    if card is None or path is None:
        raise DataError(f"dataset file {path!r} has neither a pinned sha256 nor a card to verify it against")
    try:
        files = json.loads(Path(card).read_text(encoding="utf-8"))["files"]
        return files[Path(path).name]
    except (OSError, KeyError, json.JSONDecodeError) as exc:
        raise DataError(f"{card}: cannot read the sha256 of {Path(path).name} ({exc}); rebuild with `make memstream`") from exc
