"""pyproject.toml's package list is the tree's: every Python package and every data folder read
at run time is in the wheel (tests/cli/test_wheel.py builds it; this check is instant)."""
from __future__ import annotations

import tomllib

from common.locations import checkout_root, conf_dir, paper_dir
from harness.cli import COMMANDS
from tests.conftest import ROOT
from tests.test_layers import PACKAGES

PROJECT = tomllib.loads((ROOT / "pyproject.toml").read_text(encoding="utf-8"))
SETUPTOOLS = PROJECT["tool"]["setuptools"]


def test_every_package_and_config_group_is_listed():
    packages = {".".join(p.parent.relative_to(ROOT).parts) for top in PACKAGES
                for p in (ROOT / top).rglob("__init__.py")}
    groups = {f"common.conf.{d.name}" for d in (ROOT / "conf").iterdir() if d.is_dir()}
    data = {"common.prompts", "common.paper", "common.conf", "analysis.templates", "viewer.templates"}
    assert set(SETUPTOOLS["packages"]) == packages | groups | data


def test_conf_and_the_papers_numbers_are_mapped_and_datasets_holds_no_package():
    assert SETUPTOOLS["package-dir"] == {"common.conf": "conf", "common.paper": "datasets/paper"}
    assert not list((ROOT / "datasets").rglob("__init__.py"))


def test_a_checkout_reads_its_own_conf_and_paper_numbers():
    assert checkout_root() == ROOT
    assert conf_dir() == ROOT / "conf" and paper_dir() == ROOT / "datasets" / "paper"


def test_the_console_script_is_the_dispatcher():
    assert PROJECT["project"]["scripts"] == {"cmc-harness": "harness.cli:main"}
    assert "run" in COMMANDS


def test_an_installed_package_records_its_version_and_is_never_refused_as_dirty():
    """No checkout (common.locations.checkout_root() is None in a wheel): the version names the code,
    and allow_dirty=false does not block a run, as it would a checkout with uncommitted changes."""
    from common.locations import code_version
    from provenance.manifest import frozen_git_state

    state = frozen_git_state(None, allow_dirty=False)
    assert state == {"commit": None, "dirty": None, "installed": f"cmc-harness=={code_version()}"}
