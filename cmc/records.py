"""Ordered memory histories and the questions asked of them.

A History is the immutable, serially numbered stream a memory is built from. Parsing is
strict because every downstream stage trusts the serial numbers as the version order.
"""
from __future__ import annotations

import re
from dataclasses import dataclass, field
from typing import Iterator, Mapping

from common.errors import DataError

# A serial as `line()` writes it back: ASCII digits, no leading zero. Any other spelling
# ("007.", Arabic-Indic digits) would be re-rendered, and the reader would not see the
# original line, so it is refused rather than normalised.
_NUMBERED_LINE = re.compile(r"(0|[1-9][0-9]*)\. (.*)\Z", re.DOTALL)
_NUMBERED_LOOSE = re.compile(r"\s*\d+\s*[.):]")
# Every character str.splitlines() breaks a line at. A record is one line: inside one, any of
# them would let a viewer, a frontend or a reader see a line the file does not number (with
# "\r6. <forged>", a fake record 6), so a history holding one is refused, never repaired.
LINE_BREAKS = re.compile("[\n\r\x0b\x0c\x1c\x1d\x1e\x85\u2028\u2029]")


def refuse_line_breaks(text: str, where: str) -> None:
    """DataError naming `where` and the column if `text` holds a line-break character."""
    if found := LINE_BREAKS.search(text):
        raise DataError(f"{where}: line-break character {found.group()!r} at column {found.start() + 1}; "
                        f"a record is one line")


@dataclass(frozen=True, slots=True)
class Record:
    """One original memory line: its serial number as written and its text."""

    pos: int
    text: str

    def line(self) -> str:
        return f"{self.pos}. {self.text}"


@dataclass(frozen=True)
class History:
    """An ordered stream of records under a fixed header line."""

    history_id: str
    header: str
    records: tuple[Record, ...]
    _by_pos: dict[int, Record] = field(init=False, repr=False, compare=False)

    def __post_init__(self) -> None:
        previous = None
        for record in self.records:
            if previous is not None and record.pos <= previous:
                kind = "duplicate" if record.pos == previous else "decreasing"
                raise DataError(
                    f"history {self.history_id!r}: {kind} serial number {record.pos} "
                    f"after {previous}; serials must be unique and increasing"
                )
            previous = record.pos
        object.__setattr__(self, "_by_pos", {r.pos: r for r in self.records})

    def __len__(self) -> int:
        return len(self.records)

    def __iter__(self) -> Iterator[Record]:
        return iter(self.records)

    def record(self, pos: int) -> Record:
        try:
            return self._by_pos[pos]
        except KeyError:
            raise DataError(f"history {self.history_id!r} has no record {pos}") from None

    @classmethod
    def parse(cls, history_id: str, context: str, *, source: str = "<context>") -> "History":
        """Parse 'header\\nN. text\\n...' exactly; any other line shape is an error."""
        lines = context.split("\n")
        if lines and lines[-1] == "":
            lines.pop()
        if not lines:
            raise DataError(f"{source}: empty context for history {history_id!r}")
        header, body = lines[0], lines[1:]
        for offset, line in enumerate(lines, start=1):
            refuse_line_breaks(line, f"{source}: history {history_id!r} line {offset}")
        if _NUMBERED_LOOSE.match(header):  # no header: taking it as one would drop record 0
            raise DataError(f"{source}: history {history_id!r} line 1 is a numbered record, not the header line "
                            f"(e.g. 'Here is a list of facts:'): {header[:80]!r}")
        records = []
        for offset, line in enumerate(body, start=2):
            match = _NUMBERED_LINE.match(line)
            if match is None:
                raise DataError(
                    f"{source}: history {history_id!r} line {offset} is not a numbered "
                    f"record ('N. text', N in ASCII digits without leading zeros): {line[:80]!r}"
                )
            records.append(Record(int(match.group(1)), match.group(2)))
        return cls(history_id, header, tuple(records))


@dataclass(frozen=True, slots=True)
class Question:
    """A question about one history; its answer lives in the label store, never here."""

    qid: str
    text: str
    history_id: str
    hop: str  # "sh" | "mh"
    length: str  # e.g. "6k", "262k"


@dataclass(frozen=True)
class Dataset:
    """Histories and questions for the evidence stage; labels are kept apart (the vault)."""

    name: str
    histories: Mapping[str, History]
    questions: tuple[Question, ...]

    def questions_of(self, history_id: str) -> list[Question]:
        return [q for q in self.questions if q.history_id == history_id]
