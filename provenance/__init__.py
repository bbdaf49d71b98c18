"""Provenance: the sealed bundle, the manifest frozen before generation (config, code,
versions, pins, preregistered contrasts), and the label vault that opens gold answers only
for a bundle whose seal verifies."""
