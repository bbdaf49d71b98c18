"""Shared fixtures: the real FactConsolidation data and compiled memories, composed through
the same Hydra configs users run, so tests exercise the real wiring."""
from __future__ import annotations

import os
from pathlib import Path

import pytest
from hydra.utils import instantiate

ROOT = Path(__file__).resolve().parent.parent
DATA_DIR = Path(os.environ.get("CMC_DATA_DIR", ROOT.parent / "shared" / "data")).resolve()
TEMPLATES = DATA_DIR / "mquake_templates" / "cloze_templates.json"
PARQUET = DATA_DIR / "factconsolidation" / "Conflict_Resolution.parquet"


# Tests run in working trees with uncommitted changes; tests/test_manifest.py checks that a
# run outside the suite refuses them. Set here so run.py subprocesses inherit it too.
os.environ.setdefault("CMC_ALLOW_DIRTY", "true")


def compose_config(*overrides: str, check: bool = True):
    os.environ.setdefault("CMC_DATA_DIR", str(DATA_DIR))
    from harness.config import compose  # after CMC_DATA_DIR is set

    return compose(*overrides, check=check)


@pytest.fixture(scope="session")
def cfg():
    if not PARQUET.is_file():
        pytest.fail(f"real data missing at {PARQUET}; set CMC_DATA_DIR (see ../shared/data/README.md)")
    return compose_config()


@pytest.fixture(scope="session")
def dataset(cfg):
    return instantiate(cfg.dataset).load()


@pytest.fixture(scope="session")
def frontend(cfg):
    return instantiate(cfg.frontend)


@pytest.fixture(scope="session")
def memories(dataset, frontend):
    from cmc.graph import build_memories

    return build_memories(dataset, frontend)


@pytest.fixture(scope="session")
def tiny_model_dir(tmp_path_factory: pytest.TempPathFactory) -> Path:
    """A saved tiny Qwen2 chat model (tests/readers/tiny_model.py); built once, in seconds."""
    from tests.readers.tiny_model import build_tiny_model

    return build_tiny_model(tmp_path_factory.mktemp("tiny_model"))
