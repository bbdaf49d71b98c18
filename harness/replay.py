"""Replay a sealed bundle: rebuild its evidence and requests from the manifest's config and
the history, check the seal, and rescore. Any difference is reported, none is repaired.

No model weights are loaded: requests are rebuilt with the tokenizer only, and scoring
uses the stored outputs, so a replay checks artifacts and scoring, not generation.
"""
from __future__ import annotations

import re
from dataclasses import dataclass, field
from pathlib import Path
from typing import Sequence

from omegaconf import DictConfig, OmegaConf

from common.configurable import check_targets, config_nodes, current_names
from common.errors import DataError
from common.io import read_jsonl
from generation.service import no_generation
from harness.config import compose
from harness.confine import check_names, confined
from harness.recheck import compare, recheck
from harness.runs import Run
from harness.schemas import check_config
from provenance.bundle import read_bundle_jsonl, read_manifest, verify_seal
from provenance.manifest import WRITE_LOCATIONS
from provenance.vault import LabelVault
from scoring.metrics import score_output


@dataclass
class ReplayReport:
    bundle: str
    seal: str = ""
    checked: int = 0
    mismatches: list[str] = field(default_factory=list)

    @property
    def ok(self) -> bool:
        return not self.mismatches


# The one interpolation a recorded config keeps: a whole `${paths.NAME}` reference, then a
# literal rest (`${paths.data_dir}/factconsolidation/...`). Anything else after it (a second
# `${...}`, `${oc.env:...}`, `${oc.decode:...}`) would resolve on the replaying machine.
WHOLE_PATH_REFERENCE = re.compile(r"\$\{paths\.[A-Za-z_][A-Za-z0-9_]*\}[^$]*")
# Where a reader is reached and what credential it sends: never taken from a bundle.
CREDENTIAL_SOURCES = ("api_key_env",)
ADDRESSES = ("base_url",)
# The config groups a bundle records; `paths` and `hydra` are this machine's.
RECORDED_GROUPS = frozenset({"arm", "dataset", "embedder", "experiment", "frontend", "population", "prompt", "read",
                             "reader"})
MODEL_CACHE_KEY = "reader.model.cache_dir"  # this machine's cache of converted weights, from its default reader


def replay_config(bundle: Path, overrides: Sequence[str] = (), manifest: dict | None = None) -> DictConfig:
    """This machine's default config (for its paths) with every recorded node put back
    whole (a node is replaced, not merged, so no key of another choice leaks in), then the
    caller's overrides (e.g. a local dataset or model path). The recorded config is checked
    before anything is composed: a bundle is someone else's data, never code to run, and
    never says where this machine writes: a model source's cache is this machine's."""
    recorded = current_names((manifest or read_manifest(bundle))["config"])  # moved classes: their present names
    check_recorded_config(recorded, f"{bundle / 'manifest.json'}", overridden_keys(overrides))
    cfg = compose(check=False)
    model_cache = OmegaConf.select(cfg, MODEL_CACHE_KEY)
    OmegaConf.set_struct(cfg, False)
    for key, node in recorded.items():
        cfg[key] = node
    for key in reader_keys(recorded, ("cache_dir",)):
        OmegaConf.update(cfg, key, model_cache)
    for key in reader_keys(recorded, CREDENTIAL_SOURCES):  # the caller may name one of theirs
        OmegaConf.update(cfg, key, None)
    cfg.merge_with_dotlist(list(overrides))
    OmegaConf.set_struct(cfg, True)
    check_config(cfg, f"{bundle / 'manifest.json'}")
    check_names(cfg, f"{bundle / 'manifest.json'}")
    return cfg


def check_recorded_config(recorded: dict, where: str, overridden: set[str] | frozenset[str] = frozenset()) -> None:
    """Only this project's classes, and no interpolation but the data-location references a
    manifest keeps (`${paths.*}`): a resolver such as `${oc.env:...}` would read this
    machine's environment (its secrets) into the replayed config. A location the run writes
    to must be such a reference too, or one the caller overrides (a model source's cache is
    replaced by this machine's), or a bundle could make a replay write files where it chose."""
    if unknown := sorted(set(recorded) - RECORDED_GROUPS):
        raise DataError(f"{where}: config.{unknown[0]} is not a recorded config group "
                        f"(a bundle records {', '.join(sorted(RECORDED_GROUPS))})")
    check_targets(recorded, where)
    model_caches = set(reader_keys(recorded, ("cache_dir",)))  # a model source's cache: replaced by this machine's
    for key, value in config_nodes(recorded):
        if isinstance(value, str) and "${" in value and not WHOLE_PATH_REFERENCE.fullmatch(value):
            raise DataError(f"{where}: config.{key} = {value!r} interpolates something other than a data path; "
                            f"a recorded config holds resolved values")
        if key.rsplit(".", 1)[-1] in WRITE_LOCATIONS and key not in model_caches | overridden and not (
                isinstance(value, str) and WHOLE_PATH_REFERENCE.fullmatch(value) and _stays_inside(value)):
            raise DataError(f"{where}: config.{key} = {value!r}: where a run writes is one of this machine's paths "
                            f"(a ${{paths.*}} reference); a bundle cannot choose it: pass {key}=<a folder of yours>")


def _stays_inside(reference: str) -> bool:
    """A recorded write location names a folder under one of this machine's writable paths:
    not the data folder, and no '..' that climbs out of the one it names."""
    root, _, rest = reference.partition("}")
    return root != "${paths.data_dir" and ".." not in rest.replace("\\", "/").split("/")


def overridden_keys(overrides: Sequence[str]) -> set[str]:
    """The dotted keys a caller's overrides set (`+key=v`, `~key` included)."""
    return {override.split("=", 1)[0].lstrip("+~") for override in overrides}


def reader_keys(recorded: dict, names: Sequence[str]) -> list[str]:
    """Dotted keys of the given settings (`base_url`, `api_key_env`, a model source's
    `cache_dir`) of every reader node in a recorded config: the run's reader, its model
    source and any extractor inside its frontend."""
    return [f"{key}.{name}" for key, node in config_nodes(recorded)
            if isinstance(node, dict) and str(node.get("_target_", "")).startswith("readers.") and key
            for name in names if name in node]


def replay(bundle: str | Path, overrides: Sequence[str] = (), scores_dir: str | Path | None = None) -> ReplayReport:
    """Check a bundle against what this code rebuilds from it. Nothing is generated: every
    answer, the LLM frontend's extraction calls included, must come from the bundle, the
    committed extraction files or this machine's store, or the replay is refused."""
    with no_generation("a replay"):
        return _replay(Path(bundle), overrides, scores_dir)


def _replay(bundle: Path, overrides: Sequence[str], scores_dir: str | Path | None) -> ReplayReport:
    report = ReplayReport(str(bundle))
    report.seal = verify_seal(bundle)
    manifest = read_manifest(bundle)
    cfg = replay_config(bundle, overrides, manifest)
    with confined(cfg):
        run = Run(cfg, frozen_reader_pin=manifest["reader_pin"])
        differences, rebuilt = recheck(run, bundle, manifest, compare_config=False)
        report.mismatches += [d.detail for d in differences]
        if rebuilt is None:  # a method that took another path: nothing to rescore
            return report
        return _rescore(run, bundle, {"predictions.jsonl": read_bundle_jsonl(bundle, "predictions.jsonl"), **rebuilt},
                        report, scores_dir)


def _rescore(run: Run, bundle: Path, rows: dict[str, list[dict]], report: ReplayReport,
             scores_dir: str | Path | None) -> ReplayReport:
    """The outputs scored again with the released metric (an arm's sealed answers, a
    method's re-executed ones), against the committed items."""
    outputs = run.view.scored_outputs(rows)
    labels = LabelVault(run.adapter.load_labels).open(bundle)
    rescored = [score_output(output, labels[qid])["substring_em"] for qid, output in outputs]
    items = Path(scores_dir or run.scores_dir) / "items.jsonl"
    if items.is_file() and (detail := compare("score", [row["substring_em"] for row in read_jsonl(items)], rescored)):
        report.mismatches.append(detail)
    report.checked = len(outputs)
    return report
