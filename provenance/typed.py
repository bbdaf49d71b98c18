"""Typed JSON rows: a dataclass is a row type; it checks a parsed row (an unknown, missing or
mistyped field is a one-line DataError naming the file, the line and the field) and emits
its JSON Schema (draft 2020-12), so a tool without this package reads the same contract.

Field types: str, int, float (any JSON number), bool, None, Any, list[T], dict[str, T],
unions of these, and nested row types. A field with a default may be absent; a field whose
type admits None may be null. `doc` attaches a field's description and its JSON name where
that is not a Python identifier.
"""
from __future__ import annotations

import dataclasses
import functools
import types
import typing
from typing import Any, Union

from common.errors import DataError

DRAFT = "https://json-schema.org/draft/2020-12/schema"
_PRIMITIVES = {str: "string", int: "integer", float: "number", bool: "boolean", type(None): "null"}


def doc(text: str, optional: bool = False, name: str | None = None) -> Any:
    """A described field; `optional`: the row may lack it; `name`: its key in the JSON."""
    meta = {"doc": text, **({"json": name} if name else {})}
    return dataclasses.field(default=None, metadata=meta) if optional else dataclasses.field(metadata=meta)


@functools.cache
def fields(row_type: type) -> list[tuple[str, Any, bool, str]]:
    """(JSON name, type, required, description) of each field, in declaration order."""
    hints = typing.get_type_hints(row_type)
    return [(f.metadata.get("json", f.name), hints[f.name],
             f.default is dataclasses.MISSING and f.default_factory is dataclasses.MISSING, f.metadata.get("doc", ""))
            for f in dataclasses.fields(row_type)]


def check(row_types: tuple[type, ...], value: Any, where: str) -> None:
    """Raise DataError `<where>: <problem>` unless `value` is a row of one of `row_types`
    (a file with two row kinds names the problem of the kind whose fields it shares most)."""
    problems = []
    for row_type in row_types:
        if (problem := _problem(row_type, value, "")) is None:
            return
        problems.append(problem)
    keys = set(value) if isinstance(value, dict) else set()
    best = max(range(len(row_types)), key=lambda i: (len(keys & {f[0] for f in fields(row_types[i])}), -i))
    raise DataError(f"{where}: {problems[best]}")


def _problem(tp: Any, value: Any, at: str) -> str | None:
    """What is wrong with `value` as a `tp` found at field path `at`, or None."""
    return _checker(tp)(value, at)


Checker = typing.Callable[[Any, str], "str | None"]


@functools.cache
def _checker(tp: Any) -> Checker:
    """A function from (value, field path) to its problem or None, made once per type."""
    origin = typing.get_origin(tp)
    if tp is Any:
        return lambda value, at: None
    if origin in (Union, types.UnionType):
        return functools.partial(_union_problem, typing.get_args(tp))
    if origin is list:
        return functools.partial(_list_problem, tp, _checker(typing.get_args(tp)[0]))
    if origin is dict:
        return functools.partial(_dict_problem, tp, _checker(typing.get_args(tp)[1]))
    if dataclasses.is_dataclass(tp):
        return functools.partial(_object_problem, tp)
    return lambda value, at: None if _is(tp, value) else _wrong(tp, value, at)


def _list_problem(tp: Any, inner: Checker, value: Any, at: str) -> str | None:
    if not isinstance(value, list):
        return _wrong(tp, value, at)
    item = typing.get_args(tp)[0]
    if item in (str, int) and all(type(v) is item for v in value):  # the long lists (positions): fast
        return None
    return next((p for i, v in enumerate(value) if (p := inner(v, f"{at}[{i}]"))), None)


def _dict_problem(tp: Any, inner: Checker, value: Any, at: str) -> str | None:
    if not isinstance(value, dict):
        return _wrong(tp, value, at)
    return next((p for k, v in value.items() if (p := inner(v, _join(at, k)))), None)


def _union_problem(alternatives: tuple[Any, ...], value: Any, at: str) -> str | None:
    problems = [_problem(a, value, at) for a in alternatives]
    if any(p is None for p in problems):
        return None
    for alternative, problem in zip(alternatives, problems):  # the container it is: say what is wrong inside
        if _json_type(alternative) == _json_type(type(value)) and _json_type(alternative) in ("object", "array"):
            return problem
    return _wrong(Union[alternatives], value, at)


def _object_problem(row_type: type, value: Any, at: str) -> str | None:
    if not isinstance(value, dict):
        return _wrong(row_type, value, at)
    declared = fields(row_type)
    if unknown := set(value) - _names(row_type):
        known = ", ".join(name for name, *_ in declared)
        return f"field {_join(at, sorted(unknown)[0])!r} is unknown (a {row_type.__name__} has {known})"
    for name, tp, required, _ in declared:
        if name not in value:
            if required:
                return f"field {_join(at, name)!r} is missing"
        elif (problem := _checker(tp)(value[name], _join(at, name))) is not None:
            return problem
    return None


@functools.cache
def _names(row_type: type) -> frozenset[str]:
    return frozenset(name for name, *_ in fields(row_type))


def _is(tp: Any, value: Any) -> bool:
    if tp is float:
        return isinstance(value, (int, float)) and not isinstance(value, bool)
    if tp is int:
        return isinstance(value, int) and not isinstance(value, bool)
    return isinstance(value, tp)


def _join(at: str, key: str) -> str:
    return f"{at}.{key}" if at else str(key)


def _wrong(tp: Any, value: Any, at: str) -> str:
    shown = repr(value) if not isinstance(value, (dict, list)) else type(value).__name__
    return f"field {at or '<row>'!r} is {shown[:60]}, expected {describe(tp)}"


def describe(tp: Any) -> str:
    if typing.get_origin(tp) in (Union, types.UnionType):
        return " or ".join(describe(a) for a in typing.get_args(tp))
    return _json_type(tp) or "anything"


def _json_type(tp: Any) -> str | None:
    if tp in _PRIMITIVES:
        return _PRIMITIVES[tp]
    origin = typing.get_origin(tp)
    if origin is list:
        return "array"
    if origin is dict or dataclasses.is_dataclass(tp) or tp is dict:
        return "object"
    return None


def schema_of(tp: Any) -> dict[str, Any]:
    """The JSON Schema (draft 2020-12) of a field type or row type."""
    if tp is Any:
        return {}
    if tp in _PRIMITIVES:
        return {"type": _PRIMITIVES[tp]}
    origin = typing.get_origin(tp)
    if origin in (Union, types.UnionType):
        parts = [schema_of(a) for a in typing.get_args(tp)]
        if all(set(p) == {"type"} for p in parts):
            return {"type": [p["type"] for p in parts]}
        return {"anyOf": parts}
    if origin is list:
        return {"type": "array", "items": schema_of(typing.get_args(tp)[0])}
    if origin is dict:
        inner = typing.get_args(tp)[1]
        return {"type": "object"} if inner is Any else {"type": "object", "additionalProperties": schema_of(inner)}
    if dataclasses.is_dataclass(tp):
        return _object_schema(tp)
    raise TypeError(f"no JSON Schema for {tp!r}")


def _object_schema(row_type: type) -> dict[str, Any]:
    properties = {}
    for name, tp, _, text in fields(row_type):
        properties[name] = {**({"description": text} if text else {}), **schema_of(tp)}
    return {"title": row_type.__name__, "description": " ".join((row_type.__doc__ or "").split()),
            "type": "object", "properties": properties,
            "required": [name for name, _, required, _ in fields(row_type) if required],
            "additionalProperties": False}
