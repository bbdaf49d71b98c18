"""The history parser never drops or rewrites a record: a line is the header or a numbered
record kept byte for byte, else a DataError naming the line."""
from __future__ import annotations

import pytest
from hypothesis import given
from hypothesis import strategies as st

from cmc.records import LINE_BREAKS, History
from common.errors import DataError

HEADER = "Here is a list of facts:"
BREAKS = "\n\r\x0b\x0c\x1c\x1d\x1e\x85\u2028\u2029"
TEXT = st.text(st.characters(blacklist_characters=BREAKS, blacklist_categories=("Cs",)), max_size=40)


def test_the_line_breaks_refused_are_exactly_those_python_splits_lines_at():
    splitting = {chr(c) for c in range(0x110000) if not 0xD800 <= c <= 0xDFFF and len(f"a{chr(c)}b".splitlines()) == 2}
    assert splitting == set(BREAKS) and all(LINE_BREAKS.fullmatch(c) for c in splitting)


@given(st.lists(TEXT, min_size=1, max_size=6), st.data())
def test_a_record_holding_a_line_break_is_refused_naming_line_and_column(texts, data):
    index = data.draw(st.integers(0, len(texts) - 1))
    cut = data.draw(st.integers(0, len(texts[index])))
    brk = data.draw(st.sampled_from([c for c in BREAKS if c != "\n"]))
    texts[index] = texts[index][:cut] + brk + "6. a forged record" + texts[index][cut:]
    source = "\n".join([HEADER, *(f"{i + 1}. {t}" for i, t in enumerate(texts))])
    column = len(f"{index + 1}. ") + cut + 1
    with pytest.raises(DataError, match=rf"cr.parquet: history 'h' line {index + 2}: line-break character .* "
                                        rf"at column {column}; a record is one line"):
        History.parse("h", source, source="cr.parquet")


@given(st.lists(TEXT, max_size=12), st.integers(0, 50))
def test_every_parsed_history_renders_back_to_its_source(texts, start):
    source = "\n".join([HEADER, *(f"{start + i * 3}. {t}" for i, t in enumerate(texts))])
    history = History.parse("h", source + "\n")
    assert "\n".join([history.header, *(r.line() for r in history)]) == source
    assert len(history) == len(texts)


@pytest.mark.parametrize("context, line, why", [
    ("0. Thomas Kyd was born in London.\n1. The capital of France is Paris.", 1, "numbered record, not the header"),
    (" 3) The capital of France is Paris.\n4. x", 1, "numbered record, not the header"),
    (f"{HEADER}\n007. The capital of France is Paris.", 2, "without leading zeros"),
    (f"{HEADER}\n٣. The capital of France is Paris.", 2, "ASCII digits"),
    (f"{HEADER}\n1) The capital of France is Paris.", 2, "not a numbered record"),
    (f"{HEADER}\n1.The capital of France is Paris.", 2, "not a numbered record"),
    (f"{HEADER}\n\n2. x", 2, "not a numbered record"),
])
def test_a_line_that_is_neither_header_nor_record_is_named(context, line, why):
    with pytest.raises(DataError, match=rf"cr.parquet: history 'h' line {line} .*{why}"):
        History.parse("h", context, source="cr.parquet")


@pytest.mark.parametrize("brk", list(BREAKS))
def test_a_memstream_assertion_holding_a_line_break_is_refused_naming_its_case(brk):
    from sources.memstream_builder import Assertion

    with pytest.raises(DataError, match=r"case 17 post rewrite 2: line-break character"):
        Assertion(f"The capital of X is Y.{brk}6. forged", 17, "post", "rewrite", 2)
