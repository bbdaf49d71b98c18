"""Keep credentials off disk: what the harness writes (manifests, request pins, stored
errors) passes through `scrub` first.

A base URL may carry `user:password@`; an API error body may echo the request's headers or
a key. Neither belongs in a bundle that will be shared, so URLs lose their userinfo and
header echoes and key-like tokens are replaced by a marker (the connection itself still
uses the URL as given). A key need not look like one (`Invalid token provided: abc123`), so
the values of the credentials in use are also scrubbed wherever they appear: a reader
registers the key it sends and the password in its URL, and a config registers every
environment variable it reads whose name says it holds a credential."""
from __future__ import annotations

import logging
import os
import re
import threading
from typing import Any, Iterable

from common.errors import DataError

REDACTED = "<redacted>"
# Up to the last `@` of the authority: a password may itself hold an `@` (user:pa@ss@host).
_USERINFO = re.compile(r"(?i)\b([a-z][a-z0-9+.-]*://)[^/\s\"']*@")
_HEADER = re.compile(r"(?i)(\b(?:proxy-)?authorization|\bx-api-key|\bapi[-_]key|\bcookie|\bset-cookie)(\"?'?\s*[:=]\s*\"?'?)"
                     r"([^\"'\n,;}]+)")
_KEY_LIKE = re.compile(r"\b(?:sk|pk|rk|hf|gsk|xai)[-_][A-Za-z0-9_-]{8,}|\b(?:Bearer|Basic)\s+[A-Za-z0-9._~+/=-]{8,}")


# Environment variables a config reads through ${oc.env:NAME}: a credential by its name.
_CREDENTIAL_NAME = re.compile(r"(?i)key|token|secret|passw|pwd|auth|credential|cookie|session")
_ENV_REFERENCE = re.compile(r"\$\{oc\.env:([A-Za-z_][A-Za-z0-9_]*)")
_MIN_SECRET = 8  # shorter values ("EMPTY", a local server's placeholder key) would redact ordinary words
_known: set[str] = set()
_known_lock = threading.Lock()


def register_secret(value: str | None) -> None:
    """Scrub this value, by value, from everything written from now on in this process."""
    if isinstance(value, str) and len(value.strip()) >= _MIN_SECRET:
        with _known_lock:
            _known.add(value.strip())


def register_env_secrets(texts: Iterable[str]) -> None:
    """Register the values of the environment variables these config strings read through
    `${oc.env:NAME}` where NAME says it holds a credential (MY_TOKEN, DB_PASSWORD, ...)."""
    for text in texts:
        for name in _ENV_REFERENCE.findall(text):
            if _CREDENTIAL_NAME.search(name):
                register_secret(os.environ.get(name))


def scrub(text: str) -> str:
    """The text without URL userinfo, header values that carry credentials, key-like tokens,
    or any registered credential value."""
    text = _USERINFO.sub(lambda m: m.group(1), text)
    text = _HEADER.sub(lambda m: f"{m.group(1)}{m.group(2)}{REDACTED}", text)
    text = _KEY_LIKE.sub(REDACTED, text)
    with _known_lock:
        known = sorted(_known, key=len, reverse=True)  # a longer secret first: it may contain a shorter one
    for value in known:
        text = text.replace(value, REDACTED)
    return text


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
