"""`cmc-harness store-import BUNDLE_OR_FOLDER ...`: the answers of sealed bundles into this
machine's prediction store, so a run that makes an identical request takes the sealed answer
instead of sending it again. A request id covers the messages, the reader and its engine pin,
the generation settings and the input tokens, so this is the paper's reuse rule: predictions
"reused only after matching the input packet, individual inputs, reader configuration, and
prompt" (appendix D.2). A view that does not depend on the extraction (raw suffix) is then
answered for an LLM frontend's run from the grammar run's bundle.

Only bundles whose seal verifies are read, and only answers to requests the bundle holds. A
seal is an unkeyed digest: it finds corruption, not a forger, who can seal an edited answer
again. Importing a bundle is trusting its answers as one's own journal: import bundles made
here or checked (`cmc-harness replay` rebuilds their requests; `regenerate-sample` regenerates
a sample of answers). Every bundle named is checked before any is written, and all answers
are stored in one transaction. A request the store already answers keeps its answer (another
answer is counted as a conflict and left as it is); a failed prediction is not imported, so it
is sent again. The imported answer keeps its `runtime` (where it was generated).
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
    """Each path a bundle (it holds SEAL) or a folder whose sealed bundles are taken, in name
    order (not a hidden one: a `.NAME.staging-PID` folder is a seal that never finished)."""
    found: list[Path] = []
    for path in paths:
        if (path / "SEAL").is_file():
            found.append(path)
        elif path.is_dir():
            found += sorted(p for p in path.iterdir() if (p / "SEAL").is_file() and not p.name.startswith("."))
        else:
            raise DataError(f"{path}: not a sealed bundle or a folder")
    if not found:
        raise DataError(f"{', '.join(map(str, paths))}: no sealed bundle there")
    return found


def bundle_answers(bundle: Path) -> list[Prediction]:
    """A verified bundle's predictions, each checked against the request it answers: its
    question and request id must be a sealed request's (a prediction under an id no request
    of the bundle has would sit in the store as an answer to nothing it asked)."""
    verify_seal(bundle)
    requests = {(r.get("question_id"), r.get("request_id")) for r in read_bundle_jsonl(bundle, "requests.jsonl")}
    where = bundle / "predictions.jsonl"
    answers = []
    for n, row in enumerate(read_bundle_jsonl(bundle, "predictions.jsonl"), 1):
        try:
            prediction = Prediction.from_json({k: v for k, v in row.items() if k in FIELDS})
        except ValueError as exc:
            raise DataError(f"{where}: row {n}: {exc}") from exc
        if (row.get("question_id"), prediction.request_id) not in requests:
            raise DataError(f"{where}: row {n} answers request {prediction.request_id[:12]} for question "
                            f"{row.get('question_id')!r}, which requests.jsonl does not hold; not imported")
        answers.append(prediction)
    return answers


def import_answers(answers: list[Prediction], store: PredictionStore) -> Counter[str]:
    """Successful answers into the store in one transaction: added, already held, held
    otherwise (conflicts, kept), failed (not imported)."""
    counts: Counter[str] = Counter()
    new: dict[str, Prediction] = {}
    for prediction in answers:
        held = new.get(prediction.request_id) or store.get(prediction.request_id)
        if prediction.error is not None:
            counts["failed"] += 1
        elif held is None or held.error is not None:
            new[prediction.request_id] = prediction
            counts["added"] += 1
        else:
            counts["held" if held.raw == prediction.raw else "conflicts"] += 1
    store.put_all(new.values())
    return counts


def store_import_main(args: argparse.Namespace) -> int:
    bundles = sealed_bundles(args.bundles)
    answers = {bundle: bundle_answers(bundle) for bundle in bundles}  # every bundle checked before any write
    store = PredictionStore(args.store or Path(compose().paths.cache_dir) / "predictions.sqlite")
    try:
        for bundle, held in answers.items():
            n = import_answers(held, store)
            print(f"{bundle}: {n['added']} added, {n['held']} already held, {n['conflicts']} held with another "
                  f"answer (kept), {n['failed']} failed (not imported)")
    finally:
        store.close()
    return 0
