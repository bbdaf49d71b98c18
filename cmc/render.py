"""Render original numbered records under a character budget.

Evidence is always the original text: deduplicated by position, in source order, under the
history's header line. On overflow the newest contiguous suffix of whole records is kept,
because serial order is the version order the reader is told to trust.
"""
from __future__ import annotations

from dataclasses import dataclass
from typing import Iterable

from cmc.records import History
from common.errors import DataError

DEFAULT_BUDGET_CHARS = 60_000


@dataclass(frozen=True, slots=True)
class Rendered:
    positions: tuple[int, ...]  # what the text holds, after truncation
    text: str
    truncated: bool
    dropped: int  # records cut by the budget


def header_chars(history: History) -> int:
    return len(history.header) + 1


def record_chars(history: History, pos: int) -> int:
    """Rendered size of one record, its newline included."""
    return len(history.record(pos).line()) + 1


def render(history: History, positions: Iterable[int], budget_chars: int | None = DEFAULT_BUDGET_CHARS) -> Rendered:
    """The header plus 'N. text' lines; rendering every position reproduces the context."""
    ordered = sorted(set(positions))
    header = history.header + "\n"
    lines = [history.record(pos).line() + "\n" for pos in ordered]
    keep = len(lines)
    if budget_chars is not None:
        used = len(header)
        if used > budget_chars:
            raise DataError(f"read.budget_chars = {budget_chars}: cannot hold the {len(header)}-character header of "
                            f"{history.history_id!r}")
        keep = 0
        for line in reversed(lines):
            if used + len(line) > budget_chars:
                break
            used += len(line)
            keep += 1
    start = len(lines) - keep
    return Rendered(tuple(ordered[start:]), header + "".join(lines[start:]), start > 0, start)
