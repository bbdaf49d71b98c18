"""MemoryAgentBench answer parsing and exact-match metrics.

Reproduces the released FactConsolidation scorer so headline numbers are comparable
with published ones: SQuAD-style normalization, substring EM without word boundaries,
and the maximum over the raw and the parsed output.
"""

from __future__ import annotations

import re
import string
from collections.abc import Sequence
from typing import TypedDict

_PUNCTUATION = frozenset(string.punctuation)
_ARTICLES = re.compile(r"\b(a|an|the)\b")
# Released parser: the text after the first "Answer:" up to the end of that line ...
_ANSWER_LINE = re.compile(r"(?:Answer:)(.*)(?:\n|$)", flags=re.IGNORECASE)
# ... else the first line. Without re.MULTILINE "^" is the string start, and "." stops
# only at "\n" (not "\r"), so "line" here means "up to the first \n", as released.
_FIRST_LINE = re.compile(r"(?:^)(.*)(?:\n|$)")
_PREFIX = "answer:"


class OutputScore(TypedDict):
    substring_em: float
    strict_em: float
    parsed: str | None


def normalize_answer(s: str) -> str:
    """Lowercase, drop ASCII punctuation, drop articles, squeeze whitespace.

    The SQuAD order matters and is kept: lowercasing first lets "The" match the
    lowercase article regex; punctuation goes before articles, so "the-end" becomes
    "theend" (no article left) rather than "end". Only ``string.punctuation`` is
    removed: accents and non-ASCII punctuation such as "«" or "’" survive.
    """
    text = "".join(ch for ch in s.lower() if ch not in _PUNCTUATION)
    text = _ARTICLES.sub(" ", text)
    return " ".join(text.split())


def parse_answer(output: str) -> str:
    """Extract the answer span the way MemoryAgentBench does.

    First "Answer:" match (case-insensitive) to the end of its line, else the first
    line; strip; then drop leading "Answer:" prefixes, stripping after each. The
    released code drops one prefix after the regex; we drop all of them, which is
    identical for "Answer: Answer: X" and only differs for three or more prefixes.
    """
    match = _ANSWER_LINE.search(output) or _FIRST_LINE.search(output)
    assert match is not None  # _FIRST_LINE matches every string
    answer = match[1].strip()
    while answer.lower().startswith(_PREFIX):
        answer = answer[len(_PREFIX):].strip()
    return answer


def _normalized_golds(golds: Sequence[str]) -> list[str]:
    """Normalize golds, dropping those that normalize to "".

    An empty normalized gold would be a substring of every prediction (and equal to
    an empty answer), so it is treated as never matching instead of always matching.
    """
    if isinstance(golds, str):
        raise TypeError("golds must be a sequence of strings, not a single string")
    if len(golds) == 0:
        raise ValueError("golds is empty: every question needs at least one gold")
    return [g for g in map(normalize_answer, golds) if g]


def substring_em(prediction: str, golds: Sequence[str]) -> float:
    """1.0 if some normalized gold occurs in the normalized prediction, else 0.0.

    No word boundaries, as released: "india" counts as found in "indian".
    Golds that normalize to "" never match.
    """
    pred = normalize_answer(prediction)
    return float(any(g in pred for g in _normalized_golds(golds)))


def strict_em(prediction: str, golds: Sequence[str]) -> float:
    """1.0 if the parsed answer equals some gold after normalization, else 0.0.

    The label-sensitivity check of the paper (B.3); golds normalizing to "" never match.
    """
    pred = normalize_answer(parse_answer(prediction))
    return float(pred in _normalized_golds(golds))


def score_output(raw_output: str | None, golds: Sequence[str]) -> OutputScore:
    """Score one reader output.

    ``substring_em`` is the maximum over the raw and the parsed output (the released
    rule); ``strict_em`` uses the parsed answer. ``None`` is a failed request: it
    stays in the denominator and scores 0 with ``parsed=None``.
    """
    if raw_output is None:
        _normalized_golds(golds)  # validate golds even for a failed request
        return {"substring_em": 0.0, "strict_em": 0.0, "parsed": None}
    parsed = parse_answer(raw_output)
    return {
        "substring_em": max(substring_em(raw_output, golds), substring_em(parsed, golds)),
        "strict_em": strict_em(raw_output, golds),
        "parsed": parsed,
    }
