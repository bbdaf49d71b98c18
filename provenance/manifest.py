"""What a bundle records about how it was made: resolved config, code state, versions,
pins, and the preregistered contrasts and population, fixed before the reader loads."""
from __future__ import annotations

import importlib.metadata
import subprocess
from pathlib import Path
from typing import Any, Sequence

from omegaconf import DictConfig, OmegaConf

from common.configurable import NO_DEFAULT, config_nodes, constructor_default, current_name
from common.errors import DataError
from common.io import canonical_json, sha256_text
from common.locations import DISTRIBUTION, code_version
from common.secrets import register_env_secrets, scrub, scrub_tree
from readers.compute import DTYPES

PACKAGES = ("torch", "transformers", "tokenizers", "hydra-core", "numpy", "scipy", "pandas", "pyarrow",
            "rank-bm25", "FlagEmbedding", "httpx", "cmc-harness")
# Dotted keys that are not part of what was measured. allow_errors: a seal-time choice, recorded in the
# manifest only when failures were sealed; allow_dirty: recorded as the diff itself under `git`;
# population.shard: how a run was split up (a bundle sealed from shards equals one made in one piece);
# reuse_answers_of_caps: where an answer may come from, not what it is (each reused one names its donor).
# Keys naming where a run writes (a model cache, the frozen extractions): this machine's
# business, never part of what a bundle measures (CMC_MODEL_CACHE moves the model cache).
WRITE_LOCATIONS = ("cache_dir", "extractions_dir")
# Not compared between a sealed config and a fresh one either: which variable holds your key
# (a replayed or resealed config names none unless you do).
MACHINE_LOCAL_KEYS = (*WRITE_LOCATIONS, "api_key_env")
MACHINE_LOCAL = ("paths", "hydra", "stage", "allow_errors", "allow_dirty", "population.shard", "reuse_answers_of_caps")


def _git(root: Path, *args: str) -> str:
    return subprocess.run(["git", *args], cwd=root, capture_output=True, text=True, check=False).stdout


def git_state(root: Path | None, with_diff: bool = False) -> dict[str, Any]:
    """The commit, and whether tracked code or config differs from it. Changes under results/
    do not count: a long run commits its own journal there while it generates. With
    `with_diff`, a dirty tree's diff against the commit is included with its sha256.
    `root` None is code installed from a wheel (common.locations.checkout_root): no commit
    to name, so the distribution's version identifies the code instead, and nothing can be
    dirty (a wheel is built from one tree and not edited in place)."""
    if root is None:
        return {"commit": None, "dirty": None, "installed": f"{DISTRIBUTION}=={code_version()}"}
    commit = _git(root, "rev-parse", "HEAD").strip() or None
    if commit is None:
        return {"commit": None, "dirty": None}
    outside_results = ("--", ".", ":(exclude)results")
    changed = _git(root, "status", "--porcelain", "--untracked-files=no", *outside_results).strip()
    state: dict[str, Any] = {"commit": commit, "dirty": bool(changed)}
    if changed and with_diff:
        diff = _git(root, "diff", "HEAD", "--no-color", "--no-ext-diff", *outside_results)
        # The hash is of the code that ran; the text kept is scrubbed (an edited config may hold a key).
        state |= {"diff_sha256": sha256_text(diff), "diff": scrub(diff)}
    return state


def frozen_git_state(root: Path | None, allow_dirty: bool) -> dict[str, Any]:
    """The git state a manifest freezes. A result must say which code made it (the paper ran
    against a clean worktree), so a tree with uncommitted changes outside results/ is
    refused unless the user allows it, and then the diff itself goes into the manifest."""
    state = git_state(root, with_diff=bool(allow_dirty))
    if state["dirty"] and not allow_dirty:
        changed = _git(root, "status", "--porcelain", "--untracked-files=no", "--", ".", ":(exclude)results").split("\n")
        files = ", ".join(line[3:] for line in changed[:5] if line)
        raise DataError(f"{root}: uncommitted changes outside results/ ({files}{', ...' if len(changed) > 5 else ''}); "
                        f"commit them, or pass allow_dirty=true to record the diff in the bundle")
    return state


def package_versions() -> dict[str, str | None]:
    versions: dict[str, str | None] = {}
    for name in PACKAGES:
        try:
            versions[name] = importlib.metadata.version(name)
        except importlib.metadata.PackageNotFoundError:
            versions[name] = None
    return versions


PATH_REFERENCE = "${paths."  # a value built from a machine-local location


def experiment_config(cfg: DictConfig) -> dict[str, Any]:
    """The resolved config minus machine-local paths: what defines the measurement.

    A value interpolated from `paths` (the dataset file, the template table) keeps its
    unresolved form, e.g. `${paths.data_dir}/factconsolidation/...`: where the data lies is
    not part of the measurement (its sha256 is, in dataset_pin), and a replay resolves it
    against the replaying machine's paths."""
    resolved = OmegaConf.to_container(cfg, resolve=True)
    raw = OmegaConf.to_container(cfg, resolve=False)
    register_env_secrets(value for _, value in config_nodes(raw) if isinstance(value, str))
    # Credentials never reach a manifest (a base_url's user:password@, a key in a value).
    return _without(scrub_tree(_keep_path_references(resolved, raw)), MACHINE_LOCAL)


def _without(tree: dict[str, Any], keys: Sequence[str], prefix: str = "") -> dict[str, Any]:
    """The tree minus the dotted keys."""
    return {k: _without(v, keys, f"{prefix}{k}.") if isinstance(v, dict) else v
            for k, v in tree.items() if f"{prefix}{k}" not in keys}


def _keep_path_references(resolved: Any, raw: Any) -> Any:
    if isinstance(resolved, (dict, list)) and not isinstance(raw, type(resolved)):
        return resolved  # a whole node interpolated from elsewhere (`embedder: ${embedder}`): its values count
    if isinstance(resolved, dict):
        return {k: _keep_path_references(v, raw[k]) for k, v in resolved.items()}
    if isinstance(resolved, list):
        return [_keep_path_references(v, r) for v, r in zip(resolved, raw)]
    return raw if isinstance(raw, str) and PATH_REFERENCE in raw else resolved


def config_differences(recorded: dict[str, Any], fresh: dict[str, Any], prefix: str = "") -> list[str]:
    """Dotted keys whose values differ between a recorded experiment config and a fresh one.
    Keys that name a machine-local location in the fresh config are not compared (manifests
    written before locations were kept unresolved recorded the resolving machine's path),
    and a fresh `dtype: auto` matches a recorded dtype (bundles sealed before `auto` existed:
    the run adopts the recorded dtype, see HFReader.freeze). A class named by a former
    name (common.configurable.FORMER_NAMES) is the same class, and a key added to conf/ after
    the recording, set to the class's own constructor default, is what the recorded run used."""
    if prefix.endswith("._target_"):
        recorded, fresh = current_name(recorded), current_name(fresh)
    if isinstance(recorded, dict) and isinstance(fresh, dict):
        added = {k for k in set(fresh) - set(recorded) if _at_default(fresh.get("_target_"), k, fresh[k])}
        return [d for k in sorted((set(recorded) | set(fresh)) - added)
                for d in config_differences(recorded.get(k, "<absent>"), fresh.get(k, "<absent>"), f"{prefix}.{k}")]
    if isinstance(fresh, str) and PATH_REFERENCE in fresh or prefix.rsplit(".", 1)[-1] in MACHINE_LOCAL_KEYS:
        return []
    if fresh == "auto" and prefix.endswith(".dtype") and recorded in DTYPES:
        return []  # what `auto` resolved to is in the frozen reader pin, and so in every request id
    return [] if recorded == fresh else [prefix.lstrip(".")]


def _at_default(target: Any, key: str, value: Any) -> bool:
    default = constructor_default(target, key)
    return default is not NO_DEFAULT and default == value


def build_manifest(
    cfg: DictConfig, question_ids: Sequence[str], dataset_pin: dict[str, Any], reader_pin: dict[str, Any],
    prompt_version: str, root: Path | None,
) -> dict[str, Any]:
    return {
        "config": experiment_config(cfg),
        "git": frozen_git_state(root, cfg.get("allow_dirty", False)),
        "packages": package_versions(),
        "dataset_pin": dataset_pin,
        "reader_pin": scrub_tree(reader_pin),  # a token sent in the body (extra_body) is part of the pin
        "prompt_version": prompt_version,
        "preregistered": OmegaConf.to_container(cfg.experiment.preregistered, resolve=True),
        "population": {"name": cfg.population.name, "n": len(question_ids),
                       "question_ids_sha256": sha256_text(canonical_json(list(question_ids)))},
    }
