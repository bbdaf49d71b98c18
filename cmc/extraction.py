"""What a frontend returns: per record one status and its triples with literal spans.

Validation lives here, not in the frontends, so every frontend (grammar, LLM, hybrid) is
held to the same contract before the compiler trusts it.
"""
from __future__ import annotations

from dataclasses import dataclass
from typing import Any, Literal

from cmc.records import History
from common.errors import DataError

Status = Literal["facts", "unresolved", "no_fact"]
STATUSES: tuple[str, ...] = ("facts", "unresolved", "no_fact")


@dataclass(frozen=True, slots=True)
class Triple:
    """A directed assertion with the literal spans it was read from."""

    subject: str
    relation: str
    object: str
    pos: int
    subject_span: tuple[int, int]
    object_span: tuple[int, int]


@dataclass(frozen=True, slots=True)
class RecordExtraction:
    pos: int
    status: Status
    triples: tuple[Triple, ...] = ()


@dataclass(frozen=True)
class Extraction:
    """A frozen frontend output for one history, in source order."""

    frontend_id: str
    history_id: str
    records: tuple[RecordExtraction, ...]
    relations: tuple[str, ...]  # the relation catalogue the triples are aligned to

    def triples(self) -> list[Triple]:
        return [t for r in self.records if r.status == "facts" for t in r.triples]

    def positions(self, status: str) -> list[int]:
        return [r.pos for r in self.records if r.status == status]

    def to_json(self) -> dict[str, Any]:
        """A frozen extraction on disk: the expensive frontends (LLM) are run once and kept."""
        return {
            "frontend_id": self.frontend_id, "history_id": self.history_id, "relations": list(self.relations),
            "records": [{"pos": r.pos, "status": r.status,
                         "triples": [[t.subject, t.relation, t.object, *t.subject_span, *t.object_span]
                                     for t in r.triples]} for r in self.records],
        }

    @classmethod
    def from_json(cls, data: dict[str, Any]) -> "Extraction":
        records = tuple(
            RecordExtraction(r["pos"], r["status"], tuple(
                Triple(s, rel, o, r["pos"], (s0, s1), (o0, o1)) for s, rel, o, s0, s1, o0, o1 in r["triples"]))
            for r in data["records"])
        return cls(data["frontend_id"], data["history_id"], records, tuple(data["relations"]))


def validate(extraction: Extraction, history: History) -> None:
    """Check record identities, statuses, catalogue membership and literal spans."""
    where = f"extraction {extraction.frontend_id!r} of history {history.history_id!r}"
    expected = [r.pos for r in history]
    got = [r.pos for r in extraction.records]
    if got != expected:
        missing = sorted(set(expected) - set(got))[:5]
        extra = sorted(set(got) - set(expected))[:5]
        raise DataError(f"{where}: record ids differ from the history (missing {missing}, unknown {extra})")
    catalogue = set(extraction.relations)
    for rec in extraction.records:
        if rec.status not in STATUSES:
            raise DataError(f"{where}: record {rec.pos} has unknown status {rec.status!r}")
        if (rec.status == "facts") != bool(rec.triples):
            raise DataError(f"{where}: record {rec.pos} status {rec.status!r} disagrees with its triples")
        text = history.record(rec.pos).text
        for t in rec.triples:
            if t.pos != rec.pos:
                raise DataError(f"{where}: triple in record {rec.pos} claims position {t.pos}")
            if t.relation not in catalogue:
                raise DataError(f"{where}: record {rec.pos} relation {t.relation!r} is not in the catalogue")
            for name, value, (start, end) in (("subject", t.subject, t.subject_span), ("object", t.object, t.object_span)):
                if text[start:end] != value or not value:
                    raise DataError(f"{where}: record {rec.pos} {name} {value!r} is not the literal span {start}:{end}")
