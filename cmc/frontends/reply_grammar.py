"""The grammars the extractor's replies are decoded under when the frontend is `constrained`
(issue 38): one per reply format, built per batch from the batch's records, so a reply the
parser would reject for its shape cannot be decoded, and every subject and object is a
literal span of its own record (whole words; in JSON at most MAX_SPAN_WORDS of them, as an
enum, while the lines grammar spells any run of words with one rule per word). Replies are
still parsed and validated (cmc/frontends/llm_replies.py) as the last check: a grammar of
spans cannot say that one slot has one value, nor (with `any`) that an object differs from its
subject.

json: a JSON schema (one entry per record, in order, its id fixed). lines: a GBNF grammar (one
block of lines per record, in order, each starting with its number). Bump GRAMMAR_VERSION when
either accepts other replies: it is part of a constrained frontend's fingerprint.

OBJECT_POSITIONS (lines only): `any` lets subject and object each be any span of the record, so
one entity given as both still reaches the validator; `after_subject` makes the object start
after the subject ends (the record names its subject first, as every FactConsolidation form
does; linear in the record's words); `apart` lets the object lie before or after the subject
but never share a word with it, so a model that names the later entity first can still be
turned round by `subject_first` (quadratic: each subject's first word bounds an earlier object).
"""
from __future__ import annotations

import json
import re
from typing import Any, Callable, Sequence

from cmc.records import Record
from common.calls import Constraint

GRAMMAR_VERSION = 2  # 2: a span keeps a period inside the sentence ("Inc. was"); no forced newline at the end
MAX_SPAN_WORDS = 10  # a subject or object longer than this is not an entity name
MAX_TRIPLES = 4  # per record: a record with more facts than this is better left to a repair
RELATION_PATTERN = "[a-z][a-z0-9_]{0,31}"  # a snake_case slot name, as relation_slug writes it
OTHER_STATUSES = ("unresolved", "no_fact")  # the statuses that come without triples
OBJECT_POSITIONS = ("any", "after_subject", "apart")  # where a triple's object may lie, relative to its subject
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


def json_schema(batch: Sequence[Record], object_position: str = "any") -> Constraint:
    """The json reply's schema for this batch: {"records": [one entry per record, in order]},
    an entry being {"id", "status": "facts", "triples"} or {"id", "status": unresolved | no_fact}.
    Only `any` object position: an enum per slot cannot tie the object's words to the subject's."""
    if object_position != "any":
        raise ValueError(f"object_position {object_position!r} needs reply_format lines; "
                         "the json schema cannot tie two slots")
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


def lines_grammar(batch: Sequence[Record], object_position: str = "any") -> Constraint:
    """The lines reply's GBNF for this batch: for each record in order, "N | unresolved",
    "N | no_fact", or 1 to MAX_TRIPLES lines "N | subject | relation | object", the object
    where `object_position` lets it lie (OBJECT_POSITIONS)."""
    if object_position not in OBJECT_POSITIONS:
        raise ValueError(f"object_position must be one of {', '.join(OBJECT_POSITIONS)}, got {object_position!r}")
    rules = [f"root ::= {' '.join(f'r{r.pos}' for r in batch)}",
             f"status ::= {' | '.join(_literal(s) for s in OTHER_STATUSES)}",
             "relation ::= [a-z] [a-z0-9_]{0,31}"]
    for record in batch:
        head = _literal(f"{record.pos} | ")
        options = ["status"]
        if fact := _FACT_RULES[object_position](record, _words(record.text)):
            options.append(f'f{record.pos} ("\\n" {head} f{record.pos}){{0,{MAX_TRIPLES - 1}}}')
            rules += fact
        end = '"\\n"?' if record is batch[-1] else '"\\n"'  # the last record may end the reply at once
        rules.append(f'r{record.pos} ::= {head} ({" | ".join(options)}) {end}')
    return Constraint("gbnf", "\n".join(rules) + "\n")


Words = Sequence[tuple[int, int, int]]


def _any_fact(record: Record, words: Words) -> list[str]:
    """f<pos> ::= s<pos> " | " relation " | " s<pos>, s<pos> any span of the record (w<pos>-<i>:
    a span from word i). None for a record without a word."""
    if not words:
        return []
    pos = record.pos
    return [f'f{pos} ::= s{pos} " | " relation " | " s{pos}',
            f"s{pos} ::= {' | '.join(f'w{pos}-{i}' for i in range(len(words)))}",
            *_run_rules(record.text, words, f"w{pos}-", len(words))]


def _after_subject_fact(record: Record, words: Words) -> list[str]:
    """f<pos> ::= a subject, then an object starting after the subject's last word. None for
    a record of fewer than two words."""
    if len(words) < 2:
        return []
    starts, rules = _forward(record, words)
    return [f"f{record.pos} ::= {' | '.join(starts)}", *rules]


def _apart_fact(record: Record, words: Words) -> list[str]:
    """f<pos> ::= a subject, then an object after it or one ending before the subject's first
    word. None for a record of fewer than two words."""
    if len(words) < 2:
        return []
    forward, forward_rules = _forward(record, words)
    backward, backward_rules = _backward(record, words)
    return [f"f{record.pos} ::= {' | '.join(forward + backward)}", *forward_rules, *backward_rules]


def _forward(record: Record, words: Words) -> tuple[list[str], list[str]]:
    """Subjects followed by a later object: a<pos>-<j> is a subject going on from word j, which
    ends there before an object o<pos>-<j+1> (a span from word j+1 or later) or goes on;
    linear in the record's words."""
    pos, last = record.pos, len(words) - 1
    subjects = _run_rules(record.text, words, f"a{pos}-", last, then=lambda j: f"o{pos}-{j + 1}")
    later = [f"o{pos}-{k} ::= w{pos}-{k}" + (f" | o{pos}-{k + 1}" if k < last else "") for k in range(1, last + 1)]
    spans = _run_rules(record.text, words, f"w{pos}-", len(words), first=1)
    return [f"a{pos}-{j}" for j in range(last)], subjects + later + spans


def _backward(record: Record, words: Words) -> tuple[list[str], list[str]]:
    """Subjects followed by an earlier object: c<pos>-<s>-<j> is a subject that started at word
    s and goes on from word j, then an object p<pos>-<s> (a span ending before word s);
    quadratic in the record's words, as each subject's start bounds its object."""
    pos, rules = record.pos, []
    for s in range(1, len(words)):
        rules += _run_rules(record.text, words, f"c{pos}-{s}-", len(words), first=s, then=lambda j, s=s: f"p{pos}-{s}")
        rules.append(f"p{pos}-{s} ::= {' | '.join(f'q{pos}-{s}-{m}' for m in range(s))}")
        rules += _run_rules(record.text, words, f"q{pos}-{s}-", s)
    return [f"c{pos}-{s}-{s}" for s in range(1, len(words))], rules


def _run_rules(text: str, words: Words, prefix: str, stop: int, first: int = 0,
               then: Callable[[int], str] | None = None) -> list[str]:
    """<prefix><i> for i in [first, stop): a run of words starting at word i and ending before
    word `stop`: that word, then the text up to the next word and the run going on there, or
    an end at this word (with its period, if one follows inside the sentence). A span (`then`
    None) may end at any word, so the grammar stays linear in the run's range; a subject ends
    only before the relation and the object rule `then(i)`."""
    rules = []
    for i in range(first, stop):
        start, end, with_period = words[i]
        period = _literal(text[end:with_period]) if with_period > end else ""  # "Inc." may end here
        go_on = []
        if i + 1 < stop and (gap := _gap(text, words, i)) is not None:
            go_on.append(f"{_literal(gap)} {prefix}{i + 1}" if gap else f"{prefix}{i + 1}")
        if then is None:
            endings = [period] * bool(period) + go_on
            rest = f" ({' | '.join(endings)})?" if endings else ""
        else:
            ending = (f"{period}? " if period else "") + f'" | " relation " | " {then(i)}'
            rest = f" ({' | '.join([ending] + go_on)})"
        rules.append(f"{prefix}{i} ::= {_literal(text[start:end])}{rest}")
    return rules


def _gap(text: str, words: Words, i: int) -> str | None:
    """The text between word i and the next, or None where no span may cross it (a '|' or a
    line break, which the lines format reserves)."""
    gap = text[words[i][1]:words[i + 1][0]]
    return None if "|" in gap or "\n" in gap else gap


_FACT_RULES: dict[str, Callable[[Record, Words], list[str]]] = {
    "any": _any_fact, "after_subject": _after_subject_fact, "apart": _apart_fact}


def _literal(text: str) -> str:
    """A GBNF string literal (JSON's escapes, which GBNF reads)."""
    return json.dumps(text, ensure_ascii=False)
