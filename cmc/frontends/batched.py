"""Repair and review asked for several records in one call (issue 38): the LLM frontends'
follow-up calls, per record (the default, what every committed extraction was made with) or
batched.

`repair: per_record` asks each record a batch left rejected on its own, told why;
`repair: batched` asks all of them in one request in the batch's reply format (its span the
rejected records, each with its rejection reason; with `constrained`, the grammar built for
exactly those records), again for what is still rejected, up to `repair_rounds` times. The
hybrid's `review: batched` asks all dissenters of a rule in one request the same way. A
request of many records is split, in order, into requests of at most `batch_records` records
(the size the extractor's output cap is set for), and each of those in halves until it fits
the extractor's input cap (a request whose evidence the reader would cut reports
`evidence_truncated_tokens`, and the generation service refuses to send it). A request of
records that follow each other is worded exactly as the per-record mode words it (one record:
the very same request), so the two modes share stored answers where they ask the same thing.
"""
from __future__ import annotations

from typing import Any, Callable, Sequence

from cmc.extraction import RecordExtraction
from cmc.frontends import ExtractorCalls
from cmc.records import Record
from common.calls import Request

REPAIR_MODES = ("per_record", "batched")
SWEEP_VERSION = 2  # bump when the sweep asks differently (part of the fingerprint when on)
REVIEW_MODES = ("per_statement", "batched")
Replies = tuple[dict[int, RecordExtraction], dict[int, str]]  # accepted extractions, problems


def span_of(records: Sequence[Record]) -> str:
    """How a request names its records: "record 4", "records 3 to 9" when they follow each
    other (the batch wording), else each one: "records 3, 7 and 12"."""
    positions = [r.pos for r in records]
    if len(positions) == 1:
        return f"record {positions[0]}"
    if positions == list(range(positions[0], positions[0] + len(positions))):
        return f"records {positions[0]} to {positions[-1]}"
    return f"records {', '.join(map(str, positions[:-1]))} and {positions[-1]}"


def learn(catalogue: dict[str, str], batch: Sequence[Record], accepted: dict[int, RecordExtraction]) -> None:
    """Add the batch's new relation names to the catalogue, each with the first statement
    that used it (the alignment call's example)."""
    for record in batch:
        for triple in accepted[record.pos].triples if record.pos in accepted else ():
            catalogue.setdefault(triple.relation, record.text)


class BatchedCalls:
    """The follow-up calls of an LLM frontend (mixed into LLMFrontend, whose `batch_request`,
    `_ask`, `batch_records` and `repair` it uses)."""

    repair: str
    sweep: bool
    batch_records: int
    batch_request: Callable[..., Request]  # (records, catalogue, problems, span) -> the request
    _ask: Callable[..., Replies]  # (calls, records, catalogue, problems, purpose, span) -> its replies

    def repair_decisive(self) -> dict[str, Any]:
        """What batched repair adds to the fingerprint (nothing for per-record repair, whose
        fingerprint stays what it was): the mode and the id of an example two-record repair
        request that names its records apart."""
        if self.repair == "per_record":
            return {}
        records = [Record(1, "The capital of Peru is Lima."), Record(3, "Lima is in Peru.")]
        probe = self.batch_request(records, {"capital": records[0].text},
                                   {1: "example", 3: "example"}, span_of(records))
        return {"repair_mode": self.repair, "repair_probe": probe.id}

    def repair_round(self, calls: ExtractorCalls, batch: Sequence[Record], catalogue: dict[str, str],
                     problems: dict[int, str]) -> Replies:
        """One repair round over a batch's rejected records: what it fixed and what is still
        wrong. Per record: one short call each, so a reply cut by the token cap cannot recur
        and a bad neighbour cannot spoil it; batched: all of them in one call (or chunks)."""
        rejected = sorted((r for r in batch if r.pos in problems), key=lambda r: r.pos)
        if self.repair == "batched":
            return self.ask_records(calls, rejected, catalogue, problems, "repair")
        fixed: dict[int, RecordExtraction] = {}
        still: dict[int, str] = {}
        for record in rejected:
            accepted, retried = self._ask(calls, [record], catalogue, {record.pos: problems[record.pos]}, "repair")
            fixed.update(accepted)
            still.update(retried)
        return fixed, still

    def sweep_unresolved(self, calls: ExtractorCalls, corpus: Sequence[Record], records: list[RecordExtraction],
                         catalogue: dict[str, str], problems: dict[int, str]) -> list[RecordExtraction]:
        """`sweep`: after the whole pass, every statement left unresolved because its answers were
        rejected (`problems`: why, the last time) asked once more on its own, told why. A small
        model that skips a line of a batch renumbers the rest and repeats that on a batched
        repair; alone, a record cannot be misnumbered. A statement the extractor itself called
        unresolved (negation, a pronoun: the prompt's use of the status) gave its answer and is
        not asked again. The pass's requests are unchanged: the sweep only follows it."""
        swept = list(records)
        for i, (record, extraction) in enumerate(zip(corpus, records)):
            if extraction.status != "unresolved" or record.pos not in problems:
                continue
            accepted, _ = self._ask(calls, [record], catalogue, {record.pos: problems[record.pos]}, "sweep")
            if record.pos in accepted:
                swept[i] = accepted[record.pos]
                learn(catalogue, [record], accepted)
        return swept

    def ask_records(self, calls: ExtractorCalls, records: Sequence[Record], catalogue: dict[str, str],
                    problems: dict[int, str], purpose: str) -> Replies:
        """These records asked together, each told its problem, in as few requests as fit:
        every record's accepted extraction, or what is still wrong with it."""
        accepted: dict[int, RecordExtraction] = {}
        rejected: dict[int, str] = {}
        for chunk in self.chunks(records, catalogue, problems):
            told = {r.pos: problems[r.pos] for r in chunk if r.pos in problems}
            fixed, still = self._ask(calls, chunk, catalogue, told, purpose, span_of(chunk))
            accepted.update(fixed)
            rejected.update(still)
        return accepted, rejected

    def chunks(self, records: Sequence[Record], catalogue: dict[str, str],
               problems: dict[int, str]) -> list[list[Record]]:
        """The records in order, at most `batch_records` a request, each request halved until
        the reader cuts none of its evidence (a single record that still does not fit is
        left to the generation service, which refuses it and names it)."""
        todo = [list(records[i:i + self.batch_records]) for i in range(0, len(records), self.batch_records)]
        out: list[list[Record]] = []
        while todo:
            chunk = todo.pop(0)
            told = {r.pos: problems[r.pos] for r in chunk if r.pos in problems}
            if len(chunk) > 1 and self.batch_request(chunk, catalogue, told, span_of(chunk)).evidence_truncated_tokens:
                todo[:0] = [chunk[:len(chunk) // 2], chunk[len(chunk) // 2:]]
            else:
                out.append(chunk)
        return out
