"""The only classes a config may instantiate.

A config names classes by `_target_`, and Hydra imports and calls whatever it names. The
configs under conf/ are ours, but a bundle's manifest is data that someone else may have
written: a manifest whose arm `_target_` is a pickle loader pointed at a file beside the
bundle would run that file's code on replay. So every instantiation in the project goes
through `instantiate_known`, which walks the whole node first and refuses any `_target_`
outside this allow-list before anything is imported or loaded.

Adding a class to the project's configs means adding its dotted path here (a test checks
that every `_target_` under conf/ is listed and that every listed path is a class). Your
own classes (an arm or method of yours, docs/own_method.md) are allowed on your machine by
naming them in $CMC_EXTRA_TARGETS (comma-separated dotted paths): the environment is the
user's to trust, and a bundle cannot add to it.
"""
from __future__ import annotations

import os
from typing import Any, Iterator

from omegaconf import DictConfig, ListConfig, OmegaConf

from cmc.errors import DataError

KNOWN_TARGETS = frozenset({
    # arms
    "arms.cmc.CMCArm", "arms.controls.DisjointRandom", "arms.controls.NoContext", "arms.gwalk.GWalk", "arms.mello.MeLLo",
    "arms.controls.PriorReadRefresh", "arms.controls.StaleClosure", "arms.embedders.FlagEmbedder",
    "arms.retrieval.DenseFacts", "arms.retrieval.FactBM25", "arms.retrieval.FactBM25Matched",
    "arms.state.RawSuffix", "arms.state.StateView",
    # frontends
    "cmc.frontends.grammar.GrammarFrontend", "cmc.frontends.hybrid.HybridFrontend",
    "cmc.frontends.llm.LLMFrontend",
    # datasets and populations
    "cmc.sources.rows.RowDataset", "cmc.sources.synthetic.SyntheticDataset", "cmc.population.Population",
    # readers and where their weights come from
    "cmc.readers.hf.HFReader", "cmc.readers.llamacpp.LlamaCppReader", "cmc.readers.openai_api.OpenAIReader",
    "cmc.readers.models.HubModel", "cmc.readers.models.LocalModel", "cmc.readers.models.PackagedModel",
    "cmc.readers.offline.PyPIGGUFModel",
})


EXTRA_TARGETS_ENV = "CMC_EXTRA_TARGETS"


def known_targets() -> frozenset[str]:
    """The project's classes and those the user named in $CMC_EXTRA_TARGETS."""
    extra = os.environ.get(EXTRA_TARGETS_ENV, "")
    return KNOWN_TARGETS | {target.strip() for target in extra.split(",") if target.strip()}


class UnknownTargetError(DataError):
    """A config names a class outside the allow-list; nothing was imported."""


def check_targets(node: Any, where: str) -> None:
    """Raise UnknownTargetError naming the first `_target_` (by its dotted key) that is not
    one of this project's classes. `where` names the file or config the node came from."""
    container = OmegaConf.to_container(node, resolve=False) if isinstance(node, (DictConfig, ListConfig)) else node
    allowed = known_targets()
    for key, item in config_nodes(container):
        if not isinstance(item, dict) or "_target_" not in item:
            continue
        target = item["_target_"]
        if not isinstance(target, str) or target not in allowed:
            raise UnknownTargetError(
                f"{where}: {key or '<root>'}._target_ = {target!r} is not one of this project's classes; "
                f"refusing to instantiate it (configs from bundles are data, never code; a class of your own "
                f"is allowed by naming it in ${EXTRA_TARGETS_ENV})")


def config_nodes(node: Any, key: str = "") -> Iterator[tuple[str, Any]]:
    """Every node of a plain config tree with its dotted key, the root first."""
    yield key, node
    if isinstance(node, dict):
        for name, value in node.items():
            yield from config_nodes(value, f"{key}.{name}" if key else str(name))
    elif isinstance(node, list):
        for index, value in enumerate(node):
            yield from config_nodes(value, f"{key}[{index}]")


def instantiate_known(node: Any, where: str = "config", **kwargs: Any) -> Any:
    """hydra.utils.instantiate, after checking every `_target_` in the node."""
    from hydra.errors import InstantiationException
    from hydra.utils import instantiate

    check_targets(node, where)
    try:
        return instantiate(node, **kwargs)
    except InstantiationException as exc:  # a bad value for one of our classes: name it, one line
        cause = exc.__cause__
        if isinstance(cause, (ValueError, TypeError)):  # a DataError included: one line, not Hydra's wrapper
            raise DataError(f"{where}: {cause}") from exc
        raise
