"""The written MQuAKE-MemStream dataset: the rows as parquet, the exclusions, the optional
sensitivity report and, last, the data card that hashes them.

Separate from sources/memstream_builder.py, which decides the dataset in memory: this
module only puts a built MemStream on disk, atomically, in the layout sources/rows.py
reads back.
"""
from __future__ import annotations

import os
from pathlib import Path
from typing import Any

import pyarrow as pa
import pyarrow.parquet as pq

from common.io import atomic_write_text, json_text, sha256_file, temp_sibling, write_jsonl
from sources.memstream_builder import NAME, PROTOCOL, MemStream, RecordParser
from sources.memstream_cases import Source

SCHEMA = pa.schema([
    ("context", pa.string()),
    ("questions", pa.list_(pa.string())),
    ("answers", pa.list_(pa.list_(pa.string()))),
    ("metadata", pa.struct([("source", pa.string()), ("qa_pair_ids", pa.list_(pa.string()))])),
])


def write_parquet(path: Path, rows: list[dict[str, Any]]) -> Path:
    """Temp file in the target folder, then os.replace: readers never see half a file."""
    fd, tmp = temp_sibling(path)
    os.close(fd)
    try:
        pq.write_table(pa.Table.from_pylist(rows, schema=SCHEMA), tmp, compression="snappy")
        os.replace(tmp, path)
    except BaseException:
        Path(tmp).unlink(missing_ok=True)
        raise
    return path


def _json(obj: Any) -> str:
    return json_text(obj, indent=2)


def write_outputs(stream: MemStream, source: Source, frontend: RecordParser, out_dir: str | os.PathLike[str],
                  sens: dict[str, Any] | None = None) -> dict[str, Any]:
    """Write the dataset, exclusions, optional sensitivity and, last, the card that hashes
    them. A stale sensitivity.json from an earlier run is removed when none is computed."""
    out = Path(out_dir)
    files = {"mquake_memstream.parquet": write_parquet(out / "mquake_memstream.parquet", stream.rows()),
             "exclusions.jsonl": write_jsonl(out / "exclusions.jsonl", stream.exclusions())}
    if sens is not None:
        files["sensitivity.json"] = atomic_write_text(out / "sensitivity.json", _json(sens))
    else:
        (out / "sensitivity.json").unlink(missing_ok=True)
    card = {
        "name": NAME, "protocol": PROTOCOL, "source": source.describe(), "seed": stream.seed,
        "pool_size": stream.pool_size, "counts": stream.counts(),
        "excluded_case_ids": sorted(stream.excluded_cases),
        "grammar": frontend.frontend_id, "writer": {"pyarrow": pa.__version__},
        "sensitivity": None if sens is None else {
            run: {"pool_size": sens[run]["pool_size"], "altered_cases": sens[run]["altered_cases"]}
            for run in ("pooled", "single_pool")
        },
        "files": {name: sha256_file(path) for name, path in sorted(files.items())},
    }
    atomic_write_text(out / "card.json", _json(card))
    return card
