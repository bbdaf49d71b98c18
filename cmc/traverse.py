"""Bounded breadth-first traversal of current edges from the question's anchors."""
from __future__ import annotations

from typing import Iterable

from cmc.graph import Edge, Graph

DEFAULT_MAX_HOPS = 5


def traverse(graph: Graph, anchors: Iterable[str], max_hops: int = DEFAULT_MAX_HOPS) -> list[tuple[Edge, int]]:
    """Every outgoing edge of subjects at depths 0..max_hops-1, with its subject depth.

    Each subject is expanded once, at its shortest depth, so cycles terminate and an edge
    (one per (subject, relation) in the graph) is never selected twice.
    """
    depth = {anchor: 0 for anchor in anchors}
    frontier = list(depth)
    selected: list[tuple[Edge, int]] = []
    for level in range(max_hops):
        following = []
        for subject in frontier:
            for edge in graph.out.get(subject, ()):
                selected.append((edge, level))
                if edge.object not in depth:
                    depth[edge.object] = level + 1
                    following.append(edge.object)
        if not following:
            break
        frontier = following
    return selected
