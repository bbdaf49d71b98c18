"""Anchor explicit question entities: graph subjects that occur as whole normalized spans.

The index maps each subject's first token to the span lengths that start with it, so a
question costs one dict probe per (token, candidate length) instead of a scan of all keys.
"""
from __future__ import annotations

from typing import Iterable

from cmc.normalize import entity_key


class AnchorIndex:
    def __init__(self, subjects: Iterable[str]) -> None:
        self._subjects: frozenset[str] = frozenset(s for s in subjects if s)
        lengths: dict[str, set[int]] = {}
        lengths_of = lengths.get
        for subject in self._subjects:
            first = subject.partition(" ")[0]
            length = subject.count(" ") + 1
            known = lengths_of(first)
            if known is None:
                lengths[first] = {length}
            else:
                known.add(length)
        self._lengths = {first: sorted(ls, reverse=True) for first, ls in lengths.items()}

    def matches(self, question: str) -> list[tuple[int, int, str]]:
        """All (start, end, subject) token spans of the question that are graph subjects."""
        tokens = entity_key(question).split(" ")
        found = []
        for start, token in enumerate(tokens):
            for length in self._lengths.get(token, ()):
                end = start + length
                if end <= len(tokens):
                    phrase = " ".join(tokens[start:end])
                    if phrase in self._subjects:
                        found.append((start, end, phrase))
        return found

    def anchors(self, question: str) -> tuple[str, ...]:
        """Matched subjects minus any match contained in a longer match, in question order."""
        return longest_matches(self.matches(question))


def longest_matches(found: list[tuple[int, int, str]]) -> tuple[str, ...]:
    kept: list[tuple[int, int, str]] = []
    for start, end, phrase in sorted(found, key=lambda m: (m[0] - m[1], m[0])):
        if not any(s <= start and end <= e for s, e, _ in kept):
            kept.append((start, end, phrase))
    ordered: list[str] = []
    for _, _, phrase in sorted(kept):
        if phrase not in ordered:
            ordered.append(phrase)
    return tuple(ordered)


def scan_anchors(subjects: Iterable[str], question: str) -> tuple[str, ...]:
    """Reference implementation: test every subject against every question position.

    O(subjects x question); kept as the oracle the index is tested and benchmarked against.
    """
    tokens = entity_key(question).split(" ")
    found = []
    for subject in subjects:
        words = subject.split(" ")
        for start in range(len(tokens) - len(words) + 1):
            if tokens[start:start + len(words)] == words:
                found.append((start, start + len(words), subject))
    return longest_matches(found)
