"""The history parser never drops or rewrites a record: a line is the header or a numbered
record kept byte for byte, else a DataError naming the line."""
from __future__ import annotations

import pytest
from hypothesis import given
from hypothesis import strategies as st

from cmc.errors import DataError
from cmc.records import History

HEADER = "Here is a list of facts:"
TEXT = st.text(st.characters(blacklist_characters="\n", blacklist_categories=("Cs",)), max_size=40)


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
