"""Where the files the code reads at run time lie: in a checkout, or inside an installed wheel.

A checkout keeps the Hydra configs in `conf/` and the paper's reference numbers in
`datasets/paper/` at the repository root. The wheel cannot ship top-level folders of those
names (they would land in site-packages as `conf` and `datasets`, names any other package
may take), so pyproject.toml maps them into this package as `common/conf` and `common/paper`.
Every reader of those files asks here, so the same code runs from either layout; the
checkout wins when both exist, so an editable install always reads the tree being edited.
Nothing here is ever written: results and caches go where `paths.*` point.
"""
from __future__ import annotations

import importlib.metadata
from pathlib import Path

PACKAGE = Path(__file__).resolve().parent
DISTRIBUTION = "cmc-harness"


def checkout_root() -> Path | None:
    """The repository root when this code runs from a checkout (or an editable install of
    one), None when it runs from an installed wheel."""
    root = PACKAGE.parent
    return root if (root / "pyproject.toml").is_file() and (root / "conf" / "config.yaml").is_file() else None


def _data_dir(checkout_path: str, packaged: str) -> Path:
    root = checkout_root()
    return root / checkout_path if root is not None else PACKAGE / packaged


def conf_dir() -> Path:
    """The Hydra config folder (conf/config.yaml and its groups)."""
    return _data_dir("conf", "conf")


def paper_dir() -> Path:
    """The paper's reference numbers (datasets/paper/<experiment>.json)."""
    return _data_dir("datasets/paper", "paper")


def code_version() -> str | None:
    """The installed distribution's version: what identifies the code when there is no git
    checkout to name a commit."""
    try:
        return importlib.metadata.version(DISTRIBUTION)
    except importlib.metadata.PackageNotFoundError:
        return None
