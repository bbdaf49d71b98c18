"""The manifest's experiment config: portable across machines, compared key by key."""
from __future__ import annotations

from cmc.manifest import config_differences, experiment_config
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


def test_differences_name_the_keys_and_ignore_recorded_locations():
    fresh = experiment_config(compose_config("arm=cmc"))
    legacy = experiment_config(compose_config("arm=cmc"))
    legacy["dataset"]["path"] = "/work/shared/data/factconsolidation/Conflict_Resolution.parquet"
    assert config_differences(legacy, fresh) == []
    legacy["arm"]["max_hops"] = 1
    legacy["read"]["budget_chars"] = 100
    legacy["extra"] = {"x": 1}
    assert config_differences(legacy, fresh) == ["arm.max_hops", "extra", "read.budget_chars"]
