"""What a config may name and where a run may write.

Names become folder and file names (results/bundles/<experiment>/<dataset>-<frontend>-...,
results/evidence/.../<arm>.jsonl, the LLM frontend's extraction folder), so each is checked
once, when the config is checked, before any stage builds a path from it. The configured
locations are the only folders a run writes under: `confined` hands them to common.io, whose
writers refuse anything else, whichever code path built the path.
"""
from __future__ import annotations

import re
from contextlib import contextmanager
from typing import Iterator

from omegaconf import DictConfig, OmegaConf

from common.configurable import config_nodes
from common.errors import DataError
from common.io import writes_confined_to
from provenance.manifest import WRITE_LOCATIONS

SAFE_NAME = re.compile(r"[A-Za-z0-9_-][A-Za-z0-9_.-]*")
# The nodes whose `name` becomes part of a path: the run's parts and the LLM extractor.
NAMED_NODES = ("dataset", "frontend", "frontend.extractor", "population", "arm", "reader", "experiment")


def check_name(key: str, name: object, where: str = "config") -> str:
    """`name` if it is safe as one path component, else DataError naming the key."""
    if not isinstance(name, str) or not SAFE_NAME.fullmatch(name):
        raise DataError(f"{where}: {key}.name = {name!r}: use letters, digits, '_', '.' and '-' (not leading '.')")
    return name


def check_names(cfg: DictConfig, where: str = "config") -> None:
    """Every name that becomes a path, resolved (a frontend's name is derived from its extractor's)."""
    for key in NAMED_NODES:
        node = OmegaConf.select(cfg, key, default=None)
        if node is not None and "name" in node:
            check_name(key, OmegaConf.select(cfg, f"{key}.name"), where)


def write_roots(cfg: DictConfig) -> list[str]:
    """Where this config lets a run write: the configured paths (never the data folder, which
    is read only) and every cache or extraction folder a node names (the model cache)."""
    paths = OmegaConf.to_container(cfg.paths, resolve=True)
    roots = [str(value) for key, value in paths.items() if key != "data_dir" and value]
    tree = OmegaConf.to_container(cfg, resolve=True, throw_on_missing=False)
    tree.pop("hydra", None)
    roots += [str(node[key]) for _, node in config_nodes(tree) if isinstance(node, dict)
              for key in WRITE_LOCATIONS if isinstance(node.get(key), str)]
    return sorted(set(roots))


@contextmanager
def confined(cfg: DictConfig) -> Iterator[None]:
    """Run the block with every write held to `write_roots(cfg)`."""
    with writes_confined_to(write_roots(cfg)):
        yield
