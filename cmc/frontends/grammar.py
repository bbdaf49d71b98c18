"""The grammar adapter: hand-specified sentence patterns for the MQuAKE relation surfaces.

Patterns come from MQuAKE's cloze templates. Identical surface forms (P131 and P276 both
read "[X] is located in __") are merged into one relation, and patterns are tried most
specific first (longest literal text), so "The capital of [X] is __" wins over the generic
"The [X] is __". All patterns are compiled into one anchored alternation: Python's regex
engine then tries them in that order in C, which keeps parsing a 262K history fast.
"""
from __future__ import annotations

import hashlib
import json
import re
from dataclasses import dataclass
from pathlib import Path

from cmc.errors import DataError
from cmc.extraction import Extraction, RecordExtraction, Triple, validate
from cmc.records import History

SUBJECT, OBJECT = "[X]", "__"


@dataclass(frozen=True)
class Pattern:
    relation: str  # readable, unique name derived from the surface form
    surface: str
    property_ids: tuple[str, ...]


def relation_name(surface: str) -> str:
    """'The capital of [X] is __' -> 'the_capital_of_is': the surface's own words."""
    return "_".join(re.findall(r"[a-z0-9]+", surface.replace(SUBJECT, " ").replace(OBJECT, " ").lower()))


def load_patterns(path: str | Path) -> tuple[Pattern, ...]:
    """Read MQuAKE cloze templates, merge identical surfaces, order most specific first."""
    try:
        templates = json.loads(Path(path).read_text(encoding="utf-8"))
    except (OSError, json.JSONDecodeError) as exc:
        raise DataError(f"{path}: cannot read cloze templates: {exc}") from exc
    by_surface: dict[str, list[str]] = {}
    for pid, surface in templates.items():
        if surface.count(SUBJECT) != 1 or surface.count(OBJECT) != 1 or surface.index(SUBJECT) > surface.index(OBJECT):
            raise DataError(f"{path}: template {pid} must hold one {SUBJECT} before one {OBJECT}: {surface!r}")
        by_surface.setdefault(surface, []).append(pid)
    patterns = [Pattern(relation_name(s), s, tuple(sorted(p, key=lambda x: int(x[1:])))) for s, p in by_surface.items()]
    names = [p.relation for p in patterns]
    if len(set(names)) != len(names):
        raise DataError(f"{path}: two different surfaces map to one relation name: {sorted(names)}")
    literal = lambda p: len(p.surface.replace(SUBJECT, "").replace(OBJECT, ""))  # noqa: E731
    return tuple(sorted(patterns, key=lambda p: (-literal(p), p.surface)))


def _regex(pattern: Pattern) -> str:
    before, rest = pattern.surface.split(SUBJECT)
    middle, after = rest.split(OBJECT)
    # Lazy subject: the first occurrence of the relation phrase ends it. The object stops
    # before one optional sentence-final period.
    return f"{re.escape(before)}(.+?){re.escape(middle)}(.+?){re.escape(after)}\\.?"


class GrammarFrontend:
    """Deterministic pattern parser; a line no pattern matches is kept as unresolved."""

    def __init__(self, templates: str, name: str = "grammar") -> None:
        self.name = name
        self.patterns = load_patterns(templates)
        self._regex = re.compile("^(?:" + "|".join(f"{_regex(p)}\\Z" for p in self.patterns) + ")", re.DOTALL)
        table = json.dumps([[p.relation, p.surface] for p in self.patterns]).encode()
        self._fingerprint = hashlib.sha256(table).hexdigest()[:12]

    @property
    def frontend_id(self) -> str:
        return f"{self.name}@{self._fingerprint}"

    @property
    def relations(self) -> tuple[str, ...]:
        return tuple(p.relation for p in self.patterns)

    def parse(self, pos: int, text: str) -> RecordExtraction:
        match = self._regex.match(text)
        if match is None:
            return RecordExtraction(pos, "unresolved")
        index = match.lastindex // 2 - 1
        subject_span, object_span = match.span(2 * index + 1), match.span(2 * index + 2)
        triple = Triple(
            text[slice(*subject_span)], self.patterns[index].relation, text[slice(*object_span)],
            pos, subject_span, object_span,
        )
        return RecordExtraction(pos, "facts", (triple,))

    def extract(self, history: History) -> Extraction:
        extraction = Extraction(
            self.frontend_id, history.history_id, tuple(self.parse(r.pos, r.text) for r in history), self.relations
        )
        validate(extraction, history)
        return extraction
