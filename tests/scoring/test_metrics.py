"""Released MemoryAgentBench parsing and EM rules, pinned by example and by property."""

from __future__ import annotations

import pytest
from hypothesis import given
from hypothesis import strategies as st

from scoring.metrics import normalize_answer, parse_answer, score_output, strict_em, substring_em

ASCII_PUNCT = set("!\"#$%&'()*+,-./:;<=>?@[\\]^_`{|}~")


def _reference_normalize(s: str) -> str:
    """Independent normalizer: character loops and token scans instead of regexes."""
    kept = "".join(ch for ch in s.lower() if ch not in ASCII_PUNCT)
    # Article removal as a scan over maximal runs of word characters (what \b bounds).
    out, i = [], 0
    while i < len(kept):
        if kept[i].isalnum() or kept[i] == "_":
            j = i
            while j < len(kept) and (kept[j].isalnum() or kept[j] == "_"):
                j += 1
            word = kept[i:j]
            out.append(" " if word in ("a", "an", "the") else word)
            i = j
        else:
            out.append(kept[i])
            i += 1
    return " ".join("".join(out).split())


def _reference_substring_em(prediction: str, golds: list[str]) -> float:
    pred = _reference_normalize(prediction)
    return float(any(g and g in pred for g in map(_reference_normalize, golds)))


# Letters with articles, ASCII and non-ASCII punctuation, accents, and odd whitespace.
_TEXT = st.lists(
    st.sampled_from(
        list("abcdehintrAETHN 1_-.,'\n\t\u00a0éÉ«»’") + ["the", "an", "a", "The", " A ", "AN"]
    ),
    max_size=30,
).map("".join) | st.text(max_size=40)


@given(_TEXT)
def test_normalize_matches_reference(s: str) -> None:
    assert normalize_answer(s) == _reference_normalize(s)


@given(_TEXT, st.lists(_TEXT, min_size=1, max_size=3))
def test_substring_em_matches_reference(pred: str, golds: list[str]) -> None:
    assert substring_em(pred, golds) == _reference_substring_em(pred, golds)


@given(_TEXT)
def test_normalize_is_idempotent(s: str) -> None:
    once = normalize_answer(s)
    assert normalize_answer(once) == once


def test_articles_dropped_as_whole_words_only() -> None:
    got = normalize_answer("The Republic of an Ireland, a country")
    assert got == "republic of ireland country"
    assert normalize_answer("Theatre Anand Abba") == "theatre anand abba"


def test_ascii_punctuation_only() -> None:
    assert normalize_answer("São-Paulo!") == "sãopaulo"
    assert normalize_answer("«Zürich»") == "«zürich»"
    assert normalize_answer("O’Neil's") == "o’neils"


def test_normalization_order_matters() -> None:
    # Punctuation before articles: "the-end" -> "theend", no article left.
    assert normalize_answer("the-end") == "theend"
    # Lowercase before articles: "The" is an article.
    assert normalize_answer("The End") == "end"


def test_substring_without_word_boundaries() -> None:
    assert substring_em("He is Indian.", ["India"]) == 1.0
    assert substring_em("Pakistan", ["India"]) == 0.0


def test_several_golds() -> None:
    assert substring_em("United Kingdom", ["UK", "United Kingdom"]) == 1.0
    assert strict_em("Answer: U.K.", ["United Kingdom", "UK"]) == 1.0
    assert strict_em("Answer: UK maybe", ["United Kingdom", "UK"]) == 0.0


def test_empty_normalized_gold_never_matches() -> None:
    assert substring_em("anything", ["the", "..."]) == 0.0
    assert strict_em("Answer: the", ["a"]) == 0.0
    assert substring_em("Paris", ["", "Paris"]) == 1.0


def test_golds_must_be_a_nonempty_sequence() -> None:
    with pytest.raises(TypeError):
        substring_em("India", "India")
    with pytest.raises(ValueError):
        substring_em("India", [])


@pytest.mark.parametrize(
    ("output", "parsed"),
    [
        ("Answer: Paris", "Paris"),
        ("answer:   Paris  ", "Paris"),
        ("Answer: Answer: Paris", "Paris"),
        ("ANSWER: answer:Answer: Paris", "Paris"),
        ("Paris\nmore text", "Paris"),
        ("  Paris  ", "Paris"),
        ("Let me think.\nAnswer: Paris\nBecause ...", "Paris"),
        ("Answer: Paris\nAnswer: Rome", "Paris"),
        ("The answer is Answer: Paris", "Paris"),
        ("Answer:\nParis", ""),
        ("", ""),
        ("Paris\rRome", "Paris\rRome"),
    ],
)
def test_parse_answer(output: str, parsed: str) -> None:
    assert parse_answer(output) == parsed


def test_score_output_max_over_raw_and_parsed() -> None:
    # Gold only in the raw output (after the parsed line).
    got = score_output("Answer: Rome\nActually it is Paris", ["Paris"])
    assert got == {"substring_em": 1.0, "strict_em": 0.0, "parsed": "Rome"}
    # Gold spans the "Answer:" prefix: found only after parsing removes it.
    got = score_output("Answer: an answer: x", ["answer x"])
    assert got["parsed"] == "an answer: x"
    assert got["substring_em"] == 1.0


def test_score_output_answer_on_second_line() -> None:
    got = score_output("Based on the pool:\nAnswer: the United Kingdom.", ["United Kingdom"])
    assert got == {"substring_em": 1.0, "strict_em": 1.0, "parsed": "the United Kingdom."}


def test_failed_request_scores_zero() -> None:
    assert score_output(None, ["Paris"]) == {"substring_em": 0.0, "strict_em": 0.0, "parsed": None}
