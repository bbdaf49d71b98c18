"""The grammar frontend's reading of the same views, for an LLM frontend's tables: which
bundle stands for "the same view on the grammar's extraction", and the two tables that use it
(`_selection`'s extraction counts and `_extraction`'s strata)."""
from __future__ import annotations

from pathlib import Path
from typing import TYPE_CHECKING, Any

import pandas as pd

from analysis.extraction_effect import extraction_effect
from analysis.generation_cost import engine_label
from analysis.tables import experiment_items, selection_vs_reader
from provenance.bundle import manifest_slice, read_manifest
from provenance.vault import LabelVault

if TYPE_CHECKING:
    from harness.make_tables import Slice, Tables


def grammar_reference(chosen: "Slice", vault: LabelVault, questions: dict, histories: Any,
                      bundles_root: Path) -> pd.DataFrame | None:
    """The items of the same views on the experiment's default (grammar) frontend, so an LLM
    frontend's tables can separate its extraction; None for the default frontend itself or when
    none of its bundles is sealed. Per view, the experiment's own grammar bundle defines the
    view; another experiment's grammar bundle with the very same view config stands in for it
    when it was read by this slice's reader on this slice's engine (Table 1's grammar views were
    read in float32, Tables 7 and 9's in bfloat16), so the answers can be compared too. A
    one-call view's evidence does not depend on the reader, so another reader's bundle serves for
    gold and packets (its answers are then no reference: extraction_effect checks); a multi-call
    method's evidence (its trace) does, so only its own reader's."""
    default = chosen.defaults["frontend"]
    if chosen.wanted["frontend"] == default:
        return None
    engine = {manifest["config"]["arm"]["name"]: engine_label(manifest.get("reader_pin") or {})
              for manifest in map(read_manifest, chosen.bundles)}
    own = {manifest["config"]["arm"]["name"]: manifest["config"]["arm"]
           for manifest in map(read_manifest, (p for p in chosen.sealed if grammar_slice(chosen, chosen.slices[p])))}
    ranked = []
    for path in sorted(p for p in bundles_root.glob("*/*") if (p / "SEAL").is_file()):
        manifest = read_manifest(path)
        arm = manifest["config"]["arm"]
        if arm["name"] in engine and own.get(arm["name"]) == arm and grammar_slice(chosen, manifest_slice(manifest)):
            pin_engine = engine_label(manifest.get("reader_pin") or {})
            ranked.append(((manifest["config"]["reader"]["name"] != chosen.wanted["reader"],
                            pin_engine != engine[arm["name"]], path.parent.name != chosen.cfg.experiment.name,
                            str(path)), arm["name"], path))
    by_arm: dict[str, Path] = {}
    for _, arm_name, path in sorted(ranked):
        by_arm.setdefault(arm_name, path)
    if not by_arm:
        return None
    items = experiment_items(by_arm.values(), vault, questions, chosen.cfg.experiment.cluster, histories)
    return items[(items["reader"] == chosen.wanted["reader"]) | (items.groupby("arm")["calls"].transform("max") == 1)]


def grammar_slice(chosen: "Slice", found: dict[str, str]) -> bool:
    """Whether a bundle's slice is the default frontend's on this slice's dataset and population."""
    return found["frontend"] == chosen.defaults["frontend"] and all(
        found[key] == chosen.wanted[key] for key in ("dataset", "population"))


def write_extraction(out: "Tables", items: pd.DataFrame, views: list[str], reference: pd.DataFrame | None) -> None:
    """Selection against reader, separated from the extraction where a grammar reference exists."""
    gold = None if reference is None else {
        (arm, qid): bool(present) for arm, qid, present in
        zip(reference["arm"], reference["question_id"], reference["gold_present"])}
    out.write(selection_vs_reader(items, views, gold), "_selection",
              "gold string in the evidence, and answers right with and without it"
              + ("; against the same view on the grammar frontend's extraction" if gold else ""))
    if reference is not None:
        effect = extraction_effect(items, reference, views)
        if not effect.empty:
            out.write(effect, "_extraction", "where the extraction changes the packet, against the same view "
                                             "on the grammar frontend's extraction")
