"""Which questions a run covers. A fixed, documented rule, so every view of an experiment
sees the same questions."""
from __future__ import annotations

from typing import Sequence, TypeVar

from cmc.records import Question
from common.configurable import configurable
from common.errors import DataError


@configurable
class Population:
    """All questions, optionally only some history lengths, and at most the first `per_cell`
    of each (hop, length) cell in dataset order (the released qa_pair_ids order)."""

    def __init__(self, name: str = "all", per_cell: int | None = None, lengths: Sequence[str] | None = None,
                 shard: str | None = None) -> None:
        """`shard` ("i/n") does not change which questions the run covers (its manifest and
        bundle are the whole population's): it names the slice of their requests this
        process generates (see `shard_slice`); `stage=seal` then merges every shard."""
        if per_cell is not None and per_cell < 1:
            raise ValueError(f"per_cell must be >= 1 or null, got {per_cell}")
        self.name, self.per_cell = name, per_cell
        self.lengths = None if lengths is None else tuple(lengths)
        self.shard = parse_shard(shard)

    def select(self, questions: Sequence[Question]) -> list[Question]:
        if self.lengths is not None:
            known = {q.length for q in questions}
            if unknown := set(self.lengths) - known:
                raise DataError(f"population.lengths = {list(self.lengths)}: {sorted(unknown)} not among this dataset's "
                                f"lengths {sorted(known)}")
            questions = [q for q in questions if q.length in self.lengths]
        if self.per_cell is None:
            return list(questions)
        taken: dict[tuple[str, str], int] = {}
        chosen = []
        for question in questions:
            cell = (question.hop, question.length)
            if taken.get(cell, 0) < self.per_cell:
                taken[cell] = taken.get(cell, 0) + 1
                chosen.append(question)
        return chosen


def parse_shard(shard: str | None) -> tuple[int, int] | None:
    """"i/n" -> (i, n) with 0 <= i < n; None for an unsharded run."""
    if shard is None:
        return None
    index, _, count = str(shard).partition("/")
    if not (index.isdigit() and count.isdigit()) or not 0 <= int(index) < int(count):
        raise ValueError(f"shard must be 'i/n' with 0 <= i < n (e.g. 0/4), got {shard!r}")
    return int(index), int(count)


T = TypeVar("T")


def shard_slice(items: Sequence[T], shard: tuple[int, int]) -> list[T]:
    """Shard i of n: the i-th of n contiguous, near-equal chunks. Callers pass requests in
    generation order, so a shard keeps requests that share a prefix together."""
    index, count = shard
    size, extra = divmod(len(items), count)
    start = index * size + min(index, extra)
    return list(items[start:start + size + (index < extra)])
