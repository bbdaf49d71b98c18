"""MQuAKE's cloze surfaces, the sentence forms FactConsolidation's records are written in:
the placeholders and the relation name a surface gives. Shared by the grammar frontend
(which parses them) and the synthetic generator (which writes them), so neither layer
imports the other."""
from __future__ import annotations

import re

SUBJECT, OBJECT = "[X]", "__"


def relation_name(surface: str) -> str:
    """'The capital of [X] is __' -> 'the_capital_of_is': the surface's own words."""
    return "_".join(re.findall(r"[a-z0-9]+", surface.replace(SUBJECT, " ").replace(OBJECT, " ").lower()))
