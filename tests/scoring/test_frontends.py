"""Agreement of an LLM frontend's extraction with the grammar frontend's (analysis/frontend_agreement.py):
relation names are mapped by what they stand for, spans and statuses compared statement by
statement, and the vocabularies' splits and merges counted."""
from __future__ import annotations

import pandas as pd

from analysis.frontend_agreement import agreement, coverage_table, evidence_rows, frontend_row, relation_map
from cmc.extraction import Extraction, RecordExtraction, Triple

STATEMENTS = [
    ("Peru", "capital", "Lima"),          # 1
    ("Chile", "capital", "Santiago"),     # 2
    ("Bob", "spouse", "Alice"),           # 3
    ("Dune", "author", "Frank Herbert"),  # 4
    ("Emma", "author", "Jane Austen"),    # 5
    ("Oslo", "country", "Norway"),        # 6
]


def record(pos: int, status: str = "facts", *triples: tuple[str, str, str]) -> RecordExtraction:
    return RecordExtraction(pos, status, tuple(Triple(s, r, o, pos, (0, len(s)), (0, len(o))) for s, r, o in triples))


def extraction(records: list[RecordExtraction], name: str) -> Extraction:
    return Extraction(name, "corpus", tuple(records), tuple(sorted({t.relation for r in records for t in r.triples})))


REFERENCE = extraction([record(i, "facts", t) for i, t in enumerate(STATEMENTS, 1)], "grammar")


def test_a_consistent_renaming_agrees_and_a_wrong_span_or_status_does_not():
    other = extraction([
        record(1, "facts", ("Peru", "capital_city", "Lima")),
        record(2, "facts", ("Chile", "capital_city", "Santiago")),
        record(3, "facts", ("Bob", "married_to", "Alice")),
        record(4, "facts", ("Dune", "written_by", "Frank")),        # object span cut short
        record(5, "unresolved"),
        record(6, "facts", ("Oslo", "capital_city", "Norway")),     # the name stands for a second relation
    ], "llm")
    assert relation_map(REFERENCE, other) == {"capital_city": "capital", "married_to": "spouse"}
    found = agreement(REFERENCE, other)
    assert found["statements"] == 6 and found["same_status"] == 5 and found["both_facts"] == 5
    assert found["same_spans"] == 4                          # 1, 2, 3, 6
    assert found["same_triples"] == 3                        # 6 maps to capital, not country
    assert found["merging_names"] == 1 and found["split_relations"] == 0
    assert found["relations"] == 3 and found["reference_relations"] == 4


def test_two_names_for_one_relation_are_a_split():
    other = extraction([record(1, "facts", ("Peru", "capital", "Lima")),
                        record(2, "facts", ("Chile", "capital_of", "Santiago")),
                        *[record(i, "facts", t) for i, t in enumerate(STATEMENTS[2:], 3)]], "llm")
    found = agreement(REFERENCE, other)
    assert found["split_relations"] == 1 and found["same_triples"] == 6


def test_a_frontend_row_carries_its_frozen_cost_and_rules():
    metadata = {"cost": {"calls": 17, "input_tokens": 900, "output_tokens": 300, "seconds": 12.34,
                         "calls_by_purpose": {"align": 1, "extract": 6, "review": 10}},
                "hybrid": {"kept": [{"rule": "a"}, {"rule": "b"}], "rejected": [{"rule": "c"}],
                           "covered_by_rules": 4, "extracted_directly": 2}}
    row = frontend_row("hybrid_x", REFERENCE, REFERENCE, metadata)
    assert (row["calls"], row["rules_kept"], row["rules_rejected"], row["covered_by_rules"]) == (17, 2, 1, 4)
    assert row["facts"] == 6 and row["same_triples"] == 6 and row["seconds"] == 12.3
    assert row["calls_by_purpose"] == "align 1, extract 6, review 10"
    assert frontend_row("llm_x", REFERENCE, REFERENCE, {})["rules_kept"] is None
    assert frontend_row("llm_x", REFERENCE, REFERENCE, {})["calls_by_purpose"] is None


def test_coverage_counts_gold_and_packets_identical_to_the_reference():
    reference = {"q1": {"sha256": "a"}, "q2": {"sha256": "b"}, "q3": {"sha256": "c"}}
    packets = [{"question_id": "q1", "sha256": "a", "chars": 100, "truncated": False},
               {"question_id": "q2", "sha256": "x", "chars": 60000, "truncated": True},
               {"question_id": "q3", "sha256": "c", "chars": 250, "truncated": False}]
    rows = evidence_rows("llm", packets, reference, {"q1": True, "q2": True, "q3": False},
                         {"q1": "sh", "q2": "sh", "q3": "mh"})
    table = coverage_table(rows)
    expected = pd.DataFrame({"frontend": ["llm", "llm"], "hop": ["sh", "mh"], "n": [2, 1],
                             "gold_present": [2, 0], "same_packet": [1, 1], "median_chars": [30050.0, 250.0],
                             "truncated": [1, 0]})
    pd.testing.assert_frame_equal(table, expected, check_dtype=False)
