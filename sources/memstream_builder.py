"""MQuAKE-MemStream: ordered memory streams built from MQuAKE-Remastered CF-3k cases.

Appendix F of the paper fixes the construction; this module is its one executable reading so
that anyone holding the released file rebuilds the dataset byte for byte. It is a pure
library in three modules: sources/memstream_cases.py reads and verifies the released
cases, this module pools and audits them into the dataset, sources/memstream_writer.py
writes it; `cmc-harness build-memstream` (harness/build_memstream.py) is their command.

Generator protocol (the only source of randomness, documented in the data card): one
`random.Random(seed)` per build. For each pool in order it (1) shuffles the pool's pre-edit
block, (2) shuffles its post-edit block, then (3) for each case in released order draws
`rng.choice` over the case's `new_single_hops` list (the sampled single-hop question).
Before shuffling, each block lists cases in released order and, within a case, its hops in
released order followed by its requested rewrites in released order.
"""
from __future__ import annotations

import random
from dataclasses import dataclass
from typing import Any, Iterable, Protocol, Sequence

from cmc.extraction import RecordExtraction
from cmc.normalize import entity_key
from cmc.records import refuse_line_breaks
from common.errors import DataError
from sources.memstream_cases import Case

PROTOCOL = "mquake-memstream/1"
HEADER = "Here is a list of facts:"
NAME = "mquake_memstream"
DEFAULTS = {"cases": 800, "pool_size": 100, "seed": 20260907, "hops": 2}


# --- pools: blocks, shuffles, serial numbers --------------------------------------------------

@dataclass(frozen=True)
class Assertion:
    """One stream line and where it came from, so audits can name the overwriting record."""

    text: str
    case_id: int
    block: str  # "pre" | "post"
    origin: str  # "hop" | "rewrite"
    index: int  # position in the case's hop or rewrite list

    def __post_init__(self) -> None:
        refuse_line_breaks(self.text, f"case {self.case_id} {self.block} {self.origin} {self.index}")

    def describe(self, pos: int) -> dict[str, Any]:
        return {"pos": pos, "text": self.text, "case_id": self.case_id, "block": self.block,
                "origin": self.origin, "index": self.index}


def pre_block(case: Case) -> list[Assertion]:
    """Released pre-edit facts: hops then rewrites with the old target. This unshuffled order
    is part of the protocol, since the shuffle permutes positions."""
    hops = [Assertion(h.assertion(), case.case_id, "pre", "hop", i) for i, h in enumerate(case.single_hops)]
    return hops + [Assertion(r.assertion(r.target_true), case.case_id, "pre", "rewrite", i) for i, r in enumerate(case.rewrites)]


def post_block(case: Case) -> list[Assertion]:
    """Released post-edit facts: new hops then rewrites with the new target (duplicates kept)."""
    hops = [Assertion(h.assertion(), case.case_id, "post", "hop", i) for i, h in enumerate(case.new_single_hops)]
    return hops + [Assertion(r.assertion(r.target_new), case.case_id, "post", "rewrite", i) for i, r in enumerate(case.rewrites)]


@dataclass(frozen=True)
class Pool:
    index: int
    cases: tuple[Case, ...]
    records: tuple[Assertion, ...]  # the serial number of a record is its position here
    sampled: tuple[int, ...]  # per case, the index of its sampled new_single_hops question

    def context(self) -> str:
        return HEADER + "\n" + "".join(f"{pos}. {a.text}\n" for pos, a in enumerate(self.records))


def make_pools(cases: Sequence[Case], pool_size: int, rng: random.Random) -> list[Pool]:
    """Consecutive pools in released order; the generator protocol of the module docstring."""
    if pool_size < 1:
        raise DataError(f"pool size must be positive, got {pool_size}")
    pools = []
    for index, start in enumerate(range(0, len(cases), pool_size)):
        members = tuple(cases[start:start + pool_size])
        pre = [a for case in members for a in pre_block(case)]
        post = [a for case in members for a in post_block(case)]
        rng.shuffle(pre)
        rng.shuffle(post)
        sampled = tuple(rng.choice(range(len(case.new_single_hops))) for case in members)
        pools.append(Pool(index, members, tuple(pre + post), sampled))
    return pools


# --- the pool-consistency audit -----------------------------------------------------------------

@dataclass(frozen=True)
class AlteredHop:
    """A released post-edit hop whose key ends the pooled stream with a different value."""

    pool: int
    case_id: int
    hop_index: int
    subject: str
    relation: str
    expected: str
    found: str
    overwriting: dict[str, Any]

    @property
    def reason(self) -> str:
        same = self.overwriting["case_id"] == self.case_id
        return "overwritten_within_case" if same else "overwritten_by_other_case"


class RecordParser(Protocol):
    """What the audit needs of a frontend: one record's parse. The relation grammar
    (cmc.frontends.grammar.GrammarFrontend) is passed in by the caller, so a dataset
    adapter does not import a frontend (tests/test_layers.py)."""

    def parse(self, pos: int, text: str) -> RecordExtraction: ...


def audit_pool(pool: Pool, frontend: RecordParser) -> list[AlteredHop]:
    """Parse every record (all must be grammar facts), let the last assertion of each
    (subject, relation) key win, and compare each post-edit hop's released answer with it."""
    parsed = [frontend.parse(pos, a.text) for pos, a in enumerate(pool.records)]
    failed = [(pos, pool.records[pos]) for pos, r in enumerate(parsed) if r.status != "facts" or len(r.triples) != 1]
    if failed:
        shown = "; ".join(f"case {a.case_id} {a.block}: {a.text!r}" for _, a in failed[:5])
        raise DataError(f"pool {pool.index}: {len(failed)} assertion(s) not parsed by the relation grammar: {shown}")
    final: dict[tuple[str, str], int] = {}
    for pos, record in enumerate(parsed):
        triple = record.triples[0]
        final[(entity_key(triple.subject), triple.relation)] = pos
    hops = {case.case_id: case.new_single_hops for case in pool.cases}
    altered = []
    for pos, assertion in enumerate(pool.records):
        if assertion.block != "post" or assertion.origin != "hop":
            continue
        triple = parsed[pos].triples[0]
        winner = final[(entity_key(triple.subject), triple.relation)]
        expected, found = hops[assertion.case_id][assertion.index].answer, parsed[winner].triples[0].object
        if entity_key(found) != entity_key(expected):
            altered.append(AlteredHop(pool.index, assertion.case_id, assertion.index, triple.subject, triple.relation,
                                      expected, found, pool.records[winner].describe(winner)))
    order = {case.case_id: i for i, case in enumerate(pool.cases)}
    return sorted(altered, key=lambda a: (order[a.case_id], a.hop_index))


def count_assertions(pools: Iterable[Pool]) -> int:
    """The paper's assertion count (5,560 for the 800-case build): every stream record."""
    return sum(len(p.records) for p in pools)


# --- the dataset ---------------------------------------------------------------------------------

@dataclass(frozen=True)
class MemStream:
    """The named dataset: its pools and the audit's verdicts, from which rows are derived."""

    pools: tuple[Pool, ...]
    altered: tuple[AlteredHop, ...]
    seed: int
    pool_size: int

    @property
    def excluded_cases(self) -> frozenset[int]:
        return frozenset(a.case_id for a in self.altered)

    def rows(self) -> list[dict[str, Any]]:
        """FactConsolidation rows: an sh and an mh row per pool sharing one context. An mh
        row whose every question was excluded is dropped rather than written empty."""
        rows = []
        for pool in self.pools:
            context = pool.context()
            sh = [(case, case.new_single_hops[k]) for case, k in zip(pool.cases, pool.sampled)]
            rows.append(_row(context, f"{NAME}_sh_pool{pool.index}",
                             [(c.case_id, h.question, [h.answer, *h.aliases]) for c, h in sh]))
            mh = [(c.case_id, c.question, [c.new_answer, *c.new_answer_alias])
                  for c in pool.cases if c.case_id not in self.excluded_cases]
            if mh:
                rows.append(_row(context, f"{NAME}_mh_pool{pool.index}", mh))
        return rows

    def exclusions(self) -> list[dict[str, Any]]:
        cases = {c.case_id: (p.index, c) for p in self.pools for c in p.cases}
        out = []
        for a in self.altered:
            pool, case = cases[a.case_id]
            out.append({
                "pool": pool, "case_id": a.case_id, "qa_pair_id": f"{NAME}_mh_pool{pool}_case{a.case_id}",
                "question": case.question, "hop_index": a.hop_index,
                "hop_question": case.new_single_hops[a.hop_index].question,
                "key": {"subject": a.subject, "relation": a.relation, "subject_key": entity_key(a.subject)},
                "expected": a.expected, "found": a.found, "overwriting_record": a.overwriting, "reason": a.reason,
            })
        return out

    def counts(self) -> dict[str, int]:
        n_cases = sum(len(p.cases) for p in self.pools)
        sampled = {(c.case_id, k) for p in self.pools for c, k in zip(p.cases, p.sampled)}
        return {
            "cases": n_cases, "pools": len(self.pools), "assertions": count_assertions(self.pools),
            "pre_edit_assertions": sum(a.block == "pre" for p in self.pools for a in p.records),
            "sh_questions": n_cases, "mh_candidates": n_cases,
            "mh_questions": n_cases - len(self.excluded_cases), "exclusions": len(self.excluded_cases),
            "altered_hops": len(self.altered),
            # kept by the paper's rule (only mh questions are excluded); reported for transparency
            "sh_questions_on_altered_hop": sum((a.case_id, a.hop_index) in sampled for a in self.altered),
        }


def _row(context: str, source: str, items: list[tuple[int, str, list[str]]]) -> dict[str, Any]:
    return {"context": context, "questions": [q for _, q, _ in items], "answers": [a for _, _, a in items],
            "metadata": {"source": source, "qa_pair_ids": [f"{source}_case{cid}" for cid, _, _ in items]}}


def build(cases: Sequence[Case], frontend: RecordParser, n_cases: int = DEFAULTS["cases"],
          pool_size: int = DEFAULTS["pool_size"], seed: int = DEFAULTS["seed"],
          hops: int | None = DEFAULTS["hops"]) -> MemStream:
    """The named dataset: the first n_cases in released order (all `hops`-hop), pooled."""
    if n_cases < 1 or n_cases > len(cases):
        raise DataError(f"asked for the first {n_cases} cases but the file holds {len(cases)}")
    chosen = tuple(cases[:n_cases])
    if hops is not None:
        wrong = [c.case_id for c in chosen if len(c.new_single_hops) != hops]
        if wrong:
            raise DataError(f"{len(wrong)} of the first {n_cases} cases are not {hops}-hop (case ids {wrong[:10]})")
    pools = make_pools(chosen, pool_size, random.Random(seed))
    altered = tuple(a for pool in pools for a in audit_pool(pool, frontend))
    return MemStream(tuple(pools), altered, seed, pool_size)


def sensitivity(cases: Sequence[Case], frontend: RecordParser, seed: int = DEFAULTS["seed"],
                pool_size: int = DEFAULTS["pool_size"]) -> dict[str, Any]:
    """Every case in the file built the same way, in two readings of the paper's "larger
    pool": pools of `pool_size` over all cases (reported) and one pool of all cases."""
    def run(size: int) -> dict[str, Any]:
        pools = make_pools(cases, size, random.Random(seed))
        altered = [a for pool in pools for a in audit_pool(pool, frontend)]
        ids = sorted({a.case_id for a in altered})
        return {"pool_size": size, "pools": len(pools), "assertions": count_assertions(pools),
                "altered_cases": len(ids), "altered_hops": len(altered), "altered_case_ids": ids}

    return {"protocol": PROTOCOL, "seed": seed, "cases": len(cases), "reported": "pooled",
            "pooled": run(pool_size), "single_pool": run(len(cases))}
