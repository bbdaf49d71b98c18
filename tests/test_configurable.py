"""The registry of configurable classes (common/configurable.py) and the table of former
names: every class conf/ names is registered, every committed manifest still resolves, and
nothing outside the registry is built or even imported."""
from __future__ import annotations

import importlib
import json
import subprocess
import sys

import pytest
import yaml

from common.configurable import (FORMER_NAMES, UnknownTargetError, check_targets, config_nodes, current_name,
                                 current_names, instantiate_known, is_configurable)
from tests.conftest import ROOT

MANIFESTS = sorted((ROOT / "results" / "bundles").glob("*/*/manifest.json"))


def targets_of(node) -> set[str]:
    return {item["_target_"] for _, item in config_nodes(node) if isinstance(item, dict) and "_target_" in item}


def test_every_configured_target_is_a_registered_class():
    configured = set()
    for path in (ROOT / "conf").rglob("*.yaml"):
        node = yaml.safe_load(path.read_text()) or {}
        check_targets(node, str(path))
        configured |= targets_of(node)
    assert len(configured) >= 20
    for target in configured:
        module, _, name = target.rpartition(".")
        assert isinstance(getattr(importlib.import_module(module), name), type), target


def test_every_former_name_leads_to_a_registered_class():
    assert FORMER_NAMES and all(is_configurable(new) for new in FORMER_NAMES.values())
    assert not any(old in FORMER_NAMES for old in FORMER_NAMES.values())  # one step, no chains


@pytest.mark.parametrize("manifest", MANIFESTS, ids=lambda p: f"{p.parent.parent.name}/{p.parent.name}")
def test_every_committed_manifest_resolves(manifest):
    config = json.loads(manifest.read_text())["config"]
    check_targets(config, str(manifest))  # former names included
    for target in targets_of(current_names(config)):
        assert is_configurable(target), f"{manifest}: {target}"


def test_committed_manifests_use_former_names():
    """The table is exercised by the committed history itself, not only by this file."""
    recorded = set().union(*(targets_of(json.loads(m.read_text())["config"]) for m in MANIFESTS))
    assert recorded & set(FORMER_NAMES), "no committed manifest names a moved class any more: is the table still needed?"


def test_a_former_name_builds_the_class_where_it_lives_now():
    arm = instantiate_known({"_target_": "arms.cmc.CMCArm", "max_hops": 2})
    assert type(arm).__module__ == "cmc.read" and arm.max_hops == 2
    assert current_name("cmc.readers.hf.HFReader") == "readers.hf.HFReader"


@pytest.mark.parametrize("target", ["os.system", "pandas.read_pickle", "common.io.read_json", "cmc.read.render",
                                    "cmc.read.RenderingArm", "arms..x", "cmc.frontends.llm.LLMFrontend.__init__", 42])
def test_anything_unregistered_is_refused(target):
    with pytest.raises(UnknownTargetError):
        check_targets({"arm": {"_target_": target}}, "test")


def test_a_module_outside_the_project_is_never_imported_to_check_it():
    code = ("import sys\nfrom common.configurable import is_configurable\n"
            "assert not is_configurable('antigravity.Thing')\nassert 'antigravity' not in sys.modules\n"
            "assert is_configurable('arms.state.StateView') and 'arms.state' in sys.modules\n")
    done = subprocess.run([sys.executable, "-c", code], cwd=ROOT, capture_output=True, text=True)
    assert done.returncode == 0, done.stderr
