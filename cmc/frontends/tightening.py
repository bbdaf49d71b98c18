"""Span tightening by shared sentence form (`tighten: true` on the LLM frontends).

A small extractor often copies a statement's framing words into an entity: "The chairperson of
Fatah is Mahmoud Abbas." read as ("The chairperson of Fatah", ..., "Mahmoud Abbas"), or "the
religion of Islam" as an object. Such a triple's key never meets the question's anchor, and its
literal form ("{S} is {O}.") lumps different relations together, so form alignment then gives
them one name. Where the same extractor read other statements of that sentence form with the
framing outside the spans ("The chairperson of {S} is {O}." from at least `min_support` statements),
and read the statements that form matches that way more often than in the triple's own form,
the triple takes that form's reading instead.

Only ever tightening: the form's subject and object spans must lie inside the triple's own
(the framing words are dropped, no entity is moved or made up), and the most specific form that
reads the statement wins (the most literal text, then the most support). The forms come from
the extractor's own validated triples (`rules.rule_of`, the hybrid's rule induction), never from
the grammar, a question or an answer; the relation name is left for the alignment that follows.
On the hybrid only its direct extractions vote and are tightened: a statement covered by a kept
rule is the rule's reading, and a rule the book did not keep must not come back as a form.
A triple whose own spans make no form (they overlap) has no reading to outvote: any shared form
inside its spans may tighten it.
"""
from __future__ import annotations

import dataclasses
from collections import Counter
from typing import Sequence

from cmc.extraction import RecordExtraction, Triple
from cmc.frontends.rules import OBJECT, SUBJECT, Rule, rule_of
from cmc.records import History

TIGHTEN_VERSION = 1  # bump when tighten_by_form reads differently (part of the fingerprint)


class SharedForms:
    """The literal forms at least `min_support` triples were read in (most specific first),
    which statements each form reads, and which forms each statement's triples were read in."""

    def __init__(self, texts: dict[int, str], records: Sequence[RecordExtraction], min_support: int,
                 only: set[int] | None = None) -> None:
        self.texts = texts
        self.read_in: dict[int, set[Rule]] = {}
        for record in records:
            for t in record.triples if only is None or record.pos in only else ():
                if (rule := rule_of(texts[record.pos], t)) is not None:
                    self.read_in.setdefault(record.pos, set()).add(rule)
        self.support = Counter(rule for rules in self.read_in.values() for rule in rules)
        literal = lambda rule: len(rule.template) - len(SUBJECT) - len(OBJECT)  # noqa: E731
        self.forms = sorted((rule for rule, n in self.support.items() if n >= min_support),
                            key=lambda rule: (-literal(rule), -self.support[rule], rule.template))
        self.reads = {form: {pos: spans for pos, text in texts.items() if (spans := form.match(text)) is not None}
                      for form in self.forms}

    def preferred(self, form: Rule, own: Rule | None) -> bool:
        """Whether the extractor read the statements `form` matches in `form` more often than in
        the triple's own form: "The chairperson of {S} is {O}." wins over "{S} is {O}." where most
        chairperson statements were read without the framing, and "The {S} was created in ..."
        loses where most such titles kept their "The"."""
        own_reads = 0 if own is None else sum(own in self.read_in.get(pos, ()) for pos in self.reads[form])
        return self.support[form] > own_reads


def _inside(inner: tuple[int, int], outer: tuple[int, int]) -> bool:
    return outer[0] <= inner[0] and inner[1] <= outer[1]


def tightened(pos: int, triple: Triple, shared: SharedForms) -> Triple:
    """The triple read by the most specific shared form whose spans lie inside its own, differ
    from them, and which the extractor preferred on such statements; the triple itself when none."""
    text = shared.texts[pos]
    own = rule_of(text, triple)  # the triple's own form, once: each candidate is weighed against it
    for form in shared.forms:
        spans = shared.reads[form].get(pos)
        if spans is None or spans == (triple.subject_span, triple.object_span):
            continue
        subject, obj = spans
        if _inside(subject, triple.subject_span) and _inside(obj, triple.object_span) \
                and shared.preferred(form, own):
            return dataclasses.replace(triple, subject=text[slice(*subject)], object=text[slice(*obj)],
                                       subject_span=subject, object_span=obj)
    return triple


def tighten_by_form(corpus: History, records: Sequence[RecordExtraction], min_support: int = 2,
                    only: set[int] | None = None) -> tuple[list[RecordExtraction], int]:
    """Every triple tightened to the most specific preferred shared form inside its spans, and
    how many triples changed; `only`: the statements whose readings vote and may change (None:
    all). A record whose two triples become one keeps one."""
    shared = SharedForms({r.pos: r.text for r in corpus}, records, min_support, only)
    out, changed = [], 0
    for record in records:
        if only is not None and record.pos not in only:
            out.append(record)
            continue
        triples = [tightened(record.pos, t, shared) for t in record.triples]
        moved = sum(a is not b for a, b in zip(triples, record.triples))
        changed += moved
        out.append(dataclasses.replace(record, triples=tuple(dict.fromkeys(triples))) if moved else record)
    return out, changed
