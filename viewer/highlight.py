"""Where a gold string matches in a text, for highlighting.

The released scorer compares normalized strings (lowercase, no ASCII punctuation, no
articles, squeezed spaces), so a match may span punctuation, case changes and articles, and
a letter inside a dropped article ("t" in "the") is no match. So the text is normalized with
the scorer's own rules while each kept character remembers where it came from; a gold found
in that string maps back to a span of the original. A span is marked exactly when the
scorer's containment test finds that gold.
"""
from __future__ import annotations

from typing import Iterable, NamedTuple

from scoring.metrics import _ARTICLES, _PUNCTUATION, normalize_answer


class Segment(NamedTuple):
    text: str
    marked: bool


def normalized_with_sources(text: str) -> tuple[str, list[int]]:
    """normalize_answer(text) and, per character of it, the index in `text` it came from
    (a squeezed space: the first whitespace it replaces)."""
    kept = [(c, i) for i, ch in enumerate(text) for c in ch.lower() if c not in _PUNCTUATION]
    lowered = "".join(c for c, _ in kept)
    spaced: list[tuple[str, int]] = []
    last = 0
    for match in _ARTICLES.finditer(lowered):
        spaced.extend(kept[last:match.start()])
        spaced.append((" ", kept[match.start()][1]))
        last = match.end()
    spaced.extend(kept[last:])
    out: list[tuple[str, int]] = []
    pending = None
    for c, i in spaced:
        if c.isspace():
            pending = i if out and pending is None else pending
            continue
        if pending is not None:
            out.append((" ", pending))
            pending = None
        out.append((c, i))
    normalized = "".join(c for c, _ in out)
    if normalized != normalize_answer(text):  # the scorer's rules changed: mark nothing rather than mislead
        return normalize_answer(text), []
    return normalized, [i for _, i in out]


def match_spans(text: str, golds: Iterable[str]) -> list[tuple[int, int]]:
    """Sorted, merged (start, end) spans of `text` whose normalized form holds a gold."""
    normalized, sources = normalized_with_sources(text)
    spans = []
    for gold in sorted(set(golds)):
        needle = normalize_answer(gold)
        at = normalized.find(needle) if needle and sources else -1
        while at >= 0:
            spans.append((sources[at], sources[at + len(needle) - 1] + 1))
            at = normalized.find(needle, at + 1)
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
