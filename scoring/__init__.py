"""Pure scoring: answer parsing and EM metrics, Wilson intervals, paired contrasts.

Nothing here reads bundles or labels; callers pass outputs and golds in.
"""
