"""Reading the extractor's replies (paper appendix D.1): a batch reply into validated
per-record extractions (each triple's subject and object copied literally from its record),
an alignment reply into final relation names, and one value per (subject, relation) slot.

Separate from cmc/frontends/llm.py, which asks the questions (requests, batching, repair,
freezing): these are pure functions of the reply text, testable without a reader, and
PARSER_VERSION, part of the frontend's fingerprint, names exactly the rules here.
"""
from __future__ import annotations

import dataclasses
import json
import logging
import re
from dataclasses import dataclass
from typing import Any, Callable, Sequence

from cmc.extraction import STATUSES, RecordExtraction, Triple
from cmc.frontends.reply_grammar import OBJECT_POSITIONS, json_schema, lines_grammar
from cmc.normalize import entity_key
from cmc.records import Record
from common.calls import Constraint

log = logging.getLogger(__name__)

# Bump when parse_reply or parse_alignment accept different replies: frozen extractions
# made under other rules then stop matching the fingerprint instead of being reused.
PARSER_VERSION = 2
_DECODER = json.JSONDecoder()


def relation_slug(name: str) -> str:
    """One spelling per relation name: 'Born In' and 'born-in' are both 'born_in'."""
    return "_".join(re.findall(r"[a-z0-9]+", name.lower()))


def literal_span(text: str, value: str, avoid: tuple[int, int] | None = None) -> tuple[int, int] | None:
    """Where `value` occurs in the record as whole words ("Ford" is not in "Stanford"):
    exactly if it does, else ignoring case (the triple then keeps the record's own
    characters). An occurrence other than `avoid`, the subject's span, comes first, so an
    object equal to its subject needs a second mention."""
    value = value.strip()
    if not value:
        return None
    pattern = "".join([r"(?<!\w)" if value[0].isalnum() else "", re.escape(value),
                       r"(?!\w)" if value[-1].isalnum() else ""])
    spans = [m.span() for flags in (0, re.IGNORECASE) for m in re.finditer(pattern, text, flags)]
    return next((s for s in spans if s != avoid), None)


def _json_object(raw: str, key: str, bare_list: bool = False) -> Any:
    """The value under `key` of the first JSON object in the reply that has it, or with
    `bare_list` a top-level JSON list standing for it (small models drop the wrapper): code
    fences and chatter around it, braces included, drop. Nothing inside another JSON value
    counts."""
    start = 0
    while (start := _next_opening(raw, start, "{[" if bare_list else "{")) >= 0:
        try:
            value, end = _DECODER.raw_decode(raw, start)
        except ValueError:
            start += 1
            continue
        if isinstance(value, dict) and key in value:
            return value[key]
        if bare_list and isinstance(value, list):
            return value
        start = end
    raise ValueError(f"no JSON object with {key!r} in the reply")


def _next_opening(raw: str, start: int, openers: str) -> int:
    return min((i for i in (raw.find(c, start) for c in openers) if i >= 0), default=-1)


def _read_entry(pos: int, text: str, entry: dict[str, Any]) -> RecordExtraction | str:
    """One record's entry as a RecordExtraction, or what is wrong with it."""
    status, triples = entry.get("status"), entry.get("triples") or []
    if status not in STATUSES:
        return f"status {status!r} is not one of {', '.join(STATUSES)}"
    if status != "facts":
        return RecordExtraction(pos, status) if not triples else f"status {status!r} came with triples"
    if not isinstance(triples, list) or not triples:
        return "status 'facts' needs a list of triples"
    out: list[Triple] = []
    for item in triples:
        if not (isinstance(item, list) and len(item) == 3 and all(isinstance(x, str) for x in item)):
            return f"triple {item!r} is not [subject, relation, object] of strings"
        subject, relation, obj = item
        if not relation_slug(relation):
            return f"relation {relation!r} has no letters or digits"
        if not (entity_key(subject) and entity_key(obj)):
            return f"triple {item!r} names an entity with no letters or digits"
        subject_span = literal_span(text, subject)
        if subject_span is None:
            return f"subject {subject!r} is not copied from the record text"
        object_span = literal_span(text, obj, avoid=subject_span)
        if object_span is None:
            return f"object {obj!r} is not copied from the record text"
        out.append(Triple(text[slice(*subject_span)], relation_slug(relation), text[slice(*object_span)], pos,
                          subject_span, object_span))
    return RecordExtraction(pos, "facts", tuple(dict.fromkeys(out)))


def parse_reply(raw: str, batch: Sequence[Record]) -> tuple[dict[int, RecordExtraction], dict[int, str]]:
    """The batch's records the reply gets right, and for every other record what was wrong
    (a repair call quotes it back). Entries for records outside the batch are ignored."""
    texts = {r.pos: r.text for r in batch}
    try:
        entries = _json_object(raw, "records", bare_list=True)
        if not isinstance(entries, list):
            raise ValueError("'records' is not a list")
    except (ValueError, KeyError, TypeError) as exc:
        return {}, dict.fromkeys(texts, f"the reply is not a JSON object with a 'records' list ({exc})")
    results: dict[int, RecordExtraction | str] = {}
    for entry in entries:
        pos = entry.get("id") if isinstance(entry, dict) else None
        if type(pos) is not int or pos not in texts:
            continue
        results[pos] = "the record was answered twice" if pos in results else _read_entry(pos, texts[pos], entry)
    return _split(results, texts)


def _split(results: dict[int, RecordExtraction | str], texts: dict[int, str]
           ) -> tuple[dict[int, RecordExtraction], dict[int, str]]:
    """Each answered record's extraction or problem, as the accepted ones and the problems,
    every record of the batch left unanswered among the problems."""
    accepted = {pos: r for pos, r in results.items() if not isinstance(r, str)}
    problems = {pos: r for pos, r in results.items() if isinstance(r, str)}
    problems.update({pos: "the record was not answered" for pos in texts if pos not in results})
    return accepted, problems


# The compact reply (reply_format: lines): "3 | Peru | capital | Lima", "4 | unresolved". Bump
# when parse_lines_reply accepts different replies (part of a lines frontend's fingerprint).
LINES_PARSER_VERSION = 1
_LINE = re.compile(r"^\s*(?:[-*]\s*)?(\d+)\s*[|.):]\s*(.*?)\s*$")


def _entry_of_lines(rows: list[list[str]]) -> dict[str, Any] | str:
    """One record's lines as the JSON format's entry, or what is wrong with them: a status
    line alone, or one fact line (subject | relation | object) per triple."""
    rows = [list(r) for r in dict.fromkeys(tuple(r) for r in rows)]  # a repeated line counts once
    statuses = [r[0] for r in rows if len(r) == 1 and r[0] in STATUSES]
    if statuses:
        return {"status": statuses[0]} if len(rows) == 1 else "a status line came with other lines for the record"
    if bad := next((r for r in rows if len(r) != 3), None):
        return f"line {' | '.join(bad)!r} is neither 'subject | relation | object' nor a status"
    return {"status": "facts", "triples": rows}


def parse_lines_reply(raw: str, batch: Sequence[Record]) -> tuple[dict[int, RecordExtraction], dict[int, str]]:
    """parse_reply for the compact format: lines starting with a record's number (chatter and
    lines for other records are ignored), validated by the same rules as a JSON entry."""
    texts = {r.pos: r.text for r in batch}
    rows: dict[int, list[list[str]]] = {}
    for line in raw.splitlines():
        if (match := _LINE.match(line)) and int(match[1]) in texts:
            fields = [field.strip() for field in match[2].split("|")]
            while len(fields) > 1 and not fields[-1]:  # "4 | unresolved |"
                fields.pop()
            rows.setdefault(int(match[1]), []).append(fields)
    entries = {pos: _entry_of_lines(lines) for pos, lines in rows.items()}
    return _split({pos: e if isinstance(e, str) else _read_entry(pos, texts[pos], e) for pos, e in entries.items()},
                  texts)


# How the extractor answers a batch, and the prompt asking for it: a JSON object (the
# default), or one compact line per record ("3 | Peru | capital | Lima"), which a small model
# carries to the last record of a batch (the 1.5B closes its JSON after two or three).
@dataclass(frozen=True)
class ReplyFormat:
    prompt: str        # common/prompts/<prompt>.json
    ask: str           # the request's last line, before the records' span
    parse: Callable[[str, Sequence[Record]], tuple[dict[int, RecordExtraction], dict[int, str]]]
    grammar: Callable[[Sequence[Record], str], Constraint]  # a batch's reply grammar (`constrained`), by object position
    object_positions: tuple[str, ...]  # the object positions its grammar can enforce (reply_grammar.OBJECT_POSITIONS)


REPLY_FORMATS = {"json": ReplyFormat("extract_direct", "Give the JSON for", parse_reply, json_schema, ("any",)),
                 "lines": ReplyFormat("extract_lines", "Write the lines for", parse_lines_reply, lines_grammar,
                                      OBJECT_POSITIONS)}


def parse_alignment(raw: str, names: Sequence[str]) -> dict[str, str]:
    """Each aligned name's final name. A proposal stands only if both names are in the
    catalogue and it maps a name to an earlier one (the paper maps to existing catalogue
    names); chains resolve to their earliest name. A reply that is not the asked JSON aligns
    nothing: the names stay apart, which costs recall, never a wrong merge."""
    order = {name: i for i, name in enumerate(names)}
    try:
        proposals = _json_object(raw, "same")
        if not isinstance(proposals, dict):
            raise ValueError("'same' is not an object")
    except (ValueError, KeyError, TypeError) as exc:
        log.warning("relation alignment reply is not the asked JSON (%s); no names are merged", exc)
        return {}
    step = {relation_slug(k): relation_slug(v) for k, v in proposals.items() if isinstance(v, str)}
    step = {k: v for k, v in step.items() if k in order and v in order and order[v] < order[k]}
    if dropped := len(proposals) - len(step):
        log.info("relation alignment: %d proposals kept, %d dropped (unknown names or not to an earlier name)",
                 len(step), dropped)
    final = {}
    for name in step:
        root = name
        while root in step:  # every step goes to an earlier name, so this ends
            root = step[root]
        final[name] = root
    return final


def one_value_per_slot(record: RecordExtraction) -> RecordExtraction:
    """Duplicate triples merged; a record that gives one subject two objects under one
    relation (as read, or once alignment merged two names) is unresolved, as the prompt
    asks: replaying it would let an arbitrary one of the values win."""
    triples = tuple(dict.fromkeys(record.triples))
    objects: dict[tuple[str, str], set[str]] = {}
    for t in triples:
        objects.setdefault((entity_key(t.subject), t.relation), set()).add(entity_key(t.object))
    if any(len(values) > 1 for values in objects.values()):
        return RecordExtraction(record.pos, "unresolved")
    return dataclasses.replace(record, triples=triples)



def subject_named_first(record: RecordExtraction) -> tuple[RecordExtraction, int]:
    """The record with every triple's subject and object in the order the record names them
    (`subject_first`: the prompt's convention, that the subject is the entity named first,
    enforced on the reply), and how many triples that turned round."""
    turned = [dataclasses.replace(t, subject=t.object, object=t.subject, subject_span=t.object_span,
                                  object_span=t.subject_span) if t.object_span[1] <= t.subject_span[0] else t
              for t in record.triples]  # only spans apart: an object inside its subject stays as read
    count = sum(a is not b for a, b in zip(turned, record.triples))
    return (dataclasses.replace(record, triples=tuple(dict.fromkeys(turned))) if count else record), count
