"""The stage driver: prepare -> evidence -> generate -> seal -> score, and replay.

It sits above the method (`cmc`: records, frontends, graph, anchors, traversal, rendering,
readers, the generation service), the evidence views (`arms`) and `scoring`, and is the
only layer that imports all three. It is a top-level package rather than `cmc.runner`
because the method package must not reach up to arms and scoring; tests/test_layers.py
holds every module to that order.
"""
