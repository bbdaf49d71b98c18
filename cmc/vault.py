"""The only path to gold answers: labels open for a bundle only after its seal verifies."""
from __future__ import annotations

from pathlib import Path
from typing import Callable, Mapping

from cmc.bundle import read_bundle_jsonl, verify_seal

Labels = Mapping[str, tuple[str, ...]]


class LabelVault:
    def __init__(self, load_labels: Callable[[], Labels]) -> None:
        self._load_labels = load_labels

    def open(self, bundle: str | Path) -> dict[str, tuple[str, ...]]:
        """Gold strings for exactly the bundle's questions; SealError if it is not sealed
        or any sealed byte changed."""
        verify_seal(bundle)
        labels = self._load_labels()
        wanted = [row["question_id"] for row in read_bundle_jsonl(bundle, "predictions.jsonl")]
        missing = [q for q in wanted if q not in labels]
        if missing:
            raise KeyError(f"{bundle}: no labels for {len(missing)} question(s), e.g. {missing[:3]}")
        return {q: tuple(labels[q]) for q in wanted}
