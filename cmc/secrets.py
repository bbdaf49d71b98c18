"""Keep credentials off disk: what the harness writes (manifests, request pins, stored
errors) passes through `scrub` first.

A base URL may carry `user:password@`; an API error body may echo the request's headers or
a key. Neither belongs in a bundle that will be shared, so URLs lose their userinfo and
header echoes and key-like tokens are replaced by a marker (the connection itself still
uses the URL as given)."""
from __future__ import annotations

import logging
import re
from typing import Any

from cmc.errors import DataError

REDACTED = "<redacted>"
_USERINFO = re.compile(r"(?i)\b([a-z][a-z0-9+.-]*://)[^/@\s\"']+@")
_HEADER = re.compile(r"(?i)(\b(?:proxy-)?authorization|\bx-api-key|\bapi[-_]key|\bcookie|\bset-cookie)(\"?'?\s*[:=]\s*\"?'?)"
                     r"([^\"'\n,;}]+)")
_KEY_LIKE = re.compile(r"\b(?:sk|pk|rk|hf|gsk|xai)[-_][A-Za-z0-9_-]{8,}|\b(?:Bearer|Basic)\s+[A-Za-z0-9._~+/=-]{8,}")


def scrub(text: str) -> str:
    """The text without URL userinfo, header values that carry credentials, or key-like tokens."""
    text = _USERINFO.sub(lambda m: m.group(1), text)
    text = _HEADER.sub(lambda m: f"{m.group(1)}{m.group(2)}{REDACTED}", text)
    return _KEY_LIKE.sub(REDACTED, text)


def scrub_tree(node: Any) -> Any:
    """`scrub` applied to every string of a JSON-like tree."""
    if isinstance(node, str):
        return scrub(node)
    if isinstance(node, dict):
        return {key: scrub_tree(value) for key, value in node.items()}
    if isinstance(node, list):
        return [scrub_tree(value) for value in node]
    return node


def refuse_secret_overrides(overrides: list[str]) -> None:
    """Refuse a command-line override that carries a credential, before Hydra copies it
    into outputs/**/.hydra/overrides.yaml and multirun.yaml (files the harness cannot
    scrub). Hydra stores an `${oc.env:NAME}` interpolation unresolved, so the credential
    can travel through the environment instead."""
    for override in overrides:
        if scrub(override) != override:
            key = override.split("=", 1)[0] if "=" in override else "an argument"
            raise DataError(
                f"{key}: the override carries a credential (URL userinfo, a key or a header value); Hydra would "
                f"write it to its outputs folder. Put it in an environment variable and pass "
                f"{key}='${{oc.env:NAME}}' instead")


class ScrubbingFilter(logging.Filter):
    """A log handler filter that scrubs each message: libraries log request URLs (httpx
    logs every request at INFO, userinfo included) into Hydra's run.log."""

    def filter(self, record: logging.LogRecord) -> bool:
        message = record.getMessage()
        cleaned = scrub(message)
        if cleaned != message:
            record.msg, record.args = cleaned, ()
        return True


def scrub_log_handlers(logger: logging.Logger | None = None) -> None:
    """Attach one ScrubbingFilter to every handler of `logger` (the root by default)."""
    for handler in (logger or logging.getLogger()).handlers:
        if not any(isinstance(f, ScrubbingFilter) for f in handler.filters):
            handler.addFilter(ScrubbingFilter())
