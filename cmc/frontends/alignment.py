"""Relation alignment of the LLM frontends (paper appendix D.1): the names an extractor coins
batch by batch ("citizen", later "citizenship") must end as one name per slot, or a newer fact
under one name never replaces an older fact under the other.

`align: llm` (the paper's, and every committed extraction's) asks the extractor once, over the
catalogue of names with one source record each. `align: forms` asks nothing: it gives every
triple the name most triples of its literal form carry, the form being the record with the
triple's subject and object spans cut out ("{S} is a citizen of {O}."). It reads only the
source records and the extractor's own spans and names, never a question or an answer; where
no two records share a form (free text) it changes nothing. The 1.5B cannot do the call: over
46 names it repeats one pair until the token cap.
"""
from __future__ import annotations

import dataclasses
import logging
from collections import Counter, defaultdict
from typing import Any, Callable, Sequence

from cmc.extraction import Extraction, RecordExtraction, Triple
from cmc.frontends import ExtractorCalls
from cmc.frontends.llm_replies import one_value_per_slot, parse_alignment
from cmc.frontends.tightening import tighten_by_form
from cmc.records import History
from common.calls import Reader, Request
from common.errors import DataError
from common.prompt import Prompt

log = logging.getLogger(__name__)

ALIGN_MODES = ("llm", "forms")
FORMS_VERSION = 1  # bump when align_by_form renames differently (part of the fingerprint)


def literal_form(text: str, triple: Triple) -> str:
    """The record with the triple's subject and object cut out: what the statement says of
    them, shared by every record written in the same sentence form (spans that overlap cut
    nothing: the record is then a form of its own)."""
    cuts = sorted([(*triple.subject_span, "{S}"), (*triple.object_span, "{O}")])
    if cuts[0][1] > cuts[1][0]:
        return text
    out, at = [], 0
    for start, end, mark in cuts:
        out += [text[at:start], mark]
        at = end
    return "".join(out + [text[at:]])


def align_by_form(corpus: History, records: Sequence[RecordExtraction], order: Sequence[str]
                  ) -> tuple[list[RecordExtraction], dict[str, str]]:
    """Every triple renamed to its form's most common name (a tie goes to the name used first,
    `order`), and, for each form whose triples carried more than one name, the name chosen."""
    rank = {name: i for i, name in enumerate(order)}
    texts = {r.pos: r.text for r in corpus}
    votes: dict[str, Counter[str]] = defaultdict(Counter)
    for record in records:
        for t in record.triples:
            votes[literal_form(texts[record.pos], t)][t.relation] += 1
    chosen = {form: min(names, key=lambda n: (-names[n], rank.get(n, len(rank)))) for form, names in votes.items()}
    renamed = rename(records, lambda pos, t: chosen[literal_form(texts[pos], t)])
    return renamed, {form: chosen[form] for form, names in votes.items() if len(names) > 1}


def rename(records: Sequence[RecordExtraction], name_of: Callable[[int, Triple], str]) -> list[RecordExtraction]:
    """The records with each triple's relation replaced by name_of(record position, triple)."""
    return [dataclasses.replace(r, triples=tuple(dataclasses.replace(t, relation=name_of(r.pos, t))
                                                 for t in r.triples)) for r in records]


class Alignment:
    """The alignment step of an LLM frontend (mixed into LLMFrontend, whose extractor, prompt,
    name and fingerprint it uses)."""

    align: str
    tighten: bool
    tightened: int
    name: str
    extractor: Reader
    align_prompt: Prompt
    frontend_id: str

    def align_decisive(self) -> dict[str, Any]:
        """What form alignment adds to the fingerprint (nothing for the call, whose fingerprint
        stays what it was)."""
        return {"align": self.align, "forms": FORMS_VERSION} if self.align == "forms" else {}

    def finish(self, corpus: History, calls: ExtractorCalls, catalogue: dict[str, str],
               records: Sequence[RecordExtraction], extracted: set[int] | None = None
               ) -> tuple[Extraction, dict[str, str]]:
        """The spans tightened (`tighten`), the names aligned (one call over the catalogue, or by form), and one value per slot
        (a record giving two becomes unresolved): the corpus's Extraction and the alignment,
        which maps old names to new ones after the call, and forms to their chosen names by form."""
        if self.tighten:  # from and on the extractor's own readings (`extracted`; None: all records)
            records, self.tightened = tighten_by_form(corpus, records, only=extracted)
        if self.align == "forms":
            renamed, alignment = align_by_form(corpus, records, list(catalogue))
        else:
            alignment = self._align(calls, catalogue)
            renamed = rename(records, lambda _, t: alignment.get(t.relation, t.relation))
        aligned = [one_value_per_slot(r) for r in renamed]
        split = sum(a.status == "unresolved" and r.status == "facts" for a, r in zip(aligned, records))
        relations = tuple(dict.fromkeys(t.relation for r in aligned for t in r.triples))
        log.info("%s: %d statements, %d relation names, %d after alignment (%s), %d with two values for one slot",
                 corpus.history_id, len(records), len(catalogue), len(relations), self.align, split)
        return Extraction(self.frontend_id, corpus.history_id, tuple(aligned), relations), alignment

    def _align_request(self, catalogue: dict[str, str]) -> Request:
        evidence = "\n".join(f"{i}. {name}: {example}" for i, (name, example) in enumerate(catalogue.items(), 1))
        return self.extractor.prepare(self.align_prompt, evidence, "Give the JSON.")

    def _align(self, calls: ExtractorCalls, catalogue: dict[str, str]) -> dict[str, str]:
        if len(catalogue) < 2:
            return {}
        prediction = calls.answer(self._align_request(catalogue), "the relation alignment", "align")
        if prediction.finish_reason == "length":
            raise DataError(f"{self.name}: the relation alignment of {len(catalogue)} names was cut at the token cap; "
                            f"raise frontend.extractor.max_new_tokens")
        return parse_alignment(prediction.raw or "", list(catalogue))

