"""The grammars the extractor's replies are decoded under when the frontend is `constrained`
(issue 38): one per reply format, built per batch from the batch's records, so a reply the
parser would reject for its shape cannot be decoded, and every subject and object is a
literal span of its own record (whole words; in JSON at most MAX_SPAN_WORDS of them, as an
enum, while the lines grammar spells any run of words with one rule per word). Replies are
still parsed and validated (cmc/frontends/llm_replies.py) as the last check: a grammar cannot
say that an object differs from its subject, or that one slot has one value.

json: a JSON schema (one entry per record, in order, its id fixed). lines: a GBNF grammar (one
block of lines per record, in order, each starting with its number). Bump GRAMMAR_VERSION when
either accepts other replies: it is part of a constrained frontend's fingerprint.

SPAN_ORDERS: `any` lets each slot be any span of the record; `subject_first` (lines only) makes
the object start after the subject ends, so the one rejection `any` leaves to the validator, an
entity given as both subject and object, cannot be decoded either. It assumes the record names
its subject first, as every FactConsolidation form does (the `subject_first` option's
convention); the grammar stays linear in the record's length.
"""
from __future__ import annotations

import json
import re
from typing import Any, Sequence

from cmc.records import Record
from common.calls import Constraint

GRAMMAR_VERSION = 2  # 2: a span keeps a period inside the sentence ("Inc. was"); no forced newline at the end
MAX_SPAN_WORDS = 10  # a subject or object longer than this is not an entity name
MAX_TRIPLES = 4  # per record: a record with more facts than this is better left to a repair
RELATION_PATTERN = "[a-z][a-z0-9_]{0,31}"  # a snake_case slot name, as relation_slug writes it
OTHER_STATUSES = ("unresolved", "no_fact")  # the statuses that come without triples
SPAN_ORDERS = ("any", "subject_first")  # where a triple's object may start: anywhere, or after its subject
_WORD = re.compile(r"\w+\.(?=\w)|\w+")  # "D.C": the period inside an abbreviation stays in it
_PERIOD_AFTER = re.compile(r"\.(?=\s+\S)")  # "Inc." inside a sentence; a sentence's last period is not a name's


def _words(text: str) -> list[tuple[int, int, int]]:
    """(start, end, end with its period) of every word: a span may end either way where a
    period follows inside the sentence ("Apple Inc. was"), as the grammar frontend keeps it;
    a record's final period is the sentence's ("... is Washington, D.C" then ".")."""
    out = []
    for match in _WORD.finditer(text):
        start, end = match.span()
        if not text[start:end].endswith(".") and (m := _PERIOD_AFTER.match(text, end)):
            out.append((start, end, m.end()))
        else:
            out.append((start, end, end))
    return out


def spans(text: str) -> list[str]:
    """Every run of 1 to MAX_SPAN_WORDS consecutive words of the record, with the record's own
    characters between them (no span crosses a '|' or a line break, which the lines format
    reserves)."""
    words = _words(text)
    out: dict[str, None] = {}
    for i, (start, _, _) in enumerate(words):
        for j in range(i, min(i + MAX_SPAN_WORDS, len(words))):
            value = text[start:words[j][1]]
            if "|" in value or "\n" in value:
                break
            out[value] = None
            out[text[start:words[j][2]]] = None
    return list(out)


def json_schema(batch: Sequence[Record], span_order: str = "any") -> Constraint:
    """The json reply's schema for this batch: {"records": [one entry per record, in order]},
    an entry being {"id", "status": "facts", "triples"} or {"id", "status": unresolved | no_fact}.
    Only `any` span order: an enum per slot cannot tie the object's start to the subject's end."""
    if span_order != "any":
        raise ValueError(f"span_order {span_order!r} needs reply_format lines; the json schema orders no spans")
    def entry(record: Record) -> dict[str, Any]:
        span = {"enum": spans(record.text)}
        triple = {"type": "array", "prefixItems": [span, {"type": "string", "pattern": f"^{RELATION_PATTERN}$"}, span],
                  "items": False, "minItems": 3}
        facts = {"id": {"const": record.pos}, "status": {"const": "facts"},
                 "triples": {"type": "array", "items": triple, "minItems": 1, "maxItems": MAX_TRIPLES}}
        other = {"id": {"const": record.pos}, "status": {"enum": list(OTHER_STATUSES)}}
        return {"anyOf": ([_closed(facts)] if span["enum"] else []) + [_closed(other)]}

    records = {"type": "array", "prefixItems": [entry(r) for r in batch], "items": False, "minItems": len(batch)}
    return Constraint.json_schema(_closed({"records": records}))


def _closed(properties: dict[str, Any]) -> dict[str, Any]:
    return {"type": "object", "properties": properties, "required": list(properties), "additionalProperties": False}


def lines_grammar(batch: Sequence[Record], span_order: str = "any") -> Constraint:
    """The lines reply's GBNF for this batch: for each record in order, "N | unresolved",
    "N | no_fact", or 1 to MAX_TRIPLES lines "N | subject | relation | object"; with
    `subject_first`, each object is a span starting after its subject's last word."""
    if span_order not in SPAN_ORDERS:
        raise ValueError(f"span_order must be one of {', '.join(SPAN_ORDERS)}, got {span_order!r}")
    rules = [f"root ::= {' '.join(f'r{r.pos}' for r in batch)}",
             f"status ::= {' | '.join(_literal(s) for s in OTHER_STATUSES)}",
             "relation ::= [a-z] [a-z0-9_]{0,31}"]
    for record in batch:
        head = _literal(f"{record.pos} | ")
        options = ["status"]
        fact = _ordered_fact_rules(record) if span_order == "subject_first" else _any_fact_rules(record)
        if fact:
            options.append(f'f{record.pos} ("\\n" {head} f{record.pos}){{0,{MAX_TRIPLES - 1}}}')
            rules += fact
        end = '"\\n"?' if record is batch[-1] else '"\\n"'  # the last record may end the reply at once
        rules.append(f'r{record.pos} ::= {head} ({" | ".join(options)}) {end}')
    return Constraint("gbnf", "\n".join(rules) + "\n")


def _any_fact_rules(record: Record) -> list[str]:
    """f<pos> ::= span " | " relation " | " span, each span any span of the record (none
    for a record without a word)."""
    if not _WORD.search(record.text):
        return []
    pos, starts = record.pos, " | ".join(_word_name(record, i) for i in range(len(_words(record.text))))
    return [f'f{pos} ::= s{pos} " | " relation " | " s{pos}',
            f"s{pos} ::= {starts}", *_span_rules(record)]


def _ordered_fact_rules(record: Record) -> list[str]:
    """f<pos> ::= subject " | " relation " | " object, the object a span starting after the
    subject's last word: a<pos>-<i> is a subject going on from word i (it ends there, with its
    period if one follows, before the relation and an object from word i+1, or it goes on to
    word i+1); o<pos>-<k> is a span starting at word k or later. Linear in the record's words;
    none for a record of fewer than two words."""
    words = _words(record.text)
    if len(words) < 2:
        return []
    pos, last = record.pos, len(words) - 1
    rules = [f"f{pos} ::= {' | '.join(f'a{pos}-{i}' for i in range(last))}"]
    for i, (start, end, with_period) in enumerate(words[:last]):
        period = f"{_literal(record.text[end:with_period])}? " if with_period > end else ""
        options = [f'{period}" | " relation " | " o{pos}-{i + 1}']
        gap = record.text[end:words[i + 1][0]]
        if i + 1 < last and "|" not in gap and "\n" not in gap:
            options.append(f"{_literal(gap)} a{pos}-{i + 1}" if gap else f"a{pos}-{i + 1}")
        rules.append(f"a{pos}-{i} ::= {_literal(record.text[start:end])} ({' | '.join(options)})")
    rules += [f"o{pos}-{k} ::= {_word_name(record, k)}" + (f" | o{pos}-{k + 1}" if k < last else "")
              for k in range(1, last + 1)]
    return rules + _span_rules(record)[1:]


def _word_name(record: Record, i: int) -> str:
    return f"w{record.pos}-{i}"


def _span_rules(record: Record) -> list[str]:
    """w<pos>-<i> for every word i of the record: a span starting at word i, which is that word, then optionally the record's text up to the next word and a span starting
    there (so the grammar stays linear in the record's length)."""
    words = _words(record.text)
    name = lambda i: _word_name(record, i)  # noqa: E731
    rules = []
    for i, (start, end, with_period) in enumerate(words):
        endings = [_literal(record.text[end:with_period])] if with_period > end else []  # "Inc." ends here
        if i + 1 < len(words):
            gap = record.text[end:words[i + 1][0]]
            if "|" not in gap and "\n" not in gap:
                endings.append(f"{_literal(gap)} {name(i + 1)}" if gap else name(i + 1))
        more = f" ({' | '.join(endings)})?" if endings else ""
        rules.append(f"{name(i)} ::= {_literal(record.text[start:end])}{more}")
    return rules


def _literal(text: str) -> str:
    """A GBNF string literal (JSON's escapes, which GBNF reads)."""
    return json.dumps(text, ensure_ascii=False)
