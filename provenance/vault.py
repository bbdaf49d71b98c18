"""The only path to gold answers: labels open for a bundle only after its seal verifies."""
from __future__ import annotations

from pathlib import Path
from typing import Callable, Mapping

from common.errors import DataError
from common.io import canonical_json, sha256_text
from provenance.bundle import read_bundle_jsonl, read_manifest, verify_seal

Labels = Mapping[str, tuple[str, ...]]


class LabelVault:
    def __init__(self, load_labels: Callable[[], Labels]) -> None:
        self._load_labels = load_labels

    def open(self, bundle: str | Path) -> dict[str, tuple[str, ...]]:
        """Gold strings for exactly the bundle's questions; SealError if it is not sealed
        or any sealed byte changed."""
        verify_seal(bundle)
        wanted = check_population(bundle)
        labels = self._load_labels()
        missing = [q for q in wanted if not labels.get(q)]  # absent, or no gold string to match
        if missing:
            raise DataError(f"{bundle}: no gold answer for {len(missing)} question(s), e.g. {missing[:3]}; "
                            f"the bundle is kept, nothing was scored")
        return {q: tuple(labels[q]) for q in wanted}


def check_population(bundle: str | Path) -> list[str]:
    """The question ids of the bundle's prediction rows, which must be exactly the frozen
    population, in order (count and id hash): a re-sealed bundle with a row dropped or
    duplicated would otherwise score n=39 or 41 against a manifest of 40. A multi-call
    method's bundle has one evidence row per question and one prediction row per call:
    its evidence rows are checked, and its calls must run question by question in that order."""
    ids = [row.get("question_id") for row in read_bundle_jsonl(bundle, "predictions.jsonl")]
    evidence = read_bundle_jsonl(bundle, "evidence.jsonl")
    if evidence and "calls" in evidence[0]:
        calls = [qid for i, qid in enumerate(ids) if i == 0 or ids[i - 1] != qid]
        ids = [row.get("question_id") for row in evidence]
        if calls != ids:
            raise DataError(f"{Path(bundle) / 'predictions.jsonl'}: the calls do not run question by question in the "
                            f"order of evidence.jsonl; refusing to score")
    population = read_manifest(bundle).get("population", {})
    if len(ids) != population.get("n") or sha256_text(canonical_json(ids)) != population.get("question_ids_sha256"):
        raise DataError(f"{Path(bundle) / 'predictions.jsonl'}: {len(ids)} rows ({len(set(ids))} distinct questions) do "
                        f"not match the manifest's population ({population.get('n')} questions, id hash "
                        f"{str(population.get('question_ids_sha256'))[:12]}); refusing to score")
    return ids
