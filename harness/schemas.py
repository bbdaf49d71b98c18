"""Structured configs: one dataclass per configurable class, made from its constructor.

Each class a config may name (a `@configurable` class, common/configurable.py) gets a dataclass
whose fields are the constructor's parameters with their annotations and defaults; `Literal` choices become
an Enum, so `arm.empty_fallback=latst_state` fails like `arm.max_hops=1.5` and
`+arm.max_hopz=3`: at compose time, naming the key, before any stage runs. Deriving the
schemas from the signatures keeps one source of truth (a hand-written copy per class would
drift from the code it describes). `check_config` validates every `_target_` node of a composed
config against its class's schema without changing the config (a merged schema would add
every default to the manifest, and the committed bundles' configs must stay as they are).
"""
from __future__ import annotations

import dataclasses
import enum
import importlib
import inspect
import types
import typing
from functools import lru_cache
from typing import Any, Callable, Literal, Optional, Union

from omegaconf import MISSING, DictConfig, OmegaConf
from omegaconf.errors import OmegaConfBaseException

from common.configurable import config_nodes, current_name, is_configurable
from common.errors import DataError
from common.secrets import register_env_secrets, scrub
from harness.confine import check_names

_PLAIN = (int, float, str, bool)


def _field_type(annotation: Any) -> Any:
    """The OmegaConf-checkable type of an annotation: plain scalars, Optional of one, an
    Enum for Literal choices; anything else (lists, mappings, nested classes) is Any."""
    origin, args = typing.get_origin(annotation), typing.get_args(annotation)
    if annotation in _PLAIN:
        return annotation
    if origin is Literal and all(isinstance(a, str) for a in args):
        return enum.Enum("Choice", {a: a for a in args}, type=str)  # str mixin: values compare as strings
    if origin in (Union, types.UnionType) and type(None) in args:
        rest = [a for a in args if a is not type(None)]
        inner = _field_type(rest[0]) if len(rest) == 1 else Any
        return Any if inner is Any else Optional[inner]
    return Any


def _hints(cls: type) -> dict[str, Any]:
    """The constructor's resolved annotations; none (every value unchecked, Any) for a class
    whose annotations name something imported only for type checking."""
    try:
        return typing.get_type_hints(cls.__init__)
    except (NameError, TypeError):
        return {}


def _parameters(cls: type) -> tuple[list[tuple[inspect.Parameter, Any]], bool]:
    """Constructor parameters with their annotations, following `**kwargs` up the classes
    that forward it to `super().__init__` (StaleClosure -> CMCArm -> GraphRead); the bool
    says whether the last constructor still takes arbitrary keywords."""
    found: dict[str, tuple[inspect.Parameter, Any]] = {}
    for klass in cls.__mro__:
        if "__init__" not in vars(klass) or klass is object:
            continue
        hints = _hints(klass)
        params = list(inspect.signature(klass.__init__).parameters.values())[1:]
        for parameter in params:
            if parameter.kind not in (parameter.VAR_KEYWORD, parameter.VAR_POSITIONAL):
                found.setdefault(parameter.name, (parameter, hints.get(parameter.name, Any)))
        if not any(p.kind is p.VAR_KEYWORD for p in params):
            return list(found.values()), False
    return list(found.values()), True


@lru_cache(maxsize=None)
def schema_for(target: str) -> tuple[type, bool]:
    """The dataclass for a listed class, and whether the class takes extra keyword arguments."""
    if not is_configurable(target):
        raise DataError(f"{target}: not one of this project's classes")
    module, _, name = target.rpartition(".")
    cls = getattr(importlib.import_module(module), name)
    parameters, open_ended = _parameters(cls)
    fields: list[tuple[str, Any, Any]] = [("_target_", str, dataclasses.field(default=target))]
    for parameter, annotation in parameters:
        default = MISSING if parameter.default is parameter.empty else parameter.default
        kind = _field_type(annotation)
        if isinstance(kind, type) and issubclass(kind, enum.Enum) and isinstance(default, str):
            default = kind(default)
        if isinstance(default, (*_PLAIN, enum.Enum, type(None))) or default is MISSING:
            default = dataclasses.field(default=default)
        else:  # a mutable default (a tuple, a dict) is not a dataclass default
            default = dataclasses.field(default_factory=lambda value=default: value)
        fields.append((parameter.name, kind, default))
    return dataclasses.make_dataclass(f"{name}Schema", fields), open_ended


def _plain(cfg: DictConfig, resolve: bool) -> dict[str, Any]:
    """The config as plain containers, without Hydra's own node (its business)."""
    return {key: OmegaConf.to_container(cfg[key], resolve=resolve, throw_on_missing=False)
            if OmegaConf.is_config(cfg[key]) else cfg[key] for key in cfg if key != "hydra"}


def check_config(cfg: DictConfig, where: str = "config") -> None:
    """Validate every `_target_` node against its class's schema: unknown keys, values of the
    wrong type and choices outside a Literal fail here with the dotted key named."""
    # Credentials the config reads from the environment are scrubbed from everything written
    # from now on, before any stage builds a reader (an error body may echo them at once).
    register_env_secrets(value for _, value in config_nodes(_plain(cfg, resolve=False)) if isinstance(value, str))
    tree = _plain(cfg, resolve=True)
    if isinstance(tree.get("read"), dict):  # the shared read contract first: the arms take their values from it
        _check_values("read", tree["read"], where)
    for key, node in config_nodes(tree):
        if isinstance(node, dict) and is_configurable(current_name(node.get("_target_"))):
            _check_node(key, node, where)
            _check_values(key, node, where)
    check_names(cfg, where)


# Ranges of parameters several classes share, by name: a value outside one fails when the
# config is checked, naming its key, instead of after a manifest was frozen (or never).
# (the values it applies to, the test, what is wanted): numbers only for a numeric range
# (another type is the schema's to name); any value for `lengths` (a string is not a list).
_NUMBER = (int, float)
_AT_LEAST_ONE = (_NUMBER, lambda v: v >= 1, "at least 1")
_NOT_NEGATIVE = (_NUMBER, lambda v: v >= 0, "0 or more")
RANGES: dict[str, tuple[tuple[type, ...], Callable[[Any], bool], str]] = {
    "max_new_tokens": _AT_LEAST_ONE, "concurrency": _AT_LEAST_ONE, "batch_records": _AT_LEAST_ONE,
    "per_cell": _AT_LEAST_ONE, "max_hops": _AT_LEAST_ONE, "n_threads": _AT_LEAST_ONE, "budget_chars": _AT_LEAST_ONE,
    "max_retries": _NOT_NEGATIVE, "repair_rounds": _NOT_NEGATIVE, "backoff_s": _NOT_NEGATIVE,
    "max_backoff_s": _NOT_NEGATIVE, "timeout_s": (_NUMBER, lambda v: v > 0, "more than 0"),
    "base_url": ((str,), lambda v: v.lower().startswith(("http://", "https://")), "an http:// or https:// address"),
    "lengths": ((object,), lambda v: isinstance(v, list) and all(isinstance(x, str) for x in v),
                "a list of lengths, e.g. [6k,32k]"),
}


def _check_values(key: str, node: dict[str, Any], where: str) -> None:
    for name, (kinds, valid, wanted) in RANGES.items():
        value = node.get(name)
        if value is None or isinstance(value, bool) or not isinstance(value, kinds):
            continue
        if not valid(value):
            shown = scrub(value) if isinstance(value, str) else value
            raise DataError(f"{where}: {key}.{name} = {shown!r}: must be {wanted}")


def _check_node(key: str, node: dict[str, Any], where: str) -> None:
    schema, open_ended = schema_for(current_name(node["_target_"]))
    known = {f.name for f in dataclasses.fields(schema)}
    unknown = sorted(set(node) - known)
    if unknown and not open_ended:
        raise DataError(f"{where}: {key}.{unknown[0]} is not a parameter of {node['_target_']} "
                        f"(its parameters: {', '.join(sorted(known - {'_target_'}))})")
    values = {name: value for name, value in node.items() if name in known and not isinstance(value, (dict, list))}
    try:
        OmegaConf.merge(OmegaConf.structured(schema), values)
    except OmegaConfBaseException as exc:
        name = getattr(exc, "full_key", None) or getattr(exc, "key", None) or "?"
        message = str(exc).splitlines()[0]
        raise DataError(f"{where}: {key}.{name} = {values.get(str(name))!r}: {message}") from None
