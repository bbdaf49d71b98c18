"""Invariants of the viewer's pieces: highlighting agrees with the released scorer, the
template engine escapes any text and gives it back, the graph layout keeps boxes apart,
and retrieval recall grows with k."""
from __future__ import annotations

import html
import string

from hypothesis import given, settings
from hypothesis import strategies as st

from analysis.retrieval_curves import record_recall
from scoring.metrics import normalize_answer, substring_em
from viewer.highlight import match_spans, segments
from viewer.traversal_svg import COLUMN, NODE_H, NODE_W, ROW, traversal_graph
from viewer.write import environment

WORDS = st.sampled_from(["the", "a", "an", "New", "york", "O'Brien", "Belgium", "-", ",", "é", "India", "indian", "x"])
TEXT = st.lists(WORDS, max_size=12).map(" ".join) | st.text(max_size=40) | st.text(
    alphabet=string.ascii_letters + string.punctuation + " \t", max_size=40)


@given(text=TEXT, golds=st.lists(TEXT, min_size=1, max_size=3))
@settings(max_examples=300, deadline=None)
def test_highlighted_spans_hold_the_gold_and_rebuild_the_text(text, golds):
    pieces = segments(text, golds)
    assert "".join(p.text for p in pieces) == text
    # marked exactly when the released scorer counts the text as holding a gold
    assert bool(match_spans(text, golds)) == (substring_em(text, golds) == 1.0)
    for start, end in match_spans(text, golds):
        assert normalize_answer(text[start:end])  # a mark is never only punctuation or space


@given(text=st.text(max_size=200))
@settings(max_examples=200, deadline=None)
def test_any_bundle_text_is_escaped_and_round_trips(text):
    rendered = environment().from_string("<p>{{ t }}</p><i title=\"{{ t }}\"></i>").render(t=text)
    inner = rendered[len("<p>"):rendered.index("</p>")]
    assert "<" not in inner and ">" not in inner and '"' not in inner
    assert html.unescape(inner) == text


NAMES = st.text(alphabet="abcde", min_size=1, max_size=3)


@given(edges=st.lists(st.tuples(NAMES, st.sampled_from(["r1", "r2", "r3"]), NAMES, st.integers(0, 500)),
                      min_size=1, max_size=25))
@settings(max_examples=150, deadline=None)
def test_layout_keeps_boxes_inside_and_apart(edges):
    depth: dict[str, int] = {edges[0][0]: 0}
    trace = []
    for s, r, o, pos in edges:  # a BFS-like trace: a subject has a depth before it is expanded
        d = depth.setdefault(s, max(depth.values()))
        depth.setdefault(o, d + 1)
        trace.append((s, r, o, pos, d))
    graph = traversal_graph([edges[0][0]], trace)
    boxes = [(n["x"], n["y"]) for n in graph["nodes"]]
    assert len(boxes) == len({n["id"] for n in graph["nodes"]})
    for x, y in boxes:
        assert NODE_W / 2 <= x <= graph["width"] - NODE_W / 2 and NODE_H / 2 <= y <= graph["height"] - NODE_H / 2
    for i, (x1, y1) in enumerate(boxes):
        for x2, y2 in boxes[i + 1:]:
            assert abs(x1 - x2) >= COLUMN - 0.2 or abs(y1 - y2) >= ROW - 0.2
    assert len(graph["edges"]) == len(trace)


@given(ranked=st.lists(st.integers(0, 60), unique=True, max_size=40), selected=st.sets(st.integers(0, 60), max_size=10))
def test_record_recall_grows_with_k_and_reaches_the_overlap(ranked, selected):
    values = [record_recall(ranked, selected, k) for k in range(0, len(ranked) + 2)]
    if not selected:
        assert all(v is None for v in values)
        return
    assert values == sorted(values) and values[0] == 0.0
    assert values[-1] == len(selected & set(ranked)) / len(selected)
