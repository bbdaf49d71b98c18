"""`pip install .` (not editable), then the command line from another working directory runs the
quick path on the tiny model: run (evidence, generate, seal, score), replay, tables, report
and view, reading its configs, prompts, templates and the paper's numbers from the wheel and
writing only under the working directory it was started in."""
from __future__ import annotations

import json
import os
import shutil
import site
import subprocess
import sys
from pathlib import Path

import pytest

from tests.conftest import DATA_DIR, ROOT
from tests.test_layers import PACKAGES

pytestmark = pytest.mark.slow

SOURCES = ("pyproject.toml", "README.md", *PACKAGES, "conf", "datasets/paper")
CHECKOUT_OUTPUTS = ("results", ".cache", "outputs", "multirun", "build", "cmc_harness.egg-info")


def files_under(root: Path, names: tuple[str, ...]) -> set[Path]:
    return {p for name in names if (root / name).exists() for p in (root / name).rglob("*")}


def build_wheel(tmp: Path) -> Path:
    """Built from a copy of the sources, so the build's own folders never land in the checkout."""
    src = tmp / "src"
    for name in SOURCES:
        copy = shutil.copytree if (ROOT / name).is_dir() else shutil.copy2
        (src / name).parent.mkdir(parents=True, exist_ok=True)
        kwargs = {"ignore": shutil.ignore_patterns("__pycache__")} if (ROOT / name).is_dir() else {}
        copy(ROOT / name, src / name, **kwargs)
    subprocess.run([sys.executable, "-m", "pip", "wheel", "--no-deps", "--no-build-isolation", "-q",
                    "-w", str(tmp / "wheel"), str(src)], check=True, capture_output=True, timeout=300)
    (wheel,) = (tmp / "wheel").glob("cmc_harness-*.whl")
    return wheel


def install(wheel: Path, venv: Path) -> Path:
    """A fresh venv that sees this venv's dependencies (torch, transformers...) through a .pth
    line, and holds the project only as the installed wheel."""
    subprocess.run([sys.executable, "-m", "venv", "--without-pip", str(venv)], check=True, timeout=120)
    (purelib,) = venv.glob("lib/python*/site-packages")
    (purelib / "project_dependencies.pth").write_text("\n".join(site.getsitepackages()) + "\n")
    subprocess.run([sys.executable, "-m", "pip", "--python", str(venv / "bin" / "python"), "install", "--no-deps",
                    "-q", str(wheel)], check=True, capture_output=True, timeout=300)
    return purelib


@pytest.fixture(scope="module")
def installed(tmp_path_factory) -> tuple[Path, Path, dict[str, str]]:
    tmp = tmp_path_factory.mktemp("wheel")
    purelib = install(build_wheel(tmp), tmp / "venv")
    env = {k: v for k, v in os.environ.items() if k not in ("PYTHONPATH", "CMC_ALLOW_DIRTY")}
    env |= {"CMC_DATA_DIR": str(DATA_DIR), "PYTHONDONTWRITEBYTECODE": "1"}
    return tmp / "venv", purelib, env


def test_the_wheel_ships_what_is_read_at_run_time(installed):
    _, purelib, _ = installed
    for name in ("harness/cli.py", "common/conf/config.yaml", "common/conf/reader/local.yaml", "common/paper/table1.json",
                 "common/prompts/memoryagentbench_factconsolidation.json", "analysis/templates/report.md.j2",
                 "viewer/templates/index.html.j2"):
        assert (purelib / name).is_file(), name
    assert not (purelib / "conf").exists() and not (purelib / "datasets").exists()


def test_the_installed_command_runs_the_quick_path_outside_the_checkout(installed, tiny_model_dir, tmp_path):
    venv, purelib, env = installed
    work = tmp_path / "work"
    work.mkdir()
    before_checkout, before_site = files_under(ROOT, CHECKOUT_OUTPUTS), set(purelib.rglob("*"))

    def cli(*args: str) -> str:
        done = subprocess.run([str(venv / "bin" / "cmc-harness"), *args], cwd=work, env=env, capture_output=True,
                              text=True, timeout=600)
        assert done.returncode == 0, (args, done.stderr[-3000:])
        return done.stdout

    imported = subprocess.run([str(venv / "bin" / "python"), "-c", "import cmc, harness; print(cmc.__file__, harness.__file__)"],
                              cwd=work, env=env, capture_output=True, text=True, check=True).stdout.split()
    assert all(Path(f).is_relative_to(purelib) for f in imported), imported

    cli("run", "reader=local", f"reader.model.local_path={tiny_model_dir}", "reader.dtype=float32", "population=quick")
    bundle = work / "results" / "bundles" / "adhoc" / "factconsolidation-grammar-quick-cmc-local"
    manifest = json.loads((bundle / "manifest.json").read_text())
    assert manifest["git"]["commit"] is None and manifest["git"]["installed"].startswith("cmc-harness==")
    assert json.loads((work / "results" / "scores" / "adhoc" / bundle.name / "summary.json").read_text())["n"] == 8
    assert "8 predictions checked" in cli("replay", str(bundle))
    cli("tables", "adhoc", "--population", "quick", "--reader", "local", "--n-boot", "100")
    assert (work / "results" / "tables" / "adhoc_quick_local.csv").is_file()
    cli("report")
    assert (work / "results" / "REPORT.md").is_file()
    index = work / cli("view", str(bundle)).strip()  # printed relative to the working directory
    assert index == work / "results" / "view" / bundle.name / "index.html" and index.is_file()
    assert any((work / "outputs").rglob("run.log"))  # Hydra's run folder, under the working directory

    assert files_under(ROOT, CHECKOUT_OUTPUTS) == before_checkout, "the installed command wrote into the checkout"
    assert set(purelib.rglob("*")) == before_site, "the installed command wrote into site-packages"
