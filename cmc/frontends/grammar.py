"""The grammar adapter: hand-specified sentence patterns for the MQuAKE relation surfaces.

Patterns come from MQuAKE's cloze templates. Identical surface forms (P131 and P276 both
read "[X] is located in __") are merged into one relation, and patterns are tried most
specific first (longest literal text), so "The capital of [X] is __" wins over the generic
"The [X] is __". Before a pattern's regex runs, a literal prefilter checks what that
regex needs (the text before [X] as a prefix, the relation phrase later in the line), so
most lines cost a few C-level string searches and one regex, not dozens.
"""
from __future__ import annotations

import hashlib
import json
import re
from dataclasses import dataclass
from pathlib import Path
from typing import Sequence

from cmc.cloze import OBJECT, SUBJECT, relation_name
from cmc.extraction import Extraction, RecordExtraction, Triple, validate
from cmc.records import History
from common.configurable import configurable
from common.errors import DataError


@dataclass(frozen=True)
class Pattern:
    relation: str  # readable, unique name derived from the surface form
    surface: str
    property_ids: tuple[str, ...]


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


@dataclass(frozen=True)
class _Matcher:
    """One pattern's regex plus the literals any match must contain."""

    before: str
    middle: str
    regex: re.Pattern[str]

    @classmethod
    def of(cls, pattern: Pattern) -> "_Matcher":
        before, rest = pattern.surface.split(SUBJECT)
        middle, after = rest.split(OBJECT)
        # Lazy subject: the first occurrence of the relation phrase ends it. The object
        # stops before one optional sentence-final period.
        body = f"{re.escape(before)}(.+?){re.escape(middle)}(.+?){re.escape(after)}\\.?\\Z"
        return cls(before, middle, re.compile(body, re.DOTALL))

    def match(self, text: str) -> re.Match[str] | None:
        if not text.startswith(self.before) or text.find(self.middle, len(self.before) + 1) < 0:
            return None  # the regex cannot match: skip it
        return self.regex.match(text)


@configurable
class GrammarFrontend:
    """Deterministic pattern parser; a line no pattern matches is kept as unresolved."""

    def __init__(self, templates: str, name: str = "grammar") -> None:
        self.name = name
        self.patterns = load_patterns(templates)
        self._matchers = tuple((_Matcher.of(p), p.relation) for p in self.patterns)
        table = json.dumps([[p.relation, p.surface] for p in self.patterns]).encode()
        self._fingerprint = hashlib.sha256(table).hexdigest()[:12]

    @property
    def frontend_id(self) -> str:
        return f"{self.name}@{self._fingerprint}"

    @property
    def relations(self) -> tuple[str, ...]:
        return tuple(p.relation for p in self.patterns)

    def parse(self, pos: int, text: str) -> RecordExtraction:
        """The first pattern, most specific first, that matches the whole line."""
        for matcher, relation in self._matchers:
            match = matcher.match(text)
            if match is not None:
                triple = Triple(match.group(1), relation, match.group(2), pos, match.span(1), match.span(2))
                return RecordExtraction(pos, "facts", (triple,))
        return RecordExtraction(pos, "unresolved")

    def prepare(self, histories: Sequence[History]) -> None:
        """Patterns parse each line on its own: nothing to see in advance."""

    def extract(self, history: History) -> Extraction:
        extraction = Extraction(
            self.frontend_id, history.history_id, tuple(self.parse(r.pos, r.text) for r in history), self.relations
        )
        validate(extraction, history)
        return extraction
