"""Every committed bundle verifies against its SEAL, and its committed scores were made from
that very bundle: a bundle re-sealed without rescoring (or edited by hand) fails here, before
a table or the report pairs one bundle's answers with another's scores and timings."""
from __future__ import annotations

import json

import pytest

from provenance.bundle import verify_seal
from tests.conftest import ROOT

BUNDLES = sorted(p.parent for p in (ROOT / "results" / "bundles").glob("*/*/SEAL"))


def test_bundles_are_committed():
    assert len(BUNDLES) >= 30 and {p.parent.name for p in BUNDLES} >= {"table1", "table5", "table9", "ports", "depth"}


@pytest.mark.parametrize("bundle", BUNDLES, ids=lambda p: f"{p.parent.name}/{p.name}")
def test_committed_bundle_verifies_and_its_scores_are_of_it(bundle):
    seal = verify_seal(bundle)
    summary = ROOT / "results" / "scores" / bundle.parent.name / bundle.name / "summary.json"
    assert summary.is_file(), f"{bundle} has no committed scores"
    assert json.loads(summary.read_text())["seal"] == seal, f"{summary} scores another sealing of {bundle.name}"
