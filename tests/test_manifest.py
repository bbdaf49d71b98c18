"""The manifest's experiment config: portable across machines, compared key by key."""
from __future__ import annotations

import hashlib
import subprocess

import pytest

from common.errors import DataError
from provenance.manifest import config_differences, experiment_config, frozen_git_state, git_state
from tests.conftest import compose_config


def test_locations_stay_unresolved_and_everything_else_resolves(tmp_path):
    config = experiment_config(compose_config(f"paths.data_dir={tmp_path}", "arm=cmc_depth2"))
    assert config["dataset"]["path"] == "${paths.data_dir}/factconsolidation/Conflict_Resolution.parquet"
    assert config["frontend"]["templates"].startswith("${paths.data_dir}/")
    assert str(tmp_path) not in repr(config)
    assert config["arm"]["max_hops"] == 2 and isinstance(config["arm"]["budget_chars"], int)
    assert not {"paths", "hydra", "stage"} & set(config)


def test_the_same_run_on_two_machines_has_the_same_config(tmp_path):
    here = experiment_config(compose_config("paths.data_dir=/data/a"))
    there = experiment_config(compose_config("paths.data_dir=/mnt/b", "paths.results_dir=/tmp/r"))
    assert here == there and config_differences(here, there) == []


def test_a_model_cache_moved_by_cmc_model_cache_is_not_a_difference(monkeypatch):
    """Where this machine keeps converted weights (CMC_MODEL_CACHE, as .ci/run sets it) is not
    what a bundle measures: a committed bundle's seal check must pass wherever the cache is."""
    recorded = experiment_config(compose_config("arm=cmc"))
    monkeypatch.setenv("CMC_MODEL_CACHE", "/elsewhere/models")
    fresh = experiment_config(compose_config("arm=cmc"))
    assert fresh["reader"]["model"]["cache_dir"] == "/elsewhere/models" != recorded["reader"]["model"]["cache_dir"]
    assert config_differences(recorded, fresh) == []
    fresh["reader"]["api_key_env"] = None  # a resealed config names no key variable of the bundle's
    recorded["reader"]["api_key_env"] = "OPENAI_API_KEY"
    assert config_differences(recorded, fresh) == []
    fresh["reader"]["model"]["filename"] = "other.gguf"
    assert config_differences(recorded, fresh) == ["reader.model.filename"]


def test_differences_name_the_keys_and_ignore_recorded_locations():
    fresh = experiment_config(compose_config("arm=cmc"))
    legacy = experiment_config(compose_config("arm=cmc"))
    legacy["dataset"]["path"] = "/work/shared/data/factconsolidation/Conflict_Resolution.parquet"
    assert config_differences(legacy, fresh) == []
    legacy["arm"]["max_hops"] = 1
    legacy["read"]["budget_chars"] = 100
    legacy["extra"] = {"x": 1}
    assert config_differences(legacy, fresh) == ["arm.max_hops", "extra", "read.budget_chars"]


def test_a_node_interpolated_whole_is_recorded_resolved():
    config = experiment_config(compose_config("arm=dense", "embedder=minilm"))
    assert config["arm"]["embedder"]["_target_"] == "arms.embedders.FlagEmbedder"  # crashed before: TypeError
    assert config["arm"]["embedder"] == experiment_config(compose_config("embedder=minilm"))["embedder"]


def test_dirty_means_code_or_config_changed_not_results(tmp_path):
    def git(*args: str) -> None:
        subprocess.run(["git", "-c", "user.name=t", "-c", "user.email=t@t", *args], cwd=tmp_path, check=True,
                       capture_output=True)

    (tmp_path / "results").mkdir()
    (tmp_path / "results" / "journal.jsonl").write_text("{}\n")
    (tmp_path / "code.py").write_text("x = 1\n")
    git("init", "-q")
    git("add", ".")
    git("commit", "-q", "-m", "start")
    assert git_state(tmp_path)["dirty"] is False
    (tmp_path / "results" / "journal.jsonl").write_text("{}\n{}\n")  # a run journaling as it goes
    assert git_state(tmp_path)["dirty"] is False
    (tmp_path / "code.py").write_text("x = 2\n")
    state = git_state(tmp_path)
    assert state["dirty"] is True and len(state["commit"]) == 40
    with pytest.raises(DataError, match=r"uncommitted changes outside results/ \(code.py\).*allow_dirty=true"):
        frozen_git_state(tmp_path, allow_dirty=False)
    allowed = frozen_git_state(tmp_path, allow_dirty=True)
    assert "-x = 1\n+x = 2" in allowed["diff"] and allowed["diff_sha256"] == hashlib.sha256(
        allowed["diff"].encode()).hexdigest() and "journal" not in allowed["diff"]
    git("commit", "-qam", "next")
    assert frozen_git_state(tmp_path, allow_dirty=False) == {"commit": git_head(tmp_path), "dirty": False}


def git_head(root) -> str:
    return subprocess.run(["git", "rev-parse", "HEAD"], cwd=root, capture_output=True, text=True).stdout.strip()


def test_a_key_added_to_conf_at_its_class_default_is_not_a_difference():
    """Bundles sealed before conf/frontend gained `prompt`, `align`, `subject_first`, `repair`
    (issue 38) recorded no such keys; their runs used the constructor's defaults, so a fresh
    config holding exactly those defaults reproduces them. Another value still differs."""
    from common.configurable import NO_DEFAULT, constructor_default

    llm, hybrid = "cmc.frontends.llm.LLMFrontend", "cmc.frontends.hybrid.HybridFrontend"
    assert constructor_default(llm, "prompt") is None and constructor_default(hybrid, "subject_first") is False
    assert constructor_default(hybrid, "review") == "per_statement"  # the subclass's own parameter
    assert constructor_default(llm, "no_such_key") is NO_DEFAULT
    assert constructor_default(llm, "extractor") is NO_DEFAULT  # required: no default to have run with
    assert constructor_default("os.system", "command") is NO_DEFAULT  # never imported: not a project class
    recorded = {"frontend": {"_target_": hybrid, "batch_records": 20}}
    fresh = {"frontend": {**recorded["frontend"], "prompt": None, "align": "llm", "subject_first": False}}
    assert config_differences(recorded, fresh) == []
    assert config_differences(recorded, {"frontend": {**fresh["frontend"], "align": "forms"}}) == ["frontend.align"]
    assert config_differences({"frontend": {**fresh["frontend"]}}, recorded) == \
        ["frontend.align", "frontend.prompt", "frontend.subject_first"]  # a key recorded, now gone: differs


def makefile_frontend_settings() -> dict[str, list[str]]:
    """The frontend overrides `make llm-tables` gives each frontend it runs, by composed frontend name:
    the committed examples bundles were made by those commands, so the Makefile is their record."""
    from tests.cli.test_makefile import first_of_each_sweep, recipe_commands

    runs = [first_of_each_sweep(argv[1:]) for argv in recipe_commands("llm-tables") if argv[0] == "run"]
    return {compose_config(*overrides).frontend.name: [o for o in overrides if o.startswith("frontend.")]
            for overrides in runs}


def test_the_committed_frontend_bundles_match_todays_conf_but_for_what_their_command_set():
    import json

    from tests.conftest import ROOT

    manifests = sorted((ROOT / "results" / "bundles" / "table7").glob("*-*_lines_*/manifest.json"))
    assert len(manifests) >= 5
    made_by = makefile_frontend_settings()
    for manifest in manifests:
        config = json.loads(manifest.read_text())["config"]
        kind = config["frontend"]["name"].split("_")[0]
        threads = config["frontend"]["extractor"]["n_threads"]
        settings = made_by.get(config["frontend"]["name"], [])
        fresh = experiment_config(compose_config(
            "experiment=table7", f"frontend={kind}", f"population={config['population']['name']}", "arm=cmc",
            "reader@frontend.extractor=qwen25_coder_15b_llamacpp", "frontend.reply_format=lines",
            f"frontend.extractor.n_threads={'null' if threads is None else threads}", *settings))
        assert [d for d in config_differences(config, fresh) if d.startswith("frontend")] == [], manifest
