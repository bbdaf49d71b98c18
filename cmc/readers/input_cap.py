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

from typing import Callable, Sequence

QUESTION_ROOM = 128  # tokens an over-cap evidence leaves for the question

Render = Callable[[str, str], Sequence[int]]  # (evidence, question) -> the whole input's token ids


def kept_evidence(evidence: str, starts: Sequence[int], cut: int) -> str:
    """The evidence without its `cut` oldest tokens (`starts`: each token's first character)."""
    return evidence[starts[cut]:] if cut < len(starts) else ""


def evidence_cut(render: Render, starts: Sequence[int], evidence: str, question: str, cap: int) -> int | None:
    """How many of the evidence's oldest tokens to drop for the input to fit `cap`, the same
    for every question that fits the room; None when even no evidence does not fit."""
    cut = fewest_cut(render, starts, evidence, "", cap - QUESTION_ROOM, 0) or 0
    return fewest_cut(render, starts, evidence, question, cap, cut)


def fewest_cut(render: Render, starts: Sequence[int], evidence: str, question: str, cap: int,
               cut: int) -> int | None:
    """The fewest oldest evidence tokens (at least `cut`) to drop for the rendering to fit
    `cap`; None when even no evidence does not fit."""
    ids = render(kept_evidence(evidence, starts, cut), question)
    while len(ids) > cap:
        if cut == len(starts):
            return None
        # Boundary merges make the rendered count move by about, not exactly, the cut.
        cut = min(len(starts), cut + len(ids) - cap)
        ids = render(kept_evidence(evidence, starts, cut), question)
    return cut
