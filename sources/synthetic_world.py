"""The fictional world of the synthetic stream: typed relations and invented names.

Every relation is written with one of MQuAKE's cloze surfaces, the forms the grammar
frontend parses and FactConsolidation's records use ("[X] is employed by __."), and has a
noun phrase that nests into FactConsolidation-style multi-hop questions ("the spouse of the
chief executive officer of Zorvan Labs"). Names are built from invented syllables, and no
two entities of one history share a word that is not a fixed suffix, so a question names
exactly the entity it was written about and nothing else: anchoring is unambiguous by
construction, and an alias or a typo really does leave the anchor unnamed.
"""
from __future__ import annotations

import random
import re
from dataclasses import dataclass

from cmc.cloze import OBJECT, SUBJECT, relation_name
from common.errors import DataError


@dataclass(frozen=True)
class Relation:
    name: str  # the knob's spelling, e.g. "employer"
    surface: str  # MQuAKE cloze surface: "[X] is employed by __"
    subject_type: str
    object_type: str
    phrase: str  # noun phrase around the subject: "the employer of {}"

    @property
    def grammar_relation(self) -> str:
        """The relation name the grammar frontend gives this surface."""
        return relation_name(self.surface)

    def sentence(self, subject: str, obj: str) -> str:
        return self.surface.replace(SUBJECT, subject).replace(OBJECT, obj) + "."


CATALOGUE: tuple[Relation, ...] = (
    Relation("employer", "[X] is employed by __", "person", "company", "the employer of {}"),
    Relation("spouse", "[X] is married to __", "person", "person", "the spouse of {}"),
    Relation("birthplace", "[X] was born in the city of __", "person", "city", "the birth city of {}"),
    Relation("citizenship", "[X] is a citizen of __", "person", "country", "the country of citizenship of {}"),
    Relation("team", "[X] is a member of __", "person", "team", "the team of {}"),
    Relation("language", "[X] speaks the language of __", "person", "language", "the language spoken by {}"),
    Relation("workplace", "[X] worked in the city of __", "person", "city", "the city where {} worked"),
    Relation("headquarters", "The headquarters of [X] is located in the city of __", "company", "city",
             "the headquarters city of {}"),
    Relation("ceo", "The chief executive officer of [X] is __", "company", "person",
             "the chief executive officer of {}"),
    Relation("founder", "[X] was founded by __", "company", "person", "the founder of {}"),
    Relation("owner", "[X] is owned by __", "company", "company", "the owner of {}"),
    Relation("coach", "The head coach of [X] is __", "team", "person", "the head coach of {}"),
    Relation("home", "[X] is located in __", "team", "city", "the home city of {}"),
    Relation("chairperson", "The chairperson of [X] is __", "team", "person", "the chairperson of {}"),
    Relation("country", "[X] is located in the country of __", "city", "country", "the country of {}"),
    Relation("twin", "The twinned administrative body of [X] is __", "city", "city", "the twin city of {}"),
    Relation("capital", "The capital of [X] is __", "country", "city", "the capital of {}"),
    Relation("head_of_state", "The name of the current head of state in [X] is __", "country", "person",
             "the head of state of {}"),
    Relation("official_language", "The official language of [X] is __", "country", "language",
             "the official language of {}"),
    Relation("continent", "[X] is located in the continent of __", "country", "continent", "the continent of {}"),
)
BY_NAME = {r.name: r for r in CATALOGUE}
SUFFIXES = {"company": ("Labs", "Industries", "Holdings", "Works", "Systems"),
            "team": ("Rovers", "United", "Falcons", "Wanderers")}
# Words of the templates and questions: an invented word must never be one of them.
RESERVED = frozenset(w for r in CATALOGUE for w in re.findall(r"[a-z]+", (r.surface + " " + r.phrase).lower())) | {
    "who", "what", "is", "based", "provided", "knowledge", "pool", "here", "list", "facts", "answer"}
_ONSETS = ("b", "br", "d", "dr", "f", "g", "gr", "k", "kr", "l", "m", "n", "p", "pr", "r", "s", "st", "t", "tr",
           "v", "z", "th", "sh", "h", "j")
_VOWELS = ("a", "e", "i", "o", "u", "a", "e", "o", "ae", "ou")
_CODAS = ("", "", "n", "r", "l", "s", "th", "k", "m", "x")


def relations_by_subject(relations: tuple[Relation, ...]) -> dict[str, list[Relation]]:
    out: dict[str, list[Relation]] = {}
    for relation in relations:
        out.setdefault(relation.subject_type, []).append(relation)
    return out


def chain_lengths(relations: tuple[Relation, ...], longest: int) -> dict[str, int]:
    """Per entity type, the longest typed walk (capped at `longest`) that can start there."""
    out_of = relations_by_subject(relations)
    reach = {t: 0 for r in relations for t in (r.subject_type, r.object_type)}
    for _ in range(longest):
        reach = {t: min(longest, max((1 + reach[r.object_type] for r in out_of.get(t, [])), default=0)) for t in reach}
    return reach


def random_walk(rng: random.Random, relations: tuple[Relation, ...], depth: int) -> list[Relation]:
    """A uniformly chosen feasible typed walk of `depth` relations (the hop chain's shape)."""
    reach = chain_lengths(relations, depth)
    out_of = relations_by_subject(relations)
    starts = sorted(t for t, n in reach.items() if n >= depth and t in out_of)
    if not starts:
        raise DataError(f"dataset.relations: no chain of {depth} hops can be built from {[r.name for r in relations]}")
    kind, walk = rng.choice(starts), []
    for left in range(depth, 0, -1):
        options = [r for r in out_of[kind] if reach[r.object_type] >= left - 1]
        relation = rng.choice(options)
        walk.append(relation)
        kind = relation.object_type
    return walk


class Names:
    """Unique invented names for one history; every invented word is used once."""

    def __init__(self, rng: random.Random) -> None:
        self.rng = rng
        self.used: set[str] = set()

    def word(self) -> str:
        while True:
            syllables = [self.rng.choice(_ONSETS) + self.rng.choice(_VOWELS) for _ in range(self.rng.choice((2, 2, 2, 3)))]
            word = "".join(syllables) + self.rng.choice(_CODAS)
            if len(word) >= 4 and word not in self.used and word not in RESERVED:
                self.used.add(word)
                return word.capitalize()

    def make(self, kind: str) -> str:
        if kind == "person":
            return f"{self.word()} {self.word()}"
        if kind in SUFFIXES:
            return f"{self.word()} {self.rng.choice(SUFFIXES[kind])}"
        return self.word()

    def variant(self, name: str, kind: str) -> tuple[str, str]:
        """The anchor as a question may wrongly write it: a person's surname alone (alias),
        otherwise a typo (two inner letters swapped). Neither is a name in the history."""
        if kind == "person":
            return name.split(" ")[1], "alias"
        word, rest = name.split(" ")[0], name[len(name.split(" ")[0]):]
        for _ in range(20):
            i = self.rng.randrange(1, len(word) - 2)
            typo = word[:i] + word[i + 1] + word[i] + word[i + 2:]
            if typo.lower() not in self.used and typo != word:
                self.used.add(typo.lower())
                return typo + rest, "typo"
        while (typo := word + self.rng.choice(_ONSETS)).lower() in self.used:  # no inner pair to swap
            pass
        self.used.add(typo.lower())
        return typo + rest, "typo"
