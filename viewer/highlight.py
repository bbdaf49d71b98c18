"""Where a gold string matches in a text, for highlighting.

The released scorer compares normalized strings (lowercase, no ASCII punctuation, no
articles, squeezed spaces), so a match in the raw text may span punctuation, case changes
and articles. The pattern below matches the gold's normalized tokens in that looser form;
every span it returns normalizes to text that contains the normalized gold.
"""
from __future__ import annotations

import re
import string
from typing import Iterable, NamedTuple

from scoring.metrics import normalize_answer

_P = re.escape(string.punctuation)
_PUNCT = f"[{_P}]*"
# Between two tokens: whitespace (punctuation around it), and any articles, each followed by whitespace.
_GAP = rf"[{_P}]*\s[\s{_P}]*(?:(?:a|an|the)[{_P}]*\s[\s{_P}]*)*"


class Segment(NamedTuple):
    text: str
    marked: bool


def gold_pattern(gold: str) -> re.Pattern[str] | None:
    """A case-insensitive regex for the gold's normalized tokens, letting ASCII punctuation
    sit inside a token, and whitespace (with punctuation or articles) between tokens."""
    tokens = normalize_answer(gold).split()
    if not tokens:
        return None
    words = [_PUNCT.join(re.escape(ch) for ch in token) for token in tokens]
    return re.compile(_GAP.join(words), re.IGNORECASE)


def match_spans(text: str, golds: Iterable[str]) -> list[tuple[int, int]]:
    """Sorted, merged (start, end) spans of `text` where some gold matches."""
    spans = []
    for gold in sorted(set(golds)):
        pattern = gold_pattern(gold)
        if pattern is not None:
            spans.extend(m.span() for m in pattern.finditer(text) if m.end() > m.start())
    merged: list[tuple[int, int]] = []
    for start, end in sorted(spans):
        if merged and start <= merged[-1][1]:
            merged[-1] = (merged[-1][0], max(end, merged[-1][1]))
        else:
            merged.append((start, end))
    return merged


def segments(text: str, golds: Iterable[str] | None) -> list[Segment]:
    """The text cut into unmarked and marked (gold-matching) pieces; concatenated, the
    pieces give back the text. Without golds (no labels) nothing is marked."""
    if not golds:
        return [Segment(text, False)] if text else []
    out, at = [], 0
    for start, end in match_spans(text, golds):
        if start > at:
            out.append(Segment(text[at:start], False))
        out.append(Segment(text[start:end], True))
        at = end
    if at < len(text):
        out.append(Segment(text[at:], False))
    return out
