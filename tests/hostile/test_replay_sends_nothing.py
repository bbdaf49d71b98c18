"""A replayed or re-checked bundle never reaches a server and never spends a credential.

A foreign bundle made with `frontend=llm` records its extractor (address, model, which
environment variable holds the key). Replaying it where its frozen extraction is missing
used to run the extraction again: every call went to the recorded address, carrying the
replaying user's key. Here the recorded address is a listener that counts every request
(any method) and every credential it is shown; the environment holds secrets to spend.
"""
from __future__ import annotations

from pathlib import Path

import pytest

from common.errors import DataError
from common.prompt import load_prompt
from generation.journal import PredictionJournal
from generation.service import GenerationService, no_generation
from generation.store import PredictionStore
from harness.replay import replay, replay_config
from harness.reseal import reseal
from readers.openai_api import OpenAIReader
from tests.hostile.conftest import left_unchanged
from tests.hostile.servers import LocalServer
from tests.hostile.test_replay_untrusted import SOURCE, _tampered_bundle

SECRETS = {"OPENAI_API_KEY": "sk-replay-must-not-send-1", "SOME_SECRET": "plain-secret-value-2"}


@pytest.fixture
def listener():
    """Counts every request that reaches it and keeps what it was sent; answers 500."""
    with LocalServer(lambda *request: (500, {"error": {"message": "listener"}})) as server:
        yield server


def leaked(server: LocalServer) -> list[str]:
    return [name for name, value in SECRETS.items() if value in server.transcript()]


@pytest.fixture(autouse=True)
def secrets_in_environment(monkeypatch):
    for name, value in SECRETS.items():
        monkeypatch.setenv(name, value)


def llm_frontend(url: str, **extractor: object) -> dict:
    return {"_target_": "cmc.frontends.llm.LLMFrontend", "name": "llm_foreign", "batch_records": 20,
            "repair_rounds": 1, "empty_fallback": "history", "frozen": None, "reply_format": "json",
            "cache_dir": "${paths.cache_dir}", "extractions_dir": "${paths.results_dir}/extractions",
            "extractor": {"_target_": "readers.openai_api.OpenAIReader", "name": "foreign", "base_url": url,
                          "model": "m", "max_new_tokens": 64, "max_retries": 0, **extractor}}


@pytest.mark.parametrize("key_source", ["OPENAI_API_KEY", "SOME_SECRET"])
def test_replaying_a_foreign_llm_bundle_sends_nothing_and_names_what_is_missing(tmp_path, listener, key_source):
    def edit(manifest: dict, bundle: Path) -> None:
        manifest["config"]["frontend"] = llm_frontend(listener.url, api_key_env=key_source)

    bundle = _tampered_bundle(tmp_path, edit)
    results = tmp_path / "fresh_results"
    with left_unchanged(bundle, SOURCE), pytest.raises(DataError, match=r"journal\.jsonl: a replay never generates"):
        replay(bundle, [f"paths.results_dir={results}", f"paths.cache_dir={tmp_path / 'cache'}"])
    assert listener.seen == [] and leaked(listener) == []


@pytest.mark.parametrize("value", ["${paths.data_dir}|${oc.env:SOME_SECRET}", "${paths.data_dir}/${oc.env:SOME_SECRET}",
                                   "${paths.data_dir}${oc.decode:'{a: 1}'}", "${paths.${oc.env:SOME_SECRET}}",
                                   "x${paths.data_dir}"])
def test_only_a_whole_path_reference_is_interpolated(tmp_path, listener, value):
    def edit(manifest: dict, bundle: Path) -> None:
        manifest["config"]["frontend"] = llm_frontend(listener.url, extra_body={"token": value})

    bundle = _tampered_bundle(tmp_path, edit)
    with left_unchanged(bundle, SOURCE), pytest.raises(DataError, match=r"config\.frontend\.extractor\.extra_body\.token .* interpolates"):
        replay(bundle)
    assert listener.seen == []


def test_a_bundle_cannot_record_this_machines_paths(tmp_path):
    def edit(manifest: dict, bundle: Path) -> None:
        manifest["config"]["paths"] = {"results_dir": str(tmp_path / "elsewhere")}

    bundle = _tampered_bundle(tmp_path, edit)
    with left_unchanged(bundle, SOURCE), pytest.raises(DataError, match=r"config\.paths is not a recorded config group"):
        replay(bundle)
    assert not (tmp_path / "elsewhere").exists()


def test_no_credential_source_is_taken_from_a_bundle_unless_the_caller_names_it(tmp_path, listener):
    def edit(manifest: dict, bundle: Path) -> None:
        manifest["config"]["frontend"] = llm_frontend(listener.url, api_key_env="SOME_SECRET")

    bundle = _tampered_bundle(tmp_path, edit)
    assert replay_config(bundle).frontend.extractor.api_key_env is None
    mine = replay_config(bundle, ["frontend.extractor.api_key_env=MY_KEY"])
    assert mine.frontend.extractor.api_key_env == "MY_KEY"


def test_a_reseal_sends_only_to_an_address_the_caller_gives(tmp_path, listener):
    def edit(manifest: dict, bundle: Path) -> None:
        manifest["config"]["frontend"] = llm_frontend(listener.url)

    bundle = _tampered_bundle(tmp_path, edit)
    with left_unchanged(bundle, SOURCE), pytest.raises(
            DataError, match=r"config\.frontend\.extractor\.base_url is an address the bundle records"):
        reseal(bundle)
    assert listener.seen == []


def test_the_generation_service_refuses_inside_no_generation_and_names_the_journal(tmp_path, listener):
    reader = OpenAIReader(name="r", base_url=listener.url, model="m", max_retries=0)
    journal = PredictionJournal(tmp_path / "calls.journal.jsonl")
    service = GenerationService(reader, PredictionStore(tmp_path / "store.sqlite"), journal)
    request = reader.prepare(load_prompt("memoryagentbench_factconsolidation"), "1. A is B.", "What is A?")
    with no_generation("a seal check"), pytest.raises(DataError, match=r"calls\.journal\.jsonl: a seal check never generates"):
        service.answer(request)
    with no_generation("a seal check"), pytest.raises(DataError, match="never contacts a reader"):
        service.preflight()
    assert listener.seen == []
    with pytest.raises(RuntimeError, match="HTTP 500"):  # outside the block the same service does reach out
        service.answer(request)
    assert len(listener.seen) == 1 and "sk-replay-must-not-send-1" in listener.transcript()
