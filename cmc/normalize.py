"""Entity keys: fixed case, possessive and punctuation normalization.

Subjects, objects and questions pass through the same function, so an object value and the
subject it names next always meet on the same key, and anchoring is a whole-token match.
"""
from __future__ import annotations

import functools
import re

_POSSESSIVE = re.compile(r"(\w)['\u2019]s\b")
_NOT_WORD = re.compile(r"[^\w\s]|_")  # punctuation and symbols, any script
_SPACES = re.compile(r"\s+")


@functools.lru_cache(maxsize=1 << 16)
def entity_key(text: str) -> str:
    """Lowercase, drop possessive 's, turn punctuation and symbols into spaces, squeeze."""
    text = _POSSESSIVE.sub(r"\1", text.casefold())
    return _SPACES.sub(" ", _NOT_WORD.sub(" ", text)).strip()


def key_tokens(text: str) -> tuple[str, ...]:
    """The token sequence of a normalized key; anchors are whole runs of these tokens."""
    key = entity_key(text)
    return tuple(key.split(" ")) if key else ()
