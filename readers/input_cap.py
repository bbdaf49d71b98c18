"""The input cap of a local reader: which of the evidence's oldest tokens it drops.

Only the evidence is cut, oldest tokens first; the system text, the query and the answer
suffix stay whole (the paper's left truncation). The cut is made for the rendering without
its question, leaving QUESTION_ROOM tokens free, so every question over one evidence gets
the same cut and shares one prefix. Cut to fit each question exactly, questions of
different lengths would start the evidence at different tokens, and a long view (a raw
history at the cap) would be prefilled once per question instead of once per history
(measured: one 32K-token prefill took ~10 minutes on one CPU core). A question longer than
the room cuts further; a cap smaller than the room cuts per question.
"""
from __future__ import annotations

from typing import Any, Callable, Sequence

QUESTION_ROOM = 128  # tokens an over-cap evidence leaves for the question

# (evidence, question) -> (messages, the whole input's token ids): the reader's rendering
Render = Callable[[str, str], tuple[Any, Sequence[int]]]


def kept_evidence(evidence: str, starts: Sequence[int], cut: int) -> str:
    """The evidence without its `cut` oldest tokens (`starts`: each token's first character)."""
    return evidence[starts[cut]:] if cut < len(starts) else ""


def evidence_cut(render: Render, starts: Sequence[int], evidence: str, question: str,
                 cap: int) -> tuple[int, tuple[Any, Sequence[int]]] | None:
    """How many of the evidence's oldest tokens to drop for the input to fit `cap`, the same
    for every question that fits the room, and the rendering at that cut (so the caller does
    not tokenize it again); None when even no evidence does not fit."""
    head = fewest_cut(render, starts, evidence, "", cap - QUESTION_ROOM, 0)
    return fewest_cut(render, starts, evidence, question, cap, head[0] if head else 0)


def fewest_cut(render: Render, starts: Sequence[int], evidence: str, question: str, cap: int,
               cut: int) -> tuple[int, tuple[Any, Sequence[int]]] | None:
    """The fewest oldest evidence tokens (at least `cut`) to drop for the rendering to fit
    `cap`, with that rendering; None when even no evidence does not fit."""
    rendered = render(kept_evidence(evidence, starts, cut), question)
    while len(rendered[1]) > cap:
        if cut == len(starts):
            return None
        # Boundary merges make the rendered count move by about, not exactly, the cut.
        cut = min(len(starts), cut + len(rendered[1]) - cap)
        rendered = render(kept_evidence(evidence, starts, cut), question)
    return cut, rendered
