"""Canonical JSON and crash-safe file writes shared by every stage."""
from __future__ import annotations

import functools
import hashlib
import json
import math
import os
import tempfile
from contextlib import contextmanager
from pathlib import Path
from typing import Any, Iterable, Iterator

from common.errors import DataError

# The folders this process may write under (None: not confined). Set by the stage runner,
# replay and reseal from the configured paths; process-wide, so worker threads obey it too.
_write_roots: tuple[Path, ...] | None = None


@contextmanager
def writes_confined_to(roots: Iterable[str | os.PathLike[str]]) -> Iterator[None]:
    """Inside this block every folder the harness creates or writes into must lie under one
    of `roots` (symlinks resolved): a name that becomes a path (`arm.name=../../x`) or a
    recorded location can then never place a file elsewhere, whichever code path built it."""
    global _write_roots
    before = _write_roots
    _write_roots = tuple(Path(os.path.abspath(Path(root).expanduser())).resolve() for root in roots)
    try:
        yield
    finally:
        _write_roots = before


def writable_dir(folder: str | os.PathLike[str]) -> Path:
    """`folder`, created with its parents, after checking it lies under the configured roots."""
    folder = Path(folder)
    if _write_roots is not None:
        real = Path(os.path.abspath(folder)).resolve()
        if not any(real == root or real.is_relative_to(root) for root in _write_roots):
            raise DataError(f"{folder}: outside the folders this run may write to "
                            f"({', '.join(map(str, _write_roots))}); a name or path in the config leads out of them")
    folder.mkdir(parents=True, exist_ok=True)
    return folder


def canonical_json(obj: Any) -> str:
    """One byte representation per value: sorted keys, no spaces, UTF-8 kept. Strict JSON:
    a NaN or infinity raises DataError (strict parsers reject them; a missing value is null)."""
    return _strict(json.dumps, obj, sort_keys=True, separators=(",", ":"), ensure_ascii=False)


def _strict(dumps: Any, obj: Any, **options: Any) -> str:
    try:
        return dumps(obj, allow_nan=False, **options)
    except ValueError as exc:  # a NaN or infinity in a config value or a row: bad input, one line
        raise DataError(f"a value is NaN or infinite, which JSON cannot hold ({exc})") from None


def _refuse_constant(token: str) -> Any:
    raise ValueError(f"{token} is not JSON (a missing value is null)")


def json_text(obj: Any, indent: int = 1, sort_keys: bool = True) -> str:
    """A JSON document for people to read (manifests, summaries, timings), one value a file,
    ending in a newline. Strict like canonical_json: every file the harness writes parses
    under JSON.parse and every JSON Lines reader."""
    return _strict(json.dumps, obj, indent=indent, sort_keys=sort_keys, ensure_ascii=False) + "\n"


def without_nan(records: Iterable[dict[str, Any]]) -> list[dict[str, Any]]:
    """Rows from a data frame with pandas' missing markers (NaN, NaT, pd.NA) as None: pandas
    turns None into NaN in float and string columns, and NaN is not JSON."""
    return [{key: None if _missing(value) else value for key, value in row.items()} for row in records]


def _missing(value: Any) -> bool:
    if isinstance(value, float):  # numpy's float64 too
        return math.isnan(value)
    return type(value).__name__ in ("NAType", "NaTType")


def sha256_text(text: str) -> str:
    return hashlib.sha256(text.encode("utf-8")).hexdigest()


def sha256_file(path: str | os.PathLike[str], chunk: int = 1 << 20) -> str:
    digest = hashlib.sha256()
    with open(path, "rb") as handle:
        while block := handle.read(chunk):
            digest.update(block)
    return digest.hexdigest()


@functools.cache
def _umask() -> int:
    """The process umask, read once (setting it to read it back races other threads)."""
    mask = os.umask(0o022)
    os.umask(mask)
    return mask


def temp_sibling(target: Path) -> tuple[int, str]:
    """A temp file beside target with the mode a plain open() would give it.

    mkstemp creates 0600 files; renamed into place they would hide sealed results from
    the group and from other users of a shared results folder."""
    writable_dir(target.parent)
    fd, tmp = tempfile.mkstemp(dir=target.parent, prefix=f".{target.name}.", suffix=".tmp")
    os.fchmod(fd, 0o666 & ~_umask())
    return fd, tmp


def atomic_write_text(path: str | os.PathLike[str], text: str) -> Path:
    """Write to a temp file in the same folder, fsync, then rename: never half a file."""
    target = Path(path)
    fd, tmp = temp_sibling(target)
    try:
        with os.fdopen(fd, "w", encoding="utf-8", newline="\n") as handle:
            handle.write(text)
            handle.flush()
            os.fsync(handle.fileno())
        os.replace(tmp, target)
    except BaseException:
        Path(tmp).unlink(missing_ok=True)
        raise
    return target


def jsonl_text(rows: Iterable[Any]) -> str:
    """The canonical JSON Lines bytes of rows: what seals and byte-identity checks hash."""
    return "".join(canonical_json(row) + "\n" for row in rows)


def write_jsonl(path: str | os.PathLike[str], rows: Iterable[Any]) -> Path:
    return atomic_write_text(path, jsonl_text(rows))


def read_jsonl(path: str | os.PathLike[str]) -> list[Any]:
    """Every non-blank line's JSON value; DataError names the file and line of a bad one."""
    rows = []
    for number, line in enumerate(_read_text(path).split("\n"), start=1):
        if line.strip():
            try:
                rows.append(json.loads(line, parse_constant=_refuse_constant))
            except ValueError as exc:
                raise DataError(f"{path}: line {number} is not JSON ({exc})") from exc
    return rows


def read_json(path: str | os.PathLike[str]) -> Any:
    """One JSON document; DataError names the file when it is missing, not UTF-8 or not JSON."""
    try:
        return json.loads(_read_text(path), parse_constant=_refuse_constant)
    except ValueError as exc:
        raise DataError(f"{path}: not valid JSON ({exc})") from exc


def _read_text(path: str | os.PathLike[str]) -> str:
    try:
        with open(path, encoding="utf-8") as handle:
            return handle.read()
    except UnicodeDecodeError as exc:
        raise DataError(f"{path}: not UTF-8 text ({exc})") from exc
    except OSError as exc:
        raise DataError(f"{path}: cannot be read ({exc.strerror or exc})") from exc
