"""How an LLM frontend's extraction compares with the grammar frontend's (issue 20, paper
appendix D.1 and Table 7): statuses, triple agreement, cost, and what CMC then puts in front
of the reader. Everything here reads extractions and evidence packets; no reader is called.

Relation names are the extractor's own ("capital", "capital_city", ...), so agreement maps
each of its names to the grammar relation it most often stands for on statements where both
read the same subject and object, then asks whether the whole statement reads the same."""
from __future__ import annotations

from collections import Counter, defaultdict
from typing import Any, Iterable, Mapping

import pandas as pd

from cmc.extraction import STATUSES, Extraction, RecordExtraction


def _pairs(record: RecordExtraction) -> frozenset[tuple[str, str]]:
    return frozenset((t.subject, t.object) for t in record.triples)


def relation_map(reference: Extraction, other: Extraction) -> dict[str, str]:
    """Each of `other`'s relation names -> the reference relation it most often stands for,
    counted over statements both read as facts with the same subject and object."""
    votes: dict[str, Counter[str]] = defaultdict(Counter)
    for ref, oth in zip(reference.records, other.records, strict=True):
        if ref.status == oth.status == "facts" and _pairs(ref) == _pairs(oth):
            ref_rel = {(t.subject, t.object): t.relation for t in ref.triples}
            for t in oth.triples:
                votes[t.relation][ref_rel[(t.subject, t.object)]] += 1
    return {name: counts.most_common(1)[0][0] for name, counts in sorted(votes.items())}


def _triples(record: RecordExtraction, names: Mapping[str, str] | None = None) -> frozenset[tuple[str, str, str]]:
    rename = (lambda r: names.get(r, f"?{r}")) if names is not None else (lambda r: r)
    return frozenset((t.subject, rename(t.relation), t.object) for t in record.triples)


def agreement(reference: Extraction, other: Extraction) -> dict[str, Any]:
    """Statement-level agreement of `other` with `reference` (the same statements in the same
    order): same status; both facts with the same subject/object spans; the same triples once
    relation names are mapped; and how the two relation vocabularies line up (a reference
    relation named several ways is split, a name standing for several relations merges)."""
    if [r.pos for r in reference.records] != [r.pos for r in other.records]:
        raise ValueError(f"{other.frontend_id}: not the statements of {reference.history_id}")
    names = relation_map(reference, other)
    both_facts = [(ref, oth) for ref, oth in zip(reference.records, other.records)
                  if ref.status == oth.status == "facts"]
    meanings: dict[str, set[str]] = defaultdict(set)
    for ref, oth in both_facts:
        if _pairs(ref) == _pairs(oth):
            ref_rel = {(t.subject, t.object): t.relation for t in ref.triples}
            for t in oth.triples:
                meanings[t.relation].add(ref_rel[(t.subject, t.object)])
    named_as: dict[str, set[str]] = defaultdict(set)
    for name, relation in names.items():
        named_as[relation].add(name)
    return {
        "statements": len(reference.records),
        "same_status": sum(r.status == o.status for r, o in zip(reference.records, other.records)),
        "both_facts": len(both_facts),
        "same_spans": sum(_pairs(r) == _pairs(o) for r, o in both_facts),
        "same_triples": sum(_triples(r) == _triples(o, names) for r, o in both_facts),
        "relations": len({t.relation for t in other.triples()}),
        "reference_relations": len({t.relation for t in reference.triples()}),
        "split_relations": sum(len(v) > 1 for v in named_as.values()),
        "merging_names": sum(len(v) > 1 for v in meanings.values()),
    }


def status_counts(extraction: Extraction) -> dict[str, int]:
    counts = Counter(r.status for r in extraction.records)
    return {status: counts[status] for status in STATUSES}


def frontend_row(name: str, extraction: Extraction, reference: Extraction, metadata: Mapping[str, Any]) -> dict[str, Any]:
    """One row of the frontend table: statuses, agreement with the reference, frozen cost
    (calls and what they were for, tokens, seconds) and, for the hybrid, its rule counts."""
    cost = metadata.get("cost", {})  # files frozen before cost was recorded have none: blank, not 0
    hybrid = metadata.get("hybrid", {})
    return {
        "frontend": name, **status_counts(extraction), **agreement(reference, extraction),
        "calls": cost.get("calls"),
        "calls_by_purpose": ", ".join(f"{k} {v}" for k, v in cost["calls_by_purpose"].items())
                            if "calls_by_purpose" in cost else None,  # files frozen before it was counted have none
        "input_tokens": cost.get("input_tokens"), "output_tokens": cost.get("output_tokens"),
        "seconds": round(cost["seconds"], 1) if "seconds" in cost else None,
        "rules_kept": len(hybrid.get("kept", [])) if hybrid else None,
        "rules_rejected": len(hybrid.get("rejected", [])) if hybrid else None,
        "covered_by_rules": hybrid.get("covered_by_rules"), "extracted_directly": hybrid.get("extracted_directly"),
    }


def evidence_rows(frontend: str, packets: Iterable[dict], reference: Mapping[str, dict],
                  gold: Mapping[str, bool], hops: Mapping[str, str]) -> pd.DataFrame:
    """Per question: whether the CMC packet holds a gold string, whether it is the very
    packet the reference frontend gives (then its reader request is the same, and reused),
    and its size: unresolved records ride along in every packet, so a frontend that leaves
    more of them costs the reader more on every question."""
    return pd.DataFrame([{"frontend": frontend, "question_id": p["question_id"], "hop": hops[p["question_id"]],
                          "gold_present": gold[p["question_id"]],
                          "same_packet": p["sha256"] == reference[p["question_id"]]["sha256"],
                          "chars": p["chars"], "truncated": bool(p["truncated"])} for p in packets])


def coverage_table(rows: pd.DataFrame) -> pd.DataFrame:
    """Per frontend and hop: questions, gold strings in the CMC evidence, packets identical
    to the reference frontend's, the median packet size and the packets cut at the budget."""
    table = (rows.groupby(["frontend", "hop"], sort=False)
             .agg(n=("question_id", "size"), gold_present=("gold_present", "sum"), same_packet=("same_packet", "sum"),
                  median_chars=("chars", "median"), truncated=("truncated", "sum"))
             .reset_index())
    return table
