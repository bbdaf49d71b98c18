"""What a bundle records about how it was made: resolved config, code state, versions,
pins, and the preregistered contrasts and population, fixed before the reader loads."""
from __future__ import annotations

import importlib.metadata
import subprocess
from pathlib import Path
from typing import Any, Sequence

from omegaconf import DictConfig, OmegaConf

from cmc.io import canonical_json, sha256_text

PACKAGES = ("torch", "transformers", "tokenizers", "hydra-core", "numpy", "scipy", "pandas", "pyarrow",
            "rank-bm25", "FlagEmbedding", "httpx", "cmc-harness")
MACHINE_LOCAL = ("paths", "hydra", "stage")  # not part of what was measured


def git_state(root: Path) -> dict[str, Any]:
    def git(*args: str) -> str:
        return subprocess.run(["git", *args], cwd=root, capture_output=True, text=True, check=False).stdout.strip()

    commit = git("rev-parse", "HEAD") or None
    return {"commit": commit, "dirty": bool(git("status", "--porcelain", "--untracked-files=no")) if commit else None}


def package_versions() -> dict[str, str | None]:
    versions: dict[str, str | None] = {}
    for name in PACKAGES:
        try:
            versions[name] = importlib.metadata.version(name)
        except importlib.metadata.PackageNotFoundError:
            versions[name] = None
    return versions


def experiment_config(cfg: DictConfig) -> dict[str, Any]:
    """The resolved config minus machine-local paths: what defines the measurement."""
    resolved = OmegaConf.to_container(cfg, resolve=True)
    return {k: v for k, v in resolved.items() if k not in MACHINE_LOCAL}


def build_manifest(
    cfg: DictConfig, question_ids: Sequence[str], reader_pin: dict[str, Any], prompt_version: str, root: Path
) -> dict[str, Any]:
    return {
        "config": experiment_config(cfg),
        "git": git_state(root),
        "packages": package_versions(),
        "dataset_pin": {k: cfg.dataset[k] for k in ("hub_repo", "hub_revision", "hub_filename", "sha256")},
        "reader_pin": reader_pin,
        "prompt_version": prompt_version,
        "preregistered": OmegaConf.to_container(cfg.experiment.preregistered, resolve=True),
        "population": {"name": cfg.population.name, "n": len(question_ids),
                       "question_ids_sha256": sha256_text(canonical_json(list(question_ids)))},
    }
