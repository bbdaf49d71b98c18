"""Provenance: the sealed bundle and the typed rows of every file it and its scores hold, the
manifest frozen before generation (config, code, versions, pins, preregistered contrasts),
and the label vault that opens gold answers only for a bundle whose seal verifies."""
