"""A built MQuAKE-MemStream (from the fictional fixture) runs through the same row adapter
and every arm, unchanged."""
import json

import pytest
from hydra.utils import instantiate

from analysis.tables import bundle_items, view_table
from cmc.evidence import select_all
from cmc.frontends.grammar import GrammarFrontend
from cmc.graph import build_memories
from common.errors import DataError
from harness.stages import run
from provenance.bundle import read_bundle_jsonl, read_manifest, verify_seal
from provenance.vault import LabelVault
from sources.memstream_builder import build
from sources.memstream_cases import load_source
from sources.memstream_writer import write_outputs
from sources.rows import RowDataset
from tests.conftest import ROOT, TEMPLATES, compose_config

FIXTURE = ROOT / "tests" / "data" / "mquake_cf_fixture.json"


@pytest.fixture(scope="module")
def built(tmp_path_factory):
    out = tmp_path_factory.mktemp("memstream")
    frontend = GrammarFrontend(str(TEMPLATES))
    source = load_source(FIXTURE)
    write_outputs(build(source.cases, frontend, n_cases=10, pool_size=5), source, frontend, out)
    return out


def _adapter(out):
    return RowDataset("mquake_memstream", str(out / "mquake_memstream.parquet"), card=str(out / "card.json"))


def test_built_memstream_loads_with_labels_apart(built):
    adapter = _adapter(built)
    dataset = adapter.load()
    assert set(dataset.histories) == {"mquake_memstream_pool0", "mquake_memstream_pool1"}
    assert {q.hop for q in dataset.questions} == {"sh", "mh"}
    assert set(adapter.load_labels()) == {q.qid for q in dataset.questions}


@pytest.mark.parametrize("arm", ["cmc", "stale_closure", "latest_state_full", "raw_suffix", "fact_bm25"])
def test_every_arm_runs_unchanged_on_memstream(built, arm):
    dataset = _adapter(built).load()
    memories = build_memories(dataset, GrammarFrontend(str(TEMPLATES)))
    assert all(not m.unresolved for m in memories.values())  # the grammar parses every assertion
    evidence = list(select_all(instantiate(compose_config(f"arm={arm}").arm), dataset, memories))
    assert len(evidence) == len(dataset.questions) and all(e.text for e in evidence)


def test_a_tampered_build_fails_its_card_check(built, tmp_path):
    card = json.loads((built / "card.json").read_text())
    card["files"]["mquake_memstream.parquet"] = "0" * 64
    (tmp_path / "card.json").write_text(json.dumps(card))
    adapter = RowDataset("mquake_memstream", str(built / "mquake_memstream.parquet"), card=str(tmp_path / "card.json"))
    with pytest.raises(DataError, match="does not match the pinned"):
        adapter.load()


def test_missing_build_says_how_to_make_it(tmp_path):
    with pytest.raises(DataError, match="make memstream"):
        RowDataset("mquake_memstream", str(tmp_path / "x.parquet"), card=str(tmp_path / "card.json")).load()


def test_dataset_config_composes():
    cfg = compose_config("dataset=mquake_memstream")
    assert cfg.dataset.card.endswith("card.json") and cfg.dataset.sha256 is None


@pytest.mark.slow
def test_table3_runs_end_to_end_and_pins_the_build_by_its_card(built, tiny_model_dir, tmp_path):
    """The Table 3 preset, with the tiny reader in place of Qwen3.5-4B, seals and scores a
    MemStream bundle whose manifest records the sha256 the builder wrote into card.json."""
    cfg = compose_config("experiment=table3", "arm=raw_history", "reader=local",
                         f"reader.model.local_path={tiny_model_dir}", "reader.max_input_tokens=256",
                         f"dataset.path={built / 'mquake_memstream.parquet'}", f"dataset.card={built / 'card.json'}",
                         f"paths.results_dir={tmp_path / 'results'}", f"paths.cache_dir={tmp_path / 'cache'}")
    scores = run(cfg)
    bundle = tmp_path / "results" / "bundles" / "table3" / "mquake_memstream-grammar-all-raw_history-local"
    verify_seal(bundle)
    card = json.loads((built / "card.json").read_text())
    assert read_manifest(bundle)["dataset_pin"]["sha256"] == card["files"]["mquake_memstream.parquet"]
    requests = read_bundle_jsonl(bundle, "requests.jsonl")
    assert len(requests) == len(_adapter(built).load().questions)
    assert max(r["input_tokens"] for r in requests) <= 256
    assert all(r["evidence_truncated_tokens"] > 0 for r in requests)  # the whole history overflows the cap
    # No character budget cut anything, yet every context counts as truncated in the tables.
    adapter = _adapter(built)
    assert not any(p["truncated"] for p in read_bundle_jsonl(bundle, "evidence.jsonl"))
    items = bundle_items(bundle, LabelVault(adapter.load_labels).open(bundle), {q.qid: q for q in adapter.load().questions})
    assert view_table(items, ["raw_history"]).loc[0, "Trunc."] == len(requests)
    summary = json.loads((scores / "summary.json").read_text())
    assert summary["n"] == len(requests) and set(summary["by_hop"]) == {"sh", "mh"}
