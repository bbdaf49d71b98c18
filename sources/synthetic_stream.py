"""One history of the synthetic dataset: hop chains, their updates, decoys and filler.

Each question owns a fresh chain anchor -r1-> e1 -r2-> ... -rd-> answer. An updated hop
key is first asserted with `updates_per_key` older values, each a fresh entity with its own
onward decoy path, and last with the chain's entity: the paper's Room A / Room B case, where
the update changes which record the next hop needs. Side facts hang dead-end leaves off
chain entities (they widen a graph read, never reconnect to a chain), and filler facts
about unrelated entities pad the history to its length. Records are then ordered by drawn
times, so the serial order is the version order. The answer, the hop chain and the
evidence set (the current record of every hop) are known by construction, not derived.
"""
from __future__ import annotations

import random
from dataclasses import dataclass, field
from typing import Any, Sequence

from common.errors import DataError
from sources.synthetic_world import Names, Relation, random_walk, relations_by_subject

HEADER = "Here is a list of facts:"
BANDS = {"any": (0.0, 1.0), "early": (0.0, 1 / 3), "middle": (1 / 3, 2 / 3), "late": (2 / 3, 1.0)}


@dataclass
class Fact:
    subject: str
    relation: Relation
    object: str
    time: float
    seq: int  # creation order: the tie-break for equal times
    pos: int = -1  # the serial number, once ordered

    def text(self) -> str:
        return self.relation.sentence(self.subject, self.object)

    def triple(self) -> tuple[str, str, str]:
        return (self.subject, self.relation.grammar_relation, self.object)


@dataclass(frozen=True)
class CellSpec:
    """What one history varies (depth, update rate) and what every history shares."""

    depth: int
    update_rate: float
    questions: int
    history_length: int
    updates_per_key: int
    redirect: bool
    distractor_density: float
    answer_position: str
    anchor_variant_rate: float
    filler_entities: int
    relations: tuple[Relation, ...]

    @property
    def label(self) -> str:
        """'d3u050': depth, then the update rate in percent (digits sort by depth, then rate)."""
        return f"d{self.depth}u{round(self.update_rate * 100):03d}"


@dataclass
class PlannedQuestion:
    text: str
    answer: str
    hops: list[Fact]  # the current record of each hop, in hop order
    updated_hops: list[int]
    anchor: str
    anchor_form: str  # "name" | "alias" | "typo"

    def truth(self) -> dict[str, Any]:
        depth = len(self.hops)
        return {"depth": depth, "chain": [[*f.triple(), f.pos] for f in self.hops], "updated_hops": self.updated_hops,
                "redirected": any(i < depth for i in self.updated_hops), "anchor": self.anchor,
                "anchor_form": self.anchor_form, "answer_pos": self.hops[-1].pos}


@dataclass
class Cell:
    spec: CellSpec
    facts: list[Fact] = field(default_factory=list)
    questions: list[PlannedQuestion] = field(default_factory=list)

    def context(self) -> str:
        return HEADER + "\n" + "".join(f"{f.pos}. {f.text()}\n" for f in self.facts)


class CellBuilder:
    """Builds one Cell from one seeded generator; the call order fixes every draw."""

    def __init__(self, spec: CellSpec, rng: random.Random) -> None:
        self.spec, self.rng, self.names = spec, rng, Names(rng)
        self.out_of = relations_by_subject(spec.relations)
        self.cell = Cell(spec)

    def build(self) -> Cell:
        for _ in range(self.spec.questions):
            self.cell.questions.append(self._question())
        self._filler()
        self.cell.facts.sort(key=lambda f: (f.time, f.seq))
        for pos, fact in enumerate(self.cell.facts):
            fact.pos = pos
        return self.cell

    def _key(self, subject: str, relation: Relation, values: Sequence[str], band: tuple[float, float] | None = None
             ) -> list[Fact]:
        """All versions of one (subject, relation) key, oldest first; `band` places the last."""
        if band is None:
            times = sorted(self.rng.random() for _ in values)
        else:
            last = self.rng.uniform(*band)
            times = sorted(self.rng.uniform(0.0, last) for _ in values[:-1]) + [last]
        facts = [Fact(subject, relation, value, t, len(self.cell.facts) + i) for i, (value, t) in enumerate(zip(values, times))]
        self.cell.facts.extend(facts)
        return facts

    def _versions(self, relation: Relation, current: str, may_update: bool = True) -> list[str]:
        """The key's values in order: `updates_per_key` fresh older values, or none."""
        if may_update and self.rng.random() < self.spec.update_rate:
            return [self.names.make(relation.object_type) for _ in range(self.spec.updates_per_key)] + [current]
        return [current]

    def _question(self) -> PlannedQuestion:
        spec = self.spec
        walk = random_walk(self.rng, spec.relations, spec.depth)
        entities = [self.names.make(walk[0].subject_type)] + [self.names.make(r.object_type) for r in walk]
        hops, updated = [], []
        for i, relation in enumerate(walk, start=1):
            values = self._versions(relation, entities[i], may_update=spec.redirect or i == spec.depth)
            band = BANDS[spec.answer_position] if i == spec.depth else None
            hops.append(self._key(entities[i - 1], relation, values, band)[-1])
            if len(values) > 1:
                updated.append(i)
            for old in values[:-1]:  # Room A: the older value keeps its own onward records
                self._decoy(old, walk[i:])
        for i, entity in enumerate(entities):
            self._side_facts(entity, walk[i - 1].object_type if i else walk[0].subject_type,
                             walk[i] if i < len(walk) else None)
        anchor, form = entities[0], "name"
        if self.rng.random() < spec.anchor_variant_rate:
            anchor, form = self.names.variant(entities[0], walk[0].subject_type)
        phrase = anchor
        for relation in walk:
            phrase = relation.phrase.format(phrase)
        wh = "Who" if walk[-1].object_type == "person" else "What"
        return PlannedQuestion(f"{wh} is {phrase}?", entities[-1], hops, updated, entities[0], form)

    def _decoy(self, start: str, rest: Sequence[Relation]) -> None:
        subject = start
        for relation in rest:
            obj = self.names.make(relation.object_type)
            self._key(subject, relation, [obj])
            subject = obj

    def _side_facts(self, entity: str, kind: str, chain_relation: Relation | None) -> None:
        """Dead-end distractors about a chain entity: about `distractor_density` of them."""
        options = [r for r in self.out_of.get(kind, []) if r is not chain_relation]
        density = self.spec.distractor_density
        count = int(density) + (self.rng.random() < density - int(density))
        for relation in self.rng.sample(options, min(count, len(options))):
            self._key(entity, relation, self._versions(relation, self.names.make(relation.object_type)))

    def _filler(self) -> None:
        """Facts about unrelated entities, until the history holds `history_length` records."""
        spec = self.spec
        left = spec.history_length - len(self.cell.facts)
        if left < 0:
            raise DataError(f"dataset.history_length: {spec.history_length} records cannot hold cell {spec.label}'s "
                            f"{spec.questions} questions, which need {len(self.cell.facts)}; raise it")
        kinds = sorted(self.out_of)
        pool = [(k, self.names.make(k)) for k in (self.rng.choice(kinds) for _ in range(spec.filler_entities))]
        keys = [(name, r) for kind, name in pool for r in self.out_of[kind]]
        self.rng.shuffle(keys)
        for subject, relation in keys:
            if left <= 0:
                return
            targets = [name for kind, name in pool if kind == relation.object_type and name != subject]
            current = self.rng.choice(targets) if targets else self.names.make(relation.object_type)
            values = self._versions(relation, current) if left > spec.updates_per_key else [current]
            self._key(subject, relation, values)
            left -= len(values)
        if left > 0:
            raise DataError(f"dataset.filler_entities: {spec.filler_entities} filler entities have too few keys to pad "
                            f"cell {spec.label} to history_length {spec.history_length}; raise filler_entities")
