"""`cmc-harness store-import`: a sealed bundle's answers go into the prediction store under
their request ids (the paper's reuse rule); a held answer is kept, a conflict counted, a
failure not imported, and a bundle whose seal does not verify, or whose answers do not match its
requests, is refused before anything is stored."""
from __future__ import annotations

import dataclasses
import json
import shutil

import pytest

from common.calls import Prediction
from common.errors import DataError
from common.io import sha256_file
from generation.store import PredictionStore
from harness.cli import main
from harness.store_import import bundle_answers, import_answers, sealed_bundles
from provenance.bundle import read_bundle_jsonl, seal_text
from tests.conftest import ROOT

QUICK = ROOT / "results" / "bundles" / "table1" / "factconsolidation-grammar-quick-cmc-qwen25_coder_15b"


def import_bundle(bundle, store):
    return import_answers(bundle_answers(bundle), store)


def assert_refused_before_any_write(bundle, tmp_path, match):
    store = PredictionStore(tmp_path / "s.sqlite")
    try:
        with pytest.raises(DataError, match=match):
            import_bundle(bundle, store)
        assert len(store) == 0
    finally:
        store.close()


def resealed_copy(tmp_path, change_rows):
    """A copy of QUICK whose predictions `change_rows` rewrites, sealed again: its seal
    verifies (a seal is an unkeyed digest: it finds corruption, not a forger's edit)."""
    bundle = tmp_path / QUICK.name
    shutil.copytree(QUICK, bundle)
    path = bundle / "predictions.jsonl"
    path.chmod(0o644)
    rows = change_rows(read_bundle_jsonl(bundle, "predictions.jsonl"))
    path.write_text("".join(json.dumps(row) + "\n" for row in rows))
    (bundle / "SEAL").chmod(0o644)
    (bundle / "SEAL").write_text(seal_text({p.name: sha256_file(p) for p in bundle.iterdir() if p.name != "SEAL"}))
    return bundle


def test_a_sealed_bundles_answers_are_stored_under_their_request_ids(tmp_path, capsys):
    rows = read_bundle_jsonl(QUICK, "predictions.jsonl")
    store_path = tmp_path / "predictions.sqlite"
    assert QUICK in sealed_bundles([QUICK.parent])  # a folder stands for its sealed bundles
    assert main(["store-import", str(QUICK), "--store", str(store_path)]) == 0
    store = PredictionStore(store_path)
    try:
        for row in rows:
            held = store.get(row["request_id"])
            assert held is not None and (held.raw, held.usage, held.runtime) == (row["raw"], row["usage"], row.get("runtime", {}))
        assert import_bundle(QUICK, store)["held"] == len(rows)  # again: everything held
    finally:
        store.close()
    # a store that already answers one request otherwise keeps that answer, and counts it
    other = PredictionStore(tmp_path / "other.sqlite")
    try:
        first = Prediction.from_json({k: v for k, v in rows[0].items() if k != "question_id"})
        other.put(dataclasses.replace(first, raw="another answer"))
        counts = import_bundle(QUICK, other)
        assert (counts["added"], counts["held"], counts["conflicts"]) == (len(rows) - 1, 0, 1)
        assert other.get(first.request_id).raw == "another answer"
    finally:
        other.close()
    assert f"{QUICK}: {len(rows)} added, 0 already held" in capsys.readouterr().out


def test_a_failed_answer_is_not_imported_and_a_held_failure_is_replaced(tmp_path):
    bundle = tmp_path / QUICK.name
    shutil.copytree(QUICK, bundle)
    rows = read_bundle_jsonl(bundle, "predictions.jsonl")
    store = PredictionStore(tmp_path / "s.sqlite")
    try:
        failed = Prediction.from_json({k: v for k, v in rows[0].items() if k != "question_id"})
        store.put(dataclasses.replace(failed, raw=None, error="timeout"))
        assert import_bundle(bundle, store)["added"] == len(rows)
        assert store.get(failed.request_id).raw == rows[0]["raw"]
    finally:
        store.close()


def test_a_bundle_whose_seal_does_not_verify_is_refused_before_anything_is_stored(tmp_path):
    bundle = tmp_path / QUICK.name
    shutil.copytree(QUICK, bundle)
    lines = (bundle / "predictions.jsonl").read_text().splitlines()
    row = json.loads(lines[-1])
    row["raw"] = "a forged answer"
    (bundle / "predictions.jsonl").write_text("\n".join([*lines[:-1], json.dumps(row)]) + "\n")
    assert_refused_before_any_write(bundle, tmp_path, "predictions.jsonl")
    (tmp_path / "empty").mkdir()
    with pytest.raises(DataError, match="no sealed bundle"):
        sealed_bundles([tmp_path / "empty"])


def test_an_answer_under_an_id_no_request_holds_is_refused_and_nothing_is_stored(tmp_path, capsys):
    def forge(rows):
        return [*rows, {**rows[0], "request_id": "0" * 64, "raw": "a forged answer"}]
    forged = resealed_copy(tmp_path, forge)
    store_path = tmp_path / "s.sqlite"
    with pytest.raises(SystemExit) as stopped:
        main(["store-import", str(QUICK), str(forged), "--store", str(store_path)])
    assert stopped.value.code == 2
    assert "row 9 answers request 000000000000" in capsys.readouterr().err
    assert not store_path.exists()  # the good bundle before it was not imported either


def test_an_unreadable_answer_stops_the_import_before_any_write(tmp_path):
    broken = resealed_copy(tmp_path, lambda rows: [*rows[:-1], {**rows[-1], "raw": None, "error": None}])
    assert_refused_before_any_write(broken, tmp_path, "row")


def test_a_staging_folder_left_by_a_killed_seal_is_not_imported(tmp_path):
    shutil.copytree(QUICK, tmp_path / QUICK.name)
    shutil.copytree(QUICK, tmp_path / f".{QUICK.name}.staging-123")
    assert sealed_bundles([tmp_path]) == [tmp_path / QUICK.name]
