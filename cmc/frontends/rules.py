"""Literal matching rules induced from direct extractions (the hybrid frontend, paper
appendix D.1).

A rule is one statement's literal text with its validated subject and object spans replaced
by slots: "The capital of Peru is Lima." read as (Peru, capital, Lima) induces
"The capital of {S} is {O}.". Every direct extraction of one triple induces its statement's
rule, which is then matched against the whole corpus. A rule's evidence is every statement
extracted directly (with facts) that it matches: each agrees when its extraction is exactly
the rule's reading (one triple, the same subject and object) and names the relation the
others name. A rule is kept while all its evidence agrees and there is enough of it;
evidence that disagrees is a conflict, reviewed once, then the rule is rejected if it still
disagrees. Another reading counts against it, so "{S} is located in {O}." is not kept once a
statement it reads as ("Acme", "the city of Paris") was extracted as ("Acme", "Paris"); the
hybrid's checks extract a spread of each kept rule's statements directly to find such forms.
A statement extracted as unresolved or no_fact is no evidence either way.

A statement is covered when exactly one kept rule matches it. Pure functions of the texts
and the extractions, testable without a reader; RULES_VERSION, part of the hybrid's
fingerprint, names exactly the rules here.
"""
from __future__ import annotations

import re
from collections import Counter
from dataclasses import dataclass
from functools import cached_property
from typing import Any, Mapping

from cmc.extraction import RecordExtraction, Triple
from cmc.normalize import entity_key
from cmc.records import History

# Bump when what induces, matches or keeps a rule changes: frozen hybrid extractions made
# under other rules then stop matching the fingerprint instead of being reused.
RULES_VERSION = 1
SUBJECT, OBJECT = "{S}", "{O}"
Spans = tuple[tuple[int, int], tuple[int, int]]  # (subject span, object span)


@dataclass(frozen=True)
class Rule:
    template: str  # literal text with one SUBJECT and one OBJECT slot

    @cached_property
    def _parts(self) -> tuple[str, str, str, bool]:
        first = min(self.template.index(SUBJECT), self.template.index(OBJECT))
        subject_first = self.template[first:first + len(SUBJECT)] == SUBJECT
        second = SUBJECT if not subject_first else OBJECT
        before, rest = self.template[:first], self.template[first + len(SUBJECT):]
        middle, after = rest.split(second)
        return before, middle, after, subject_first

    @cached_property
    def _regex(self) -> re.Pattern[str]:
        before, middle, after, _ = self._parts
        # The first slot ends at the first occurrence of the middle text (lazy), the second
        # takes the rest up to the literal end: one reading per statement.
        return re.compile(f"{re.escape(before)}(.+?){re.escape(middle)}(.+){re.escape(after)}", re.DOTALL)

    def match(self, text: str) -> Spans | None:
        """The subject and object spans this rule reads in the statement, or None when it
        does not match the whole statement or a slot would hold no entity."""
        before, middle, after, subject_first = self._parts
        if not (text.startswith(before) and text.endswith(after) and middle in text):
            return None  # the regex cannot match: skip it
        found = self._regex.fullmatch(text)
        if found is None:
            return None
        for slot in (1, 2):
            fill = found.group(slot)
            if fill != fill.strip() or not entity_key(fill):
                return None
        first, second = found.span(1), found.span(2)
        return (first, second) if subject_first else (second, first)


def rule_of(text: str, triple: Triple) -> Rule | None:
    """The statement's rule read from one validated triple, or None when the spans overlap,
    the text already holds a slot marker, no literal letter is left, or the rule would not
    read this statement's own spans back (an ambiguous form cannot be a rule)."""
    if SUBJECT in text or OBJECT in text:
        return None
    (s0, s1), (o0, o1) = triple.subject_span, triple.object_span
    (a0, a1, a), (b0, b1, b) = sorted([(s0, s1, SUBJECT), (o0, o1, OBJECT)])
    if a1 > b0:
        return None
    rule = Rule(text[:a0] + a + text[a1:b0] + b + text[b1:])
    if not any(c.isalpha() for c in rule.template.replace(SUBJECT, "").replace(OBJECT, "")):
        return None
    return rule if rule.match(text) == (triple.subject_span, triple.object_span) else None


Evidence = dict[int, str | None]  # statement -> the relation it agrees on, None for another reading


class RuleBook:
    """The rules induced over one corpus so far, what each matches, and their verdicts."""

    def __init__(self, corpus: History, min_support: int, checks: int) -> None:
        self.texts = {r.pos: r.text for r in corpus}
        self.min_support, self.checks = min_support, checks
        self.reviewed: set[Rule] = set()
        self.rejected: set[Rule] = set()
        self._matches: dict[Rule, dict[int, Spans]] = {}  # every induced rule over the whole corpus
        self._by_pos: dict[int, list[Rule]] = {}
        self._induced: dict[tuple[int, Triple], Rule | None] = {}

    def evidence(self, direct: Mapping[int, RecordExtraction]) -> dict[Rule, Evidence]:
        """Each induced rule's evidence: the directly extracted statements with facts that
        it matches, each with the relation it agrees on (None where the extraction is not
        exactly the rule's reading: one triple, the same subject and object)."""
        self._induce(direct)
        out: dict[Rule, Evidence] = {}
        for pos, record in direct.items():
            if record.status != "facts":
                continue  # unresolved or no_fact: neither for nor against a form
            text, (first, *more) = self.texts[pos], record.triples
            for rule in self._by_pos.get(pos, ()):
                subject, obj = self._matches[rule][pos]
                # the same subject and object, wherever the direct path found the object (a
                # copy inside the subject comes first there)
                same = not more and (first.subject, first.object) == (text[slice(*subject)], text[slice(*obj)])
                out.setdefault(rule, {})[pos] = first.relation if same else None
        return out

    def conflicts(self, evidence: Mapping[Rule, Evidence]) -> list[Rule]:
        """Rules whose evidence disagrees and that were not reviewed yet."""
        return [rule for rule, seen in evidence.items() if not _agrees(seen) and rule not in self.reviewed]

    def settle(self, evidence: Mapping[Rule, Evidence]) -> None:
        """Reject every rule whose evidence still disagrees: conflicts are reviewed once."""
        self.rejected |= {rule for rule, seen in evidence.items() if not _agrees(seen)}

    def kept(self, evidence: Mapping[Rule, Evidence]) -> dict[Rule, str]:
        """Rule -> relation, for every rule not rejected whose evidence all agrees and
        counts at least `min_support` statements."""
        return {rule: next(iter(seen.values())) for rule, seen in evidence.items()
                if len(seen) >= self.min_support and _agrees(seen) and rule not in self.rejected}

    def due_checks(self, direct: Mapping[int, RecordExtraction]) -> list[int]:
        """Statements to extract directly before the kept rules are trusted: for each,
        `checks` of the statements it matches, spread evenly over them in corpus order
        (a pick already extracted directly counts as checked)."""
        due: dict[int, None] = {}
        for rule in self.kept(self.evidence(direct)):
            matched = sorted(self._matches[rule])
            picks = {matched[(i * len(matched)) // (self.checks + 1)] for i in range(1, self.checks + 1)}
            due.update(dict.fromkeys(sorted(p for p in picks if p not in direct)))
        return list(due)

    def cover(self, direct: Mapping[int, RecordExtraction]) -> dict[int, tuple[Rule, RecordExtraction]]:
        """Every statement not extracted directly that exactly one kept rule matches: that
        rule, and its triple (spans read literally from the statement)."""
        kept = self.kept(self.evidence(direct))
        hits: dict[int, list[Rule]] = {}
        for rule in kept:
            for pos in self._matches[rule]:
                if pos not in direct:
                    hits.setdefault(pos, []).append(rule)
        covered = {}
        for pos, (rule, *others) in sorted(hits.items()):
            if not others:
                text, (subject, obj) = self.texts[pos], self._matches[rule][pos]
                triple = Triple(text[slice(*subject)], kept[rule], text[slice(*obj)], pos, subject, obj)
                covered[pos] = (rule, RecordExtraction(pos, "facts", (triple,)))
        return covered

    def summary(self, direct: Mapping[int, RecordExtraction],
                covered: Mapping[int, tuple[Rule, RecordExtraction]]) -> dict[str, Any]:
        """The rules for the frozen file: kept ones with their relation, support (their
        evidence, all agreeing) and how many statements they cover; rejected ones with how
        their evidence read them (by relation, `null` for another subject or object)."""
        evidence = self.evidence(direct)
        kept = self.kept(evidence)
        covers = Counter(rule for rule, _ in covered.values())
        return {
            "kept": [{"rule": r.template, "relation": kept[r], "support": len(evidence[r]), "covers": covers[r]}
                     for r in sorted(kept, key=lambda r: r.template)],
            "rejected": [{"rule": r.template, "evidence": len(evidence.get(r, {})), "readings": dict(sorted(
                Counter(str(x) if x is not None else "null" for x in evidence.get(r, {}).values()).items()))}
                for r in sorted(self.rejected, key=lambda r: r.template)],
            "candidates": sum(r not in kept and r not in self.rejected for r in evidence),
            "reviewed": len(self.reviewed),
        }

    def _induce(self, direct: Mapping[int, RecordExtraction]) -> None:
        """Each direct extraction of one triple induces its statement's rule; a new rule
        is matched against the whole corpus, once."""
        for pos, record in direct.items():
            if record.status != "facts" or len(record.triples) != 1:
                continue
            key = (pos, record.triples[0])
            if key not in self._induced:
                self._induced[key] = rule = rule_of(self.texts[pos], record.triples[0])
                if rule is not None and rule not in self._matches:
                    self._matches[rule] = {p: spans for p, text in self.texts.items() if (spans := rule.match(text))}
                    for p in self._matches[rule]:
                        self._by_pos.setdefault(p, []).append(rule)


def _agrees(seen: Evidence) -> bool:
    """All of a rule's evidence reads it the same way, with one relation."""
    return None not in seen.values() and len(set(seen.values())) == 1
