"""Structured outputs over the OpenAI-compatible API: a request's Constraint as the chat
API's `response_format` (what the `openai` reader sends), and a received `response_format`
as the Constraint the served model decodes under (what readers.serve enforces)."""
from __future__ import annotations

import json
from typing import Any

from common.calls import Constraint
from common.errors import DataError


def response_format(constraint: Constraint) -> dict[str, Any]:
    """A JSON-schema constraint as the chat API's structured output (`response_format`, which
    OpenAI, vLLM, llama.cpp's server and readers.serve enforce); a grammar has no standard field."""
    if constraint.kind != "json_schema":
        raise DataError(f"an OpenAI-compatible server takes a JSON schema constraint only, not {constraint.kind}")
    return {"type": "json_schema", "json_schema": {"name": "reply", "strict": True,
                                                   "schema": json.loads(constraint.grammar)}}


def response_constraint(response_format: Any) -> Constraint | str | None:
    """A request's `response_format` as the constraint the model decodes under (None: free
    text), or what is wrong with it: `json_schema` enforces its schema, `json_object` any
    JSON object."""
    kind = response_format.get("type") if isinstance(response_format, dict) else response_format
    spec = response_format.get("json_schema") if kind == "json_schema" else None
    schema = spec.get("schema") if isinstance(spec, dict) else None
    if kind in (None, "text"):
        return None
    if kind == "json_object":
        return Constraint.json_schema({"type": "object"})
    if kind == "json_schema" and isinstance(schema, dict):
        return Constraint.json_schema(schema)
    return "response_format must be text, json_object, or json_schema with a json_schema.schema object"
