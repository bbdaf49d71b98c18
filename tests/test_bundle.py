"""Sealed bundles, the label vault and the crash-safe prediction store."""
import os
import stat
import threading

import pytest

from common.calls import Prediction
from common.errors import DataError
from common.io import canonical_json, sha256_text
from generation.store import PredictionStore
from provenance.bundle import SealError, verify_seal, write_bundle
from provenance.vault import LabelVault
from tests import valid_rows as rows

LABELS = {"q1": ("Paris",), "q2": ("Lima",)}


POPULATION = {"name": "t", "n": 2, "question_ids_sha256": sha256_text(canonical_json(["q1", "q2"]))}


def _bundle(tmp_path):
    return write_bundle(
        tmp_path / "b", rows.manifest(config={"arm": "cmc"}, population=POPULATION),
        [rows.packet("q1"), rows.packet("q2")], [rows.request("q1", "r1"), rows.request("q2", "r2")],
        [rows.prediction("q1", "r1", raw="Paris"), rows.prediction("q2", "r2", raw=None, error="timeout")],
    )


def test_sealed_bundle_is_complete_read_only_and_verifies(tmp_path):
    bundle = _bundle(tmp_path)
    assert sorted(os.listdir(bundle)) == ["SEAL", "evidence.jsonl", "manifest.json", "predictions.jsonl", "requests.jsonl"]
    assert len(verify_seal(bundle)) == 64
    for name in os.listdir(bundle):
        assert not os.stat(bundle / name).st_mode & (stat.S_IWUSR | stat.S_IWGRP | stat.S_IWOTH)
    assert not any(p.name.startswith(".") for p in tmp_path.iterdir())  # no staging left behind
    with pytest.raises(DataError, match="immutable"):
        _bundle(tmp_path)


def test_vault_opens_labels_only_for_the_bundle_questions(tmp_path):
    bundle = _bundle(tmp_path)
    assert LabelVault(lambda: {**LABELS, "q3": ("x",)}).open(bundle) == LABELS


def test_one_edited_byte_makes_the_vault_refuse(tmp_path):
    bundle = _bundle(tmp_path)
    target = bundle / "predictions.jsonl"
    os.chmod(target, stat.S_IRUSR | stat.S_IWUSR)
    data = bytearray(target.read_bytes())
    data[data.index(b"Paris")] = ord("p")
    target.write_bytes(bytes(data))
    with pytest.raises(SealError, match="predictions.jsonl changed since sealing"):
        LabelVault(lambda: LABELS).open(bundle)


def test_labels_before_sealing_raise(tmp_path):
    unsealed = tmp_path / "u"
    unsealed.mkdir()
    (unsealed / "predictions.jsonl").write_text('{"question_id": "q1"}\n')
    with pytest.raises(SealError, match="never sealed"):
        LabelVault(lambda: LABELS).open(unsealed)


def test_store_survives_reopen_and_keeps_the_first_write(tmp_path):
    store = PredictionStore(tmp_path / "p.sqlite")
    store.put(Prediction("r1", "Paris", "stop", {"prompt_tokens": 5}))
    store.put(Prediction("r1", "Lima"))
    store.close()
    again = PredictionStore(tmp_path / "p.sqlite")
    assert again.get("r1") == Prediction("r1", "Paris", "stop", {"prompt_tokens": 5})
    assert again.get("missing") is None


def test_a_stored_failure_is_replaced_by_a_later_success_but_not_vice_versa(tmp_path):
    store = PredictionStore(tmp_path / "p.sqlite")
    store.put(Prediction("r1", None, error="HTTP 503 after 5 attempts"))
    assert store.get("r1").error is not None
    store.put(Prediction("r1", "Paris"))
    store.put(Prediction("r1", None, error="later failure"))
    assert store.get("r1") == Prediction("r1", "Paris")


def test_store_is_safe_under_concurrent_puts(tmp_path):
    store = PredictionStore(tmp_path / "p.sqlite")
    threads = [threading.Thread(target=lambda i=i: [store.put(Prediction(f"r{i}-{j}", str(j))) for j in range(50)])
               for i in range(4)]
    for t in threads:
        t.start()
    for t in threads:
        t.join()
    assert len(store) == 200
