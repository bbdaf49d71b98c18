"""Configs compose, every node instantiates its class, and typos fail loudly."""
import subprocess
import sys
from pathlib import Path

import pytest
from hydra.errors import ConfigCompositionException, MissingConfigException
from hydra.utils import instantiate

from common.errors import DataError
from harness.config import compose
from harness.packets import evidence_is_current, write_evidence
from harness.stages import run
from tests.conftest import ROOT, compose_config

ARM_DIR = ROOT / "conf" / "arm"


@pytest.mark.parametrize("arm", sorted(p.stem for p in ARM_DIR.glob("*.yaml")))
def test_every_arm_config_instantiates_with_its_own_name(arm):
    cfg = compose_config(f"arm={arm}")
    instance = instantiate(cfg.arm)
    assert instance.name == arm == cfg.arm.name


def test_read_contract_defaults_reach_the_arms():
    cmc = instantiate(compose_config("arm=cmc").arm)
    assert (cmc.max_hops, cmc.budget_chars, cmc.empty_fallback) == (5, 60_000, "latest_state")
    capped = instantiate(compose_config("arm=cmc_depth2", "read.budget_chars=1000").arm)
    assert (capped.max_hops, capped.budget_chars) == (2, 1000)
    matched = instantiate(compose_config("arm=fact_bm25_matched", "read.max_hops=3").arm)
    assert matched.reference.max_hops == 3


def test_unknown_arm_lists_the_valid_choices():
    with pytest.raises(MissingConfigException) as info:
        compose_config("arm=cmcc")
    assert "stale_closure" in str(info.value) and "fact_bm25" in str(info.value)


def test_unknown_field_is_refused():
    with pytest.raises(ConfigCompositionException, match="max_hop"):
        compose_config("arm.max_hop=3")


def test_unknown_stage_lists_the_valid_stages():
    with pytest.raises(DataError, match="stage='evidnce' is not a stage; the stages: all, evidence, generate"):
        run(compose_config("stage=evidnce"))


def _evidence_run(tmp_path: Path, arm: str) -> bytes:
    out = tmp_path / "results"
    subprocess.run(
        [sys.executable, "run.py", "stage=evidence", f"arm={arm}", f"paths.results_dir={out}",
         f"hydra.run.dir={tmp_path / 'hydra'}", "reader=qwen25_coder_05b"],  # the suite's offline tokenizer
        cwd=ROOT, check=True, capture_output=True,
    )
    return (out / "evidence" / "factconsolidation" / "grammar" / f"{arm}.jsonl").read_bytes()


@pytest.mark.parametrize("arm", ["cmc", "disjoint_random"])
def test_evidence_stage_is_byte_identical_across_runs(tmp_path, arm):
    first = _evidence_run(tmp_path / "a", arm)
    second = _evidence_run(tmp_path / "b", arm)
    assert first == second and first.count(b"\n") == 800


@pytest.mark.parametrize("experiment", sorted(p.stem for p in (ROOT / "conf" / "experiment").glob("*.yaml")
                                              if p.stem != "adhoc"))
def test_experiment_presets_sweep_exactly_their_views(experiment):
    """`run.py -m experiment=X` runs every view its tables expect, and each contrast compares two of them."""
    cfg = compose(f"experiment={experiment}", return_hydra_config=True)
    views = list(cfg.experiment.views)
    assert cfg.hydra.sweeper.params.arm.split(",") == views
    assert all(compose_config(f"arm={view}").arm.name == view for view in views)
    assert {arm for pair in cfg.experiment.preregistered.contrasts for arm in pair} <= set(views)


def test_appendix_presets_carry_the_papers_reader_caps():
    assert compose_config("experiment=table5").reader.max_new_tokens == 32  # B.1
    assert compose_config("experiment=table5", "reader=qwen35_4b").reader.max_input_tokens == 262_144  # B.1
    assert compose_config("experiment=table3").reader.max_input_tokens == 4096  # Table 3 (appendix F)
    assert compose_config("experiment=table1").reader.max_new_tokens == 64


def test_packets_on_disk_are_current_only_for_the_config_and_data_file_that_made_them(tmp_path):
    cfg = compose_config("arm=cmc", f"paths.results_dir={tmp_path}")
    pin = {"sha256": "a" * 64}
    write_evidence(cfg, pin, [{"question_id": "q"}])
    assert evidence_is_current(cfg, pin)
    assert not evidence_is_current(cfg, {"sha256": "b" * 64})  # the data file was rebuilt at the same path
    assert not evidence_is_current(compose_config("arm=cmc", "read.budget_chars=10", f"paths.results_dir={tmp_path}"), pin)

    def failing():
        yield {"question_id": "q"}
        raise RuntimeError("killed mid-write")

    with pytest.raises(RuntimeError):
        write_evidence(cfg, pin, failing())
    assert not evidence_is_current(cfg, pin)  # nothing vouches for what a failed write left


def test_packets_built_from_a_frozen_extraction_are_current_only_for_its_content(tmp_path):
    frozen = tmp_path / "extraction.json"
    frozen.write_text('{"records": []}\n')
    cfg = compose_config("arm=cmc", "frontend=llm", f"frontend.frozen={frozen}", f"paths.results_dir={tmp_path}")
    pin = {"sha256": "a" * 64}
    write_evidence(cfg, pin, [{"question_id": "q"}])
    assert evidence_is_current(cfg, pin)
    frozen.write_text('{"records": [1]}\n')  # re-extracted to the same path
    assert not evidence_is_current(cfg, pin)
    frozen.unlink()  # gone: rebuild, so the frontend can say which file is missing
    assert not evidence_is_current(cfg, pin)


EXTRACTOR = "reader@frontend.extractor=qwen25_coder_15b_llamacpp"


@pytest.mark.parametrize("kind, overrides", [
    ("grammar", ()),
    ("llm", (EXTRACTOR,)),
    ("llm", (EXTRACTOR, "frontend.reply_format=lines", "frontend.prompt=extract_lines_examples")),
    ("hybrid", (EXTRACTOR, "frontend.reply_format=lines")),
    ("hybrid", (EXTRACTOR, "frontend.reply_format=lines", "frontend.prompt=extract_lines_examples",
                "frontend.constrained=true")),
    ("llm", (EXTRACTOR, "frontend.reply_format=lines", "frontend.constrained=true",
             "frontend.object_position=apart")),
])
def test_a_composed_frontend_name_reads_back_as_its_kind(kind, overrides):
    """Tables set a frontend beside the paper's figures for its kind, read from the name the
    config builds; every name the config can build must read back as the group it came from."""
    from cmc.frontends import frontend_kind

    name = compose_config(f"frontend={kind}", *overrides).frontend.name
    assert frontend_kind(name) == kind, name


@pytest.mark.parametrize("kind", ["llm", "hybrid"])
def test_constrained_decoding_gets_its_own_run_folder(kind):
    """A constrained extraction is another frontend's reading (another fingerprint): its runs
    and tables must not share a name with the unconstrained one, whose name stays as it was."""
    base = (f"frontend={kind}", EXTRACTOR, "frontend.reply_format=lines", "frontend.prompt=extract_lines_examples")
    plain = compose_config(*base).frontend.name
    constrained = compose_config(*base, "frontend.constrained=true").frontend.name
    assert plain == f"{kind}_lines_examples_qwen25_coder_15b_llamacpp"
    assert constrained == f"{kind}_lines_examples_constrained_qwen25_coder_15b_llamacpp"
    apart = compose_config(*base, "frontend.constrained=true", "frontend.object_position=apart").frontend.name
    assert apart == f"{kind}_lines_examples_constrained_apart_qwen25_coder_15b_llamacpp"
