"""`dataset=synthetic`: seeded update streams over a fictional world, with ground truth.

FactConsolidation fixes one mix of hops, updates and history lengths; this generator lets
a user vary them. It emits FactConsolidation's own row shape (numbered context, questions,
answers, metadata.source `synthetic_{sh|mh}_{cell}`), so the row adapter, every frontend,
arm, reader and report run unchanged. One history (a "cell", e.g. `d3u050`) per pair of
hop depth and update rate in the grid; the cell label is the question's `length` slice.

Labels live in the rows, as FactConsolidation's answers do, and only label-opening code
reads them: `load_labels` (gold answers), `load_evidence` (per question the serials of the
current record of each hop: what a perfect reader needs) and `load_truth` (the hop chain,
which hops were updated, whether an update redirects a hop, how the anchor was written).

Identity: no hub pin exists, so the pin is (generator version, knobs, seed) plus the sha256
of the rows' canonical JSON. Same knobs and seed give byte-identical rows: one
`random.Random` per cell, seeded with the string `"{seed}/{cell}"`, and no iteration over
sets or unordered containers.
"""
from __future__ import annotations

import math
import random
from functools import cached_property
from typing import Any, Sequence

from common.configurable import configurable
from common.errors import DataError
from common.io import canonical_json, sha256_text
from sources.rows import RowDataset
from sources.synthetic_stream import BANDS, Cell, CellBuilder, CellSpec
from sources.synthetic_world import BY_NAME, CATALOGUE, Relation, chain_lengths

GENERATOR = "cmc-synthetic/1"
MAX_DEPTH = 6


def _int(field: str, value: Any, low: int, high: int | None = None) -> int:
    if isinstance(value, bool) or not isinstance(value, int) or value < low or (high is not None and value > high):
        bound = f"in {low}..{high}" if high is not None else f">= {low}"
        raise DataError(f"dataset.{field}: must be an integer {bound}, got {value!r}")
    return value


def _share(field: str, value: Any, high: float = 1.0) -> float:
    if isinstance(value, bool) or not isinstance(value, (int, float)) or not 0.0 <= value <= high or math.isnan(value):
        raise DataError(f"dataset.{field}: must be a number in [0, {high:g}], got {value!r}")
    return float(value)


def _list(field: str, value: Any) -> list[Any]:
    if isinstance(value, (str, bytes)) or not hasattr(value, "__iter__"):
        raise DataError(f"dataset.{field}: must be a non-empty list, got {value!r}")
    items = list(value)
    if not items:
        raise DataError(f"dataset.{field}: must be a non-empty list, got []")
    return items


def _relations(value: Any) -> tuple[Relation, ...]:
    if value is None:
        return CATALOGUE
    names = _list("relations", value)
    unknown = [n for n in names if n not in BY_NAME]
    if unknown:
        raise DataError(f"dataset.relations: unknown relation(s) {unknown}; known: {sorted(BY_NAME)}")
    return tuple(BY_NAME[n] for n in dict.fromkeys(names))


# What one process builds in memory within minutes; a larger sweep is several configs.
MAX_QUESTIONS, MAX_RECORDS = 100_000, 5_000_000


def _refuse_oversize(cells: int, questions_per_cell: int, history_length: int) -> None:
    """Refuse before generating a dataset too large to build, with its projected size (a
    million questions a cell used to run on until killed)."""
    questions, records = cells * questions_per_cell, cells * history_length
    if questions > MAX_QUESTIONS or records > MAX_RECORDS:
        raise DataError(f"dataset.questions_per_cell = {questions_per_cell}, dataset.history_length = {history_length}: "
                        f"{cells} cells project {questions:,} questions over {records:,} records; this generator "
                        f"builds at most {MAX_QUESTIONS:,} questions and {MAX_RECORDS:,} records in one dataset")


@configurable
class SyntheticDataset(RowDataset):
    """The generator as a dataset adapter; every knob is a config field (conf/dataset/synthetic.yaml)."""

    def __init__(
        self,
        name: str = "synthetic",
        seed: int = 20260907,
        depths: Sequence[int] = (1, 2, 3, 4, 5, 6),
        update_rates: Sequence[float] = (0.0, 0.5, 1.0),
        questions_per_cell: int = 10,
        history_length: int = 500,
        updates_per_key: int = 1,
        redirect: bool = True,
        distractor_density: float = 1.0,
        answer_position: str = "any",
        anchor_variant_rate: float = 0.0,
        filler_entities: int = 200,
        relations: Sequence[str] | None = None,
    ) -> None:
        super().__init__(name, path=None)
        self.seed = _int("seed", seed, 0)
        depths = [_int("depths", d, 1, MAX_DEPTH) for d in _list("depths", depths)]
        rates = [_share("update_rates", r) for r in _list("update_rates", update_rates)]
        if not isinstance(redirect, bool):
            raise DataError(f"dataset.redirect: must be true or false, got {redirect!r}")
        if answer_position not in BANDS:
            raise DataError(f"dataset.answer_position: must be one of {list(BANDS)}, got {answer_position!r}")
        chosen = _relations(relations)
        reach = chain_lengths(chosen, MAX_DEPTH)
        if max(reach.values()) < max(depths):
            raise DataError(f"dataset.relations: {[r.name for r in chosen]} allow chains of at most "
                            f"{max(reach.values())} hops, but depths asks for {max(depths)}")
        common = dict(
            questions=_int("questions_per_cell", questions_per_cell, 1),
            history_length=_int("history_length", history_length, 1),
            updates_per_key=_int("updates_per_key", updates_per_key, 1, 20), redirect=redirect,
            distractor_density=_share("distractor_density", distractor_density, high=10.0),
            answer_position=answer_position, anchor_variant_rate=_share("anchor_variant_rate", anchor_variant_rate),
            filler_entities=_int("filler_entities", filler_entities, 0), relations=chosen)
        self.specs = [CellSpec(depth=d, update_rate=r, **common) for d in depths for r in rates]
        _refuse_oversize(len(self.specs), common["questions"], common["history_length"])
        labels = [s.label for s in self.specs]
        if len(set(labels)) != len(labels):
            raise DataError(f"dataset.depths/update_rates: cells repeat ({labels}); rates must differ by >= 0.01")
        self.knobs = {"seed": self.seed, "depths": depths, "update_rates": rates, "questions_per_cell": questions_per_cell,
                      "history_length": history_length, "updates_per_key": updates_per_key, "redirect": redirect,
                      "distractor_density": float(distractor_density), "answer_position": answer_position,
                      "anchor_variant_rate": float(anchor_variant_rate), "filler_entities": filler_entities,
                      "relations": [r.name for r in chosen]}
        self.path = f"<{GENERATOR} {name} seed={self.seed}>"  # what error messages name instead of a file

    @cached_property
    def cells(self) -> list[Cell]:
        return [CellBuilder(spec, random.Random(f"{self.seed}/{spec.label}")).build() for spec in self.specs]

    def rows(self) -> list[dict[str, Any]]:
        """FactConsolidation rows, one per cell, with the ground truth in metadata."""
        rows = []
        for cell in self.cells:
            hop = "sh" if cell.spec.depth == 1 else "mh"
            source = f"{self.name}_{hop}_{cell.spec.label}"
            qs = cell.questions
            rows.append({"context": cell.context(), "questions": [q.text for q in qs], "answers": [[q.answer] for q in qs],
                         "metadata": {"source": source, "qa_pair_ids": [f"{source}_no{i}" for i in range(len(qs))],
                                      "evidence": [[f.pos for f in q.hops] for q in qs],
                                      "truth": [q.truth() for q in qs]}})
        return rows

    @cached_property
    def _generated(self) -> list[dict[str, Any]]:
        return self.rows()

    def _read(self) -> list[dict[str, Any]]:
        return self._generated

    @property
    def pin(self) -> dict[str, Any]:
        """The generated data's identity, in the manifest where a hub pin would be."""
        return {"generator": GENERATOR, "knobs": self.knobs, "sha256": sha256_text(canonical_json(self._generated)),
                "hub_repo": None, "hub_revision": None, "hub_filename": None}

    def _by_question(self, field: str) -> dict[str, Any]:
        out: dict[str, Any] = {}
        for index, row in enumerate(self._generated):
            _, _, ids, _ = self._row_fields(index, row)
            out.update(zip(ids, row["metadata"][field]))
        return out

    def load_evidence(self) -> dict[str, tuple[int, ...]]:
        """Ground-truth evidence serials by question id (a label: scoring only, via LabelVault)."""
        return {qid: tuple(serials) for qid, serials in self._by_question("evidence").items()}

    def load_truth(self) -> dict[str, dict[str, Any]]:
        """Per question the hop chain, updated hops, redirect flag and anchor form (a label)."""
        return self._by_question("truth")
