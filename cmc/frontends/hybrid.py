"""The hybrid frontend (paper appendix D.1): direct LLM extraction of a subset of the
statements, literal matching rules induced from it, the rules applied to every other
statement, direct extraction wherever no rule decides.

It is the direct LLM frontend (cmc/frontends/llm.py) with another loop over the corpus: the
same batch requests, validation, repair, alignment, generation service, journal and frozen
file, in rounds. Each round extracts directly, in batches, first the checks due (a spread of
`checks` statements of each newly kept rule), then the statements no kept rule covers, in
corpus order, `round_batches` batches in all; then

1. every direct extraction of one triple induces its statement's rule, and each rule's
   evidence is every directly extracted statement it matches (cmc/frontends/rules.py);
2. conflict review: the statements of a rule whose evidence disagrees, those apart from the
   majority's reading (all on a tie), are asked again, one record per call (`review:
   per_statement`) or all of a rule's in one call (`review: batched`, cmc/frontends/batched.py),
   told how their form was read; an answer that validates replaces theirs; a rule whose evidence still
   disagrees is rejected for good;
3. the kept rules (at least `min_support` statements of evidence, all agreeing) cover every
   statement exactly one of them matches.

Rounds repeat until nothing is due: every statement is covered or extracted directly, every
kept rule checked. A directly extracted statement keeps what the extractor said (or
`unresolved`, if it never got it right). No question or label is read: rules come from
source statements and their extractions alone. The frozen file records the rules (kept and
rejected, with their evidence), the counts, and the cost.
"""
from __future__ import annotations

from collections import Counter
from typing import Any

from cmc.extraction import Extraction, RecordExtraction
from cmc.frontends import ExtractorCalls
from cmc.frontends.batched import REVIEW_MODES, learn, span_of
from cmc.frontends.llm import LLMFrontend
from cmc.frontends.rules import RULES_VERSION, Rule, RuleBook
from cmc.records import History, Record
from common.configurable import configurable
from common.progress import Progress


def review_problem(readings: Counter[str | None]) -> str:
    """What a conflict review tells the extractor about a record (the repair wording): how
    the records of its form were read, by relation or as other subject and object spans."""
    given = ", ".join(f"{reading or 'another subject or object'} ({n} record{'s' if n > 1 else ''})"
                      for reading, n in sorted(readings.items(), key=lambda item: str(item[0])))
    return (f"records of this same form (other names in the slots) were read differently: {given}; "
            f"copy the subject and object this record states and name its one relation")


def dissenters(evidence: dict[int, str | None]) -> list[int]:
    """The statements a conflict review asks again: those apart from the majority's reading,
    or all of them when no reading has a majority of its own."""
    (top, count), *rest = Counter(evidence.values()).most_common()
    if rest and rest[0][1] == count:
        return sorted(evidence)
    return sorted(pos for pos, reading in evidence.items() if reading != top)


@configurable
class HybridFrontend(LLMFrontend):
    """Direct extraction plus induced literal rules. `min_support` is how many agreeing
    direct extractions keep a rule (one example cannot show that a form is consistent);
    `checks` how many more of a kept rule's statements, spread over the corpus, are
    extracted directly to test it (an over-general rule meets the forms it misreads there);
    `round_batches` how many batches are extracted directly between two inductions; `review`
    asks a rule's dissenters one a call (`per_statement`) or all in one (`batched`). The
    other parameters are the LLM frontend's."""

    def __init__(self, name: str = "hybrid", min_support: int = 2, checks: int = 2, round_batches: int = 1,
                 review: str = "per_statement", **kwargs: Any) -> None:
        if min_support < 1 or checks < 0 or round_batches < 1:
            raise ValueError(f"min_support and round_batches must be >= 1 and checks >= 0, "
                             f"got {min_support}, {round_batches}, {checks}")
        if review not in REVIEW_MODES:
            raise ValueError(f"review must be one of {', '.join(REVIEW_MODES)}, got {review!r}")
        super().__init__(name=name, **kwargs)
        self.min_support, self.checks, self.round_batches, self.review = min_support, checks, round_batches, review

    def decisive(self) -> dict[str, Any]:
        """The LLM frontend's, plus the rule parameters, rule semantics and the id of an
        example conflict-review request (its wording); a batched review adds its mode."""
        example = Record(1, "The capital of Peru is Lima.")
        review = self.batch_request([example], {"capital": example.text},
                                    {1: review_problem(Counter({"capital": 1, "capital_city": 1}))})
        return {**super().decisive(), "min_support": self.min_support, "checks": self.checks,
                "round_batches": self.round_batches, "rules": RULES_VERSION, "review": review.id,
                **(self._batched_review_probe() if self.review == "batched" else {})}

    def _batched_review_probe(self) -> dict[str, Any]:
        """A batched review's mode and the id of an example two-statement review request."""
        records = [Record(1, "The capital of Peru is Lima."), Record(3, "The capital of Chile is Santiago.")]
        problem = review_problem(Counter({"capital": 1, "capital_city": 1}))
        probe = self.batch_request(records, {"capital": records[0].text}, dict.fromkeys((1, 3), problem),
                                   span_of(records))
        return {"review_mode": self.review, "review_probe": probe.id}

    def _extract(self, corpus: History, calls: ExtractorCalls) -> tuple[Extraction, dict[str, Any]]:
        book = RuleBook(corpus, self.min_support, self.checks)
        catalogue: dict[str, str] = {}
        direct: dict[int, RecordExtraction] = {}
        covered: dict[int, tuple[Rule, RecordExtraction]] = {}
        left: dict[int, str] = {}  # directly extracted statement -> why its last answer was rejected
        rounds = 0
        progress = Progress(f"hybrid {corpus.history_id}", len(corpus), done_word="statements settled")
        while due := list(dict.fromkeys([*book.due_checks(direct),
                                         *(r.pos for r in corpus if r.pos not in direct and r.pos not in covered)])):
            rounds += 1
            sent_before = calls.sent
            chunk = [corpus.record(pos) for pos in due[:self.batch_records * self.round_batches]]
            for start in range(0, len(chunk), self.batch_records):
                # in record order, so the request can name them: a round's due checks come first
                batch = sorted(chunk[start:start + self.batch_records], key=lambda record: record.pos)
                accepted, problems = self.extract_batch(calls, batch, catalogue)
                left.update(problems)
                direct.update({r.pos: accepted.get(r.pos, RecordExtraction(r.pos, "unresolved")) for r in batch})
                learn(catalogue, batch, accepted)
            self._review(calls, corpus, book, direct, catalogue)
            covered = book.cover(direct)
            # a rejected rule can give statements back; a round answered from the journal is no rate
            progress.set(len(direct) + len(covered), replayed=calls.sent == sent_before)
        progress.close()
        records = [direct[r.pos] if r.pos in direct else covered[r.pos][1] for r in corpus]
        if self.sweep:
            records = self.sweep_unresolved(calls, corpus.records, records, catalogue,
                                            {pos: why for pos, why in left.items() if pos in direct})
        extraction, alignment = self.finish(corpus, calls, catalogue, records, set(direct))
        summary = {**book.summary(direct, covered), "statements": len(corpus), "rounds": rounds,
                   "extracted_directly": len(direct), "covered_by_rules": len(covered),
                   "unresolved": len(extraction.positions("unresolved"))}
        return extraction, {"alignment": alignment, "hybrid": summary, **self.reading_metadata()}

    def _review(self, calls: ExtractorCalls, corpus: History, book: RuleBook, direct: dict[int, RecordExtraction],
                catalogue: dict[str, str]) -> None:
        """Conflict review, once per rule: its dissenting statements asked again (one a call,
        or all in one call, in chunks that fit); an answer that validates replaces their direct
        extraction. Rules still in conflict are rejected."""
        evidence = book.evidence(direct)
        for rule in book.conflicts(evidence):
            book.reviewed.add(rule)
            problem = review_problem(Counter(evidence[rule].values()))
            if self.review == "batched":
                records = [corpus.record(pos) for pos in dissenters(evidence[rule])]
                fixed, _ = self.ask_records(calls, records, catalogue, dict.fromkeys(evidence[rule], problem), "review")
                direct.update(fixed)
                learn(catalogue, records, fixed)
                continue
            for pos in dissenters(evidence[rule]):
                record = corpus.record(pos)
                fixed, _ = self._ask(calls, [record], catalogue, {pos: problem}, "review")
                direct.update(fixed)
                learn(catalogue, [record], fixed)
        book.settle(book.evidence(direct))
