"""See a run: a static HTML report of sealed bundles (evidence, traversal, answers, labels).

The viewer sits at the top of the scoring layer: it reads bundles, rebuilds their evidence
from the history, and opens labels only through the label vault (so only for a bundle whose
seal verifies). It imports no arm, runner or reader, and nothing in the project imports it.
"""
