"""The traversal of one question as a layered graph: entities by BFS depth, one row per
depth (top to bottom, so a panel's width is set by the widest depth, not by the hop count),
laid out by networkx (multipartite layout) and drawn by the SVG template.

Nodes are entity keys; edges are the selected (subject, relation) edges with their depth
and record serial. A stale view adds, for each substituted key, a dashed edge to the value
the reader was shown instead; prior read + refresh adds the current value a key was
refreshed to. Layout is deterministic: nodes keep trace order within their row.
"""
from __future__ import annotations

from dataclasses import dataclass
from typing import Any, Sequence

import networkx as nx

from common.errors import DataError

COLUMN, ROW, MARGIN, NODE_W, NODE_H = 196, 92, 20, 176, 30
LABEL_CHARS = 28
BOW = 46  # how far a same-depth edge dips below its row (and the drawing's extra bottom margin)


@dataclass(frozen=True)
class Alternate:
    """A value shown beside a traversed edge: `kind` is "stale" (what the reader saw
    instead) or "refreshed" (what a prior-graph edge was replaced by)."""

    subject: str
    relation: str
    value: str
    pos: int
    kind: str


def short(text: str, limit: int = LABEL_CHARS) -> str:
    return text if len(text) <= limit else text[: limit - 1] + "\u2026"


def parse_edges(edges: Any, where: str) -> list[tuple[str, str, str, int, int]]:
    """Trace edges [subject, relation, object, pos, depth], checked (a bundle is data)."""
    if not isinstance(edges, list):
        raise DataError(f"{where}: trace edges are not a list")
    out = []
    for i, edge in enumerate(edges):
        ok = (isinstance(edge, list) and len(edge) == 5 and all(isinstance(x, str) for x in edge[:3])
              and all(isinstance(x, int) and not isinstance(x, bool) for x in edge[3:]))
        if not ok:
            raise DataError(f"{where}: trace edge {i} is not [subject, relation, object, pos, depth]: {str(edge)[:80]}")
        out.append((edge[0], edge[1], edge[2], edge[3], edge[4]))
    return out


def traversal_graph(anchors: Sequence[str], edges: Sequence[tuple[str, str, str, int, int]],
                    alternates: Sequence[Alternate] = ()) -> dict[str, Any]:
    """Geometry for the SVG template: nodes (x, y, label, role) and edges (path, label)."""
    graph = nx.MultiDiGraph()
    for anchor in anchors:
        graph.add_node(anchor, layer=0, role="anchor")
    for subject, _, obj, _, depth in edges:
        if subject not in graph:
            graph.add_node(subject, layer=depth, role="entity")
        if obj not in graph:
            graph.add_node(obj, layer=depth + 1, role="entity")
    for alt in alternates:
        graph.add_node(_ghost(alt), layer=graph.nodes[alt.subject]["layer"] + 1 if alt.subject in graph else 1,
                       role=alt.kind, label=alt.value)
    if graph.number_of_nodes() == 0:
        return {"nodes": [], "edges": [], "width": 0, "height": 0, "node_w": NODE_W, "node_h": NODE_H}
    layers = sorted({d["layer"] for _, d in graph.nodes(data=True)})
    widest = max(sum(1 for _, d in graph.nodes(data=True) if d["layer"] == layer) for layer in layers)
    width = MARGIN * 2 + NODE_W + COLUMN * (widest - 1)
    layer_of = nx.get_node_attributes(graph, "layer")
    flat = any(layer_of[s_] == layer_of[o] for s_, _, o, _, _ in edges)
    height = MARGIN * 2 + NODE_H + ROW * (len(layers) - 1) + (BOW if flat else 0)
    raw = nx.multipartite_layout(graph, subset_key="layer", align="horizontal")
    xy = _to_pixels(raw, graph, layers, width)
    nodes = [{"id": n, "label": short(d.get("label", n)), "title": d.get("label", n), "role": d["role"],
              "layer": d["layer"], "x": xy[n][0], "y": xy[n][1]} for n, d in graph.nodes(data=True)]
    incoming: dict[str, int] = {}  # labels of edges into one target stack upwards
    drawn = []
    for s_, r, o, pos, depth in edges:
        drawn.append(_edge(xy, s_, o, f"#{pos} {r}", f"{s_} \u2014{r}\u2192 {o} (record {pos}, depth {depth})",
                           "current", incoming))
    for alt in alternates:
        if alt.subject in xy:
            drawn.append(_edge(xy, alt.subject, _ghost(alt), f"#{alt.pos} {alt.kind}",
                               f"{alt.subject} \u2014{alt.relation}\u2192 {alt.value} ({alt.kind}, record {alt.pos})",
                               alt.kind, incoming))
    return {"nodes": nodes, "edges": drawn, "width": width, "height": height, "node_w": NODE_W, "node_h": NODE_H}


def _to_pixels(raw: dict[str, Any], graph: nx.MultiDiGraph, layers: list[int], width: int) -> dict[str, tuple[float, float]]:
    """Rows by layer rank; within a row networkx's order, centred in the drawing."""
    row = {layer: i for i, layer in enumerate(layers)}
    out = {}
    for layer in layers:
        members = sorted((n for n, d in graph.nodes(data=True) if d["layer"] == layer), key=lambda n: raw[n][0])
        left = MARGIN + NODE_W / 2 + (width - 2 * MARGIN - NODE_W - COLUMN * (len(members) - 1)) / 2
        for column, node in enumerate(members):
            out[node] = (round(left + COLUMN * column, 1), MARGIN + NODE_H / 2 + ROW * row[layer])
    return out


def _ghost(alt: Alternate) -> str:
    return f"{alt.kind}\u241f{alt.subject}\u241f{alt.relation}"


def _edge(xy: dict[str, tuple[float, float]], source: str, target: str, label: str, title: str,
          kind: str, incoming: dict[str, int]) -> dict[str, Any]:
    """A quadratic curve from the source box's bottom to the target box's top, labelled just
    above the target (siblings sit a column apart, so their labels never overlap); a
    same-depth edge bows below its row, an edge back up (a cycle) bows right of both boxes."""
    (x1, y1), (x2, y2) = xy[source], xy[target]
    if y2 > y1:
        sx, sy, tx, ty = x1, y1 + NODE_H / 2, x2, y2 - NODE_H / 2
        cx, cy = x1, (sy + ty) / 2
        lx, ly = tx, ty - 20 - 13 * incoming.get(target, 0)
        incoming[target] = incoming.get(target, 0) + 1
    elif y2 == y1:  # same depth: bottom to bottom, bowed below the row
        sx, sy, tx, ty = x1, y1 + NODE_H / 2, x2, y2 + NODE_H / 2
        cx, cy = (sx + tx) / 2, sy + BOW
        lx, ly = cx, (sy + cy) / 2 + 12
    else:  # back up to a shallower depth: right side to right side, bowed right
        sx, sy, tx, ty = x1 + NODE_W / 2, y1, x2 + NODE_W / 2, y2
        cx, cy = max(sx, tx) + COLUMN / 3, (sy + ty) / 2
        lx, ly = (sx + 2 * cx + tx) / 4, (sy + 2 * cy + ty) / 4 + 4
    return {"path": f"M{sx:.1f},{sy:.1f} Q{cx:.1f},{cy:.1f} {tx:.1f},{ty:.1f}", "label": short(label, LABEL_CHARS),
            "title": title, "x": round(lx, 1), "y": round(ly, 1), "kind": kind}
