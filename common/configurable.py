"""The classes a config may instantiate: each registers itself, and a check refuses the rest.

A config names classes by `_target_`, and Hydra imports and calls whatever it names. The
configs under conf/ are ours, but a bundle's manifest is data that someone else may have
written: a manifest whose arm `_target_` is a pickle loader pointed at a file beside the
bundle would run that file's code on replay. So every instantiation in the project goes
through `instantiate_known`, which walks the whole node first and refuses any `_target_`
that is not a registered class before anything is built or loaded.

A class registers itself where it is defined, with `@configurable` (as lm-evaluation-harness's
`@register_model` does), so adding an arm, a method or a reader is one file plus one config.
Checking a name imports the module it names only when that module lies inside one of this
project's packages (importing our own code runs nothing a bundle chose), then asks whether
the class there registered itself. Your own classes (an arm or method of yours,
docs/own_method.md) are allowed on your machine by naming them in $CMC_EXTRA_TARGETS
(comma-separated dotted paths): the environment is the user's to trust, and a bundle cannot
add to it.

Classes that moved keep working in recorded configs (committed manifests name them where
they were): `FORMER_NAMES` maps every former dotted path to the present one, and every
recorded or composed config is read through it (`current_names`).
"""
from __future__ import annotations

import importlib
import inspect
import os
from typing import Any, Iterator, TypeVar

from omegaconf import DictConfig, ListConfig, OmegaConf

from common.errors import DataError

# The packages whose modules may hold configurable classes (names, not imports: this module
# is the bottom floor and imports none of them).
PROJECT_PACKAGES = frozenset({"arms", "cmc", "readers", "sources"})
_REGISTERED: set[str] = set()
T = TypeVar("T", bound=type)


def configurable(cls: T) -> T:
    """Class decorator: a config (conf/, or a bundle's manifest) may instantiate this class."""
    _REGISTERED.add(f"{cls.__module__}.{cls.__qualname__}")
    return cls


# Where classes lived before the packages became floors (2026-12, issue 37). Recorded configs
# keep their old names; this table is the one place that knows them.
FORMER_NAMES = {
    "arms.cmc.CMCArm": "cmc.read.CMCArm",
    "cmc.sources.rows.RowDataset": "sources.rows.RowDataset",
    "cmc.sources.synthetic.SyntheticDataset": "sources.synthetic.SyntheticDataset",
    "cmc.population.Population": "sources.population.Population",
    "cmc.readers.hf.HFReader": "readers.hf.HFReader",
    "cmc.readers.llamacpp.LlamaCppReader": "readers.llamacpp.LlamaCppReader",
    "cmc.readers.openai_api.OpenAIReader": "readers.openai_api.OpenAIReader",
    "cmc.readers.models.HubModel": "readers.models.HubModel",
    "cmc.readers.models.LocalModel": "readers.models.LocalModel",
    "cmc.readers.models.PackagedModel": "readers.models.PackagedModel",
    "cmc.readers.offline.PyPIGGUFModel": "readers.offline.PyPIGGUFModel",
}

def current_name(target: Any) -> Any:
    """The present dotted path of a class a recorded config names (itself if it never moved)."""
    return FORMER_NAMES.get(target, target) if isinstance(target, str) else target


def current_names(node: Any) -> Any:
    """A plain config tree with every `_target_` under its present name (a new tree)."""
    if isinstance(node, dict):
        return {key: current_name(value) if key == "_target_" else current_names(value) for key, value in node.items()}
    if isinstance(node, list):
        return [current_names(value) for value in node]
    return node


EXTRA_TARGETS_ENV = "CMC_EXTRA_TARGETS"


def extra_targets() -> frozenset[str]:
    """The classes of the user's own that $CMC_EXTRA_TARGETS allows on this machine."""
    return frozenset(t.strip() for t in os.environ.get(EXTRA_TARGETS_ENV, "").split(",") if t.strip())


def is_configurable(target: Any) -> bool:
    """Whether a config may instantiate `target`: a registered class of this project's
    packages (its module is imported to find out, and only then), or one the user allowed."""
    if not isinstance(target, str):
        return False
    if target in _REGISTERED or target in extra_targets():
        return True
    module, _, name = target.rpartition(".")
    if not name.isidentifier() or module.split(".")[0] not in PROJECT_PACKAGES:
        return False
    try:
        importlib.import_module(module)
    except ImportError:
        return False
    return target in _REGISTERED


NO_DEFAULT = object()  # constructor_default's answer for a parameter without a default


def constructor_default(target: Any, key: str) -> Any:
    """The default a registered class's constructor gives parameter `key` (searched up the
    class's bases, as a subclass passes **kwargs on), else NO_DEFAULT. A recorded config made
    before the key was added to conf/ ran with exactly this value."""
    if not is_configurable(target):
        return NO_DEFAULT
    module, _, name = current_name(target).rpartition(".")
    try:
        cls = getattr(importlib.import_module(module), name)
    except (ImportError, AttributeError):
        return NO_DEFAULT
    for klass in cls.__mro__:
        parameter = inspect.signature(klass.__init__).parameters.get(key) if "__init__" in vars(klass) else None
        if parameter is not None and parameter.kind is not parameter.VAR_KEYWORD:
            return NO_DEFAULT if parameter.default is parameter.empty else parameter.default
    return NO_DEFAULT


class UnknownTargetError(DataError):
    """A config names a class that is neither registered nor allowed; nothing was built."""


def check_targets(node: Any, where: str) -> None:
    """Raise UnknownTargetError naming the first `_target_` (by its dotted key) that is not
    one of this project's classes. `where` names the file or config the node came from."""
    container = OmegaConf.to_container(node, resolve=False) if isinstance(node, (DictConfig, ListConfig)) else node
    for key, item in config_nodes(container):
        if not isinstance(item, dict) or "_target_" not in item:
            continue
        target = current_name(item["_target_"])
        if not is_configurable(target):
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
    if isinstance(node, (DictConfig, ListConfig)):
        node = OmegaConf.to_container(node, resolve=True)
    try:
        return instantiate(current_names(node), **kwargs)
    except InstantiationException as exc:  # a bad value for one of our classes: name it, one line
        cause = exc.__cause__
        if isinstance(cause, (ValueError, TypeError)):  # a DataError included: one line, not Hydra's wrapper
            raise DataError(f"{where}: {cause}") from exc
        raise
