"""The label screen of appendix B.3 and its least-favourable rescoring bound.

The screen looks for reference answers that may be superseded: a gold string that the
history once held as the value of a key the question reaches, but that is no longer any
current value the read selects. Such labels need manual adjudication; the screen only
flags them, and every item stays in the official scores.

Two steps, so labels open only after the evidence exists:

1. ``screen_evidence`` (label-free): for each question, CMC's selection (the arm's
   traversal of the current graph from the question's anchors) and, per selected key,
   its current value and its earlier values.
2. ``screen`` (opens nothing itself; it is handed the labels): compares gold strings with
   those values and flags.

Definitions (what "found as earlier values ... but absent from its selected current
values" means here):

- Selected keys K(q): the (subject, relation) keys of every edge CMC's traversal selects
  for question q (CMC's closure, ``cmc.traverse.traverse``: anchors, then up to ``max_hops``
  subject depths over the current graph). An empty selection (no anchor) gives K(q) = {} and no flag.
- Values are the objects' *surface text* as written in the record (the triple's literal
  span), normalized with ``scoring.metrics.normalize_answer`` -- the released scorer's
  normalization, not the graph's entity keys (which keep e.g. "Saint-Denis" as two tokens).
- C(q) = normalized current values of the keys in K(q) (the last assertion of each chain).
- E(q) = normalized objects of every *non-current* assertion in the version chains of the
  keys in K(q) (all earlier versions, not only the most recent differing one).
- G(q) = normalized gold strings (those normalizing to "" are dropped, as in the scorer).

``flagged`` (the screen; equality of normalized strings):
    G ∩ E ≠ ∅  and  G ∩ C = ∅
i.e. some gold equals an earlier value of a selected key, and no gold equals any current
value of any selected key.

``flagged_substring`` (substring variant, the scorer's containment direction):
    ∃ g ∈ G, e ∈ E: g ⊆ e   and   ∄ g ∈ G, c ∈ C: g ⊆ c
(⊆ is substring). A reader copying that earlier value would be scored correct, and one
copying any selected current value would not. It is looser on the earlier side and
stricter on the current side, so neither flag set contains the other in general.

On the real FactConsolidation graph (grammar frontend, CMC with max_hops=5) the equality
screen flags 7 single-hop and 27 multi-hop questions, the substring variant 7 and 26 (the
paper's counts). They differ on one item, factconsolidation_mh_262k_no79: gold "Vienna"
is an earlier headquarters city of "Academy of Fine Arts Vienna", and also a substring of
that selected current value (the institution's own name). Using only each key's most
recent differing value (``Memory.previous_value``) instead of every earlier assertion
gives the same equality counts.
"""
from __future__ import annotations

from dataclasses import dataclass
from typing import Iterable, Mapping, Sequence

import pandas as pd

from cmc.graph import Key, Memory
from cmc.normalize import entity_key
from cmc.records import Question
from cmc.traverse import DEFAULT_MAX_HOPS, traverse
from scoring.metrics import normalize_answer


@dataclass(frozen=True)
class KeyValues:
    """One selected key: its current value and its earlier values (normalized surfaces)."""

    subject: str
    relation: str
    depth: int
    current: str
    current_pos: int
    earlier: tuple[str, ...]  # every non-current assertion in chain order (may repeat current)
    earlier_pos: tuple[int, ...]


@dataclass(frozen=True)
class QuestionEvidence:
    """Label-free screen input for one question."""

    question_id: str
    hop: str
    length: str
    anchors: tuple[str, ...]
    keys: tuple[KeyValues, ...]

    @property
    def current_values(self) -> frozenset[str]:
        return frozenset(k.current for k in self.keys)

    @property
    def earlier_values(self) -> frozenset[str]:
        return frozenset(v for k in self.keys for v in k.earlier)


def object_surfaces(memory: Memory) -> dict[tuple[int, Key], str]:
    """(record position, key) -> the object's literal text in that record."""
    return {(t.pos, (entity_key(t.subject), t.relation)): t.object for t in memory.extraction.triples()}


def question_evidence(question: Question, memory: Memory, max_hops: int = DEFAULT_MAX_HOPS) -> QuestionEvidence:
    surfaces = memory.derived("screen:object_surfaces", object_surfaces)
    anchors = memory.anchors.anchors(question.text)
    surface = lambda e: normalize_answer(surfaces[(e.pos, e.key)])  # noqa: E731
    keys = []
    for edge, depth in traverse(memory.current, anchors, max_hops):  # CMC's closure (cmc/read.py)
        chain = memory.chains[edge.key]
        keys.append(KeyValues(edge.subject, edge.relation, depth, surface(chain[-1]), chain[-1].pos,
                              tuple(surface(e) for e in chain[:-1]), tuple(e.pos for e in chain[:-1])))
    return QuestionEvidence(question.qid, question.hop, question.length, anchors, tuple(keys))


def screen_evidence(questions: Iterable[Question], memories: Mapping[str, Memory],
                    max_hops: int = DEFAULT_MAX_HOPS) -> list[QuestionEvidence]:
    """Step 1, label-free: CMC's selected keys with current and earlier values per question."""
    return [question_evidence(q, memories[q.history_id], max_hops) for q in questions]


def _golds(golds: Sequence[str]) -> list[str]:
    return [g for g in map(normalize_answer, golds) if g]


def screen(evidence: Iterable[QuestionEvidence], labels: Mapping[str, Sequence[str]]) -> pd.DataFrame:
    """Step 2: one row per question with both flags and the keys whose earlier values
    hold a gold string (``(subject, relation, depth d)``; equality)."""
    rows = []
    for ev in evidence:
        golds = _golds(labels[ev.question_id])
        current, earlier = ev.current_values, ev.earlier_values
        exact = bool(set(golds) & earlier) and not set(golds) & current
        loose = (any(g in e for g in golds for e in earlier)
                 and not any(g in c for g in golds for c in current))
        matched = [f"({k.subject}, {k.relation}, depth {k.depth})" for k in ev.keys
                   if any(g in k.earlier for g in golds)]
        rows.append({"question_id": ev.question_id, "hop": ev.hop, "length": ev.length,
                     "selected_keys": len(ev.keys), "flagged": exact, "flagged_substring": loose,
                     "gold": " / ".join(labels[ev.question_id]), "earlier_keys": "; ".join(matched)})
    return pd.DataFrame(rows, columns=["question_id", "hop", "length", "selected_keys", "flagged",
                                       "flagged_substring", "gold", "earlier_keys"])


def flag_counts(flags: pd.DataFrame) -> pd.DataFrame:
    """Questions and flags (both variants) per hop class, plus a total row."""
    table = (flags.groupby("hop", sort=False)
             .agg(questions=("question_id", "size"), flagged=("flagged", "sum"),
                  flagged_substring=("flagged_substring", "sum"))
             .reindex([h for h in ("sh", "mh") if h in set(flags["hop"])]).reset_index())
    total = {"hop": "all", "questions": len(flags), "flagged": int(flags["flagged"].sum()),
             "flagged_substring": int(flags["flagged_substring"].sum())}
    return pd.concat([table, pd.DataFrame([total])], ignore_index=True).astype(
        {"questions": int, "flagged": int, "flagged_substring": int})


def rescoring_bound(a_correct_unflagged: int, b_correct_unflagged: int, n_flagged: int, n: int) -> float:
    """Least-favourable lower bound (points) of the mean paired difference A - B over n
    items: every flagged item scored A wrong and B right (a paired difference of -1)."""
    if n <= 0 or not 0 <= n_flagged <= n:
        raise ValueError(f"need 0 <= n_flagged <= n and n > 0, got n_flagged={n_flagged}, n={n}")
    return 100 * (a_correct_unflagged - b_correct_unflagged - n_flagged) / n


def least_favourable_bound(a: Mapping[str, float], b: Mapping[str, float], flagged: Iterable[str]) -> dict:
    """The bound from per-item 0/1 scores of arms A and B (question id -> score) over their
    shared items; flagged ids outside those items are ignored.

    Paper B.3: (313 - 85 - 26) / 400 = 50.50 points."""
    shared = [q for q in a if q in b]
    if not shared:
        raise ValueError("arms A and B share no items")
    flagged = set(flagged) & set(shared)
    unflagged = [q for q in shared if q not in flagged]
    a_right = int(sum(a[q] for q in unflagged))
    b_right = int(sum(b[q] for q in unflagged))
    return {"n": len(shared), "n_flagged": len(flagged), "a_correct_unflagged": a_right,
            "b_correct_unflagged": b_right,
            "official_diff": 100 * sum(a[q] - b[q] for q in shared) / len(shared),
            "lower_bound": rescoring_bound(a_right, b_right, len(flagged), len(shared))}


def bound_table(items: pd.DataFrame, a: str, controls: Sequence[str], flagged: Iterable[str],
                hop: str | None = "mh") -> pd.DataFrame:
    """``least_favourable_bound`` of arm ``a`` against each control, from an experiment
    item table (analysis.tables.experiment_items: arm, question_id, hop, substring_em)."""
    part = items if hop is None else items[items["hop"] == hop]
    score = lambda arm: part[part["arm"] == arm].set_index("question_id")["substring_em"].to_dict()  # noqa: E731
    flagged = list(flagged)
    rows = [{"a": a, "b": b, **least_favourable_bound(score(a), score(b), flagged)} for b in controls
            if (part["arm"] == b).any()]
    return pd.DataFrame(rows).round({"official_diff": 2, "lower_bound": 2})
