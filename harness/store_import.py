"""`cmc-harness store-import BUNDLE_OR_FOLDER ...`: the answers of sealed bundles into this
machine's prediction store, so a run that makes an identical request takes the sealed answer
instead of sending it again. A request id covers the messages, the reader and its engine pin,
the generation settings and the input tokens, so this is the paper's reuse rule: predictions
"reused only after matching the input packet, individual inputs, reader configuration, and
prompt" (appendix D.2). A view that does not depend on the extraction (raw suffix) is then
answered for an LLM frontend's run from the grammar run's bundle.

Only bundles whose seal verifies are read. A bundle names the answers it holds, so importing
one is trusting it as one's own journal: import bundles made here or checked
(`cmc-harness replay`). A request the store already answers keeps its answer (another answer
is counted as a conflict and left as it is); a failed prediction is not imported, so it is
sent again. The imported answer keeps its `runtime` (where it was generated).
"""
from __future__ import annotations

import argparse
import dataclasses
from collections import Counter
from pathlib import Path

from common.calls import Prediction
from common.errors import DataError
from generation.store import PredictionStore
from harness.config import compose
from provenance.bundle import read_bundle_jsonl, verify_seal

FIELDS = {f.name for f in dataclasses.fields(Prediction)}


def store_import_arguments(parser: argparse.ArgumentParser) -> None:
    parser.add_argument("bundles", nargs="+", type=Path, help="sealed bundles, or folders of them")
    parser.add_argument("--store", type=Path, help="the prediction store (default: paths.cache_dir/predictions.sqlite)")


def sealed_bundles(paths: list[Path]) -> list[Path]:
    """Each path a bundle (it holds SEAL) or a folder whose sealed bundles are taken, in name order."""
    found: list[Path] = []
    for path in paths:
        if (path / "SEAL").is_file():
            found.append(path)
        elif path.is_dir():
            found += sorted(p for p in path.iterdir() if (p / "SEAL").is_file())
        else:
            raise DataError(f"{path}: not a sealed bundle or a folder")
    if not found:
        raise DataError(f"{', '.join(map(str, paths))}: no sealed bundle there")
    return found


def import_bundle(bundle: Path, store: PredictionStore) -> Counter[str]:
    """One verified bundle's successful answers into the store: added, already held, held
    otherwise (conflicts, kept), failed (not imported)."""
    verify_seal(bundle)
    counts: Counter[str] = Counter()
    for row in read_bundle_jsonl(bundle, "predictions.jsonl"):
        try:
            prediction = Prediction.from_json({k: v for k, v in row.items() if k in FIELDS})
        except ValueError as exc:
            raise DataError(f"{bundle / 'predictions.jsonl'}: {exc}") from exc
        held = store.get(prediction.request_id)
        if prediction.error is not None:
            counts["failed"] += 1
        elif held is None or held.error is not None:
            store.put(prediction)
            counts["added"] += 1
        else:
            counts["held" if held.raw == prediction.raw else "conflicts"] += 1
    return counts


def store_import_main(args: argparse.Namespace) -> int:
    bundles = sealed_bundles(args.bundles)
    store = PredictionStore(args.store or Path(compose().paths.cache_dir) / "predictions.sqlite")
    try:
        for bundle in bundles:
            n = import_bundle(bundle, store)
            print(f"{bundle}: {n['added']} added, {n['held']} already held, {n['conflicts']} held with another "
                  f"answer (kept), {n['failed']} failed (not imported)")
    finally:
        store.close()
    return 0
