"""Locate a pinned data file: a local copy if present, else the hub at a fixed revision.

Either way the bytes are checked against the pinned sha256 before anything reads them.
"""
from __future__ import annotations

from pathlib import Path

from common.errors import DataError
from common.io import sha256_file


def fetch_pinned(
    local: str | None, sha256: str, hub_repo: str | None, hub_revision: str | None, hub_filename: str | None
) -> Path:
    if local and Path(local).is_file():
        path = Path(local)
    elif hub_repo is None:
        raise DataError(f"no local copy at {local!r} and no hub source for it; build or copy the file there first")
    else:
        try:
            from huggingface_hub import hf_hub_download

            path = Path(hf_hub_download(hub_repo, hub_filename, revision=hub_revision, repo_type="dataset"))
        except Exception as exc:  # offline, gated, or missing: say where we looked
            raise DataError(
                f"no local copy at {local!r} and the hub download of {hub_repo}@{hub_revision}/{hub_filename} "
                f"failed ({type(exc).__name__}: {exc}); set CMC_DATA_DIR to the folder that holds the data"
            ) from exc
    actual = sha256_file(path)
    if actual != sha256:
        raise DataError(f"{path}: sha256 {actual} does not match the pinned {sha256}")
    return path
