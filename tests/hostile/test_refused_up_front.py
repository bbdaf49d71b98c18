"""Inputs that used to be accepted without a word: a server answering as another model (a
warning, once), a synthetic dataset too large to build (refused before generating)."""
from __future__ import annotations

import time

import pytest

from common.errors import DataError
from common.prompt import load_prompt
from readers.openai_api import OpenAIReader
from sources.synthetic import SyntheticDataset
from tests.hostile.servers import LocalServer, chat_reply


@pytest.mark.parametrize("answered, warned", [("another-model", True), ("asked-model", False)])
def test_a_server_answering_as_another_model_is_warned_about_once(caplog, answered, warned):
    server = LocalServer(lambda *request: (200, chat_reply(answered, "Paris")))
    reader = OpenAIReader(name="r", base_url=server.url, model="asked-model", max_retries=0)
    prompt = load_prompt("memoryagentbench_factconsolidation")
    try:
        with caplog.at_level("WARNING", logger="readers.openai_api"):
            got = [reader.generate(reader.prepare(prompt, f"1. A{i} is B.", f"What is A{i}?")) for i in range(3)]
    finally:
        server.close()
    assert [p.model for p in got] == [answered] * 3 and all(p.raw == "Paris" for p in got)
    notices = [r for r in caplog.records if "the server answered as" in r.getMessage()]
    assert len(notices) == (1 if warned else 0)
    if warned:
        assert "'asked-model'" in notices[0].getMessage() and "'another-model'" in notices[0].getMessage()


@pytest.mark.parametrize("knobs, projected", [
    ({"questions_per_cell": 1_000_000}, "18 cells project 18,000,000 questions"),
    ({"history_length": 10_000_000, "depths": [1]}, "3 cells project 30 questions over 30,000,000 records"),
])
def test_a_synthetic_dataset_too_large_to_build_is_refused_with_its_projected_size(knobs, projected):
    started = time.monotonic()
    with pytest.raises(DataError, match=projected):
        SyntheticDataset(**knobs)
    assert time.monotonic() - started < 5  # refused before anything is generated
