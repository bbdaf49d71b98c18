"""The generation service on the tiny trained model: what is stored or journaled is never
sent again, a stored failure is, the journal and the store reconcile both ways, in-flight
requests stay within the reader's concurrency, an answer is reused under another cap only
where decoding under that cap gives the same answer, and every engine implements the protocol."""
from __future__ import annotations

import dataclasses
import logging
import threading

import pytest

from common.calls import Prediction, Reader
from common.prompt import load_prompt
from generation.journal import PredictionJournal
from generation.service import GenerationService, answer_under_cap, capped, generation_order
from generation.store import PredictionStore
from readers.hf import HFReader
from readers.llamacpp import LlamaCppReader
from readers.models import HubModel
from readers.openai_api import OpenAIReader
from tests.readers.tiny_model import EVIDENCE, PROMPT_NAME, QA


@pytest.fixture(scope="module")
def reader(tiny_model_dir) -> HFReader:
    return HFReader("tiny", HubModel("local/tiny", "none", local_path=str(tiny_model_dir)), dtype="float32",
                    device="cpu", max_new_tokens=8)


@pytest.fixture(scope="module")
def requests(reader):
    prompt = load_prompt(PROMPT_NAME)
    return [reader.prepare(prompt, EVIDENCE, question) for question, _ in QA[:4]]


def test_stored_answers_are_never_sent_again(tmp_path, reader, requests):
    first = GenerationService(reader, PredictionStore(tmp_path / "p.sqlite"), PredictionJournal(tmp_path / "j.jsonl"))
    answers = first.generate(requests)
    assert set(answers) == {r.id for r in requests} and first.sent == len(requests)
    assert all(a.error is None and a.raw for a in answers.values())
    again = GenerationService(reader, PredictionStore(tmp_path / "p.sqlite"), PredictionJournal(tmp_path / "j.jsonl"))
    assert again.generate(requests) == answers and again.sent == 0
    assert again.answer(requests[0]) == answers[requests[0].id] and again.sent == 0


def test_journal_seeds_a_new_store_and_the_store_backfills_the_journal(tmp_path, reader, requests):
    GenerationService(reader, PredictionStore(tmp_path / "a.sqlite"), PredictionJournal(tmp_path / "j.jsonl")).generate(
        requests[:2])
    moved = GenerationService(reader, PredictionStore(tmp_path / "b.sqlite"), PredictionJournal(tmp_path / "j.jsonl"))
    assert moved.stored(requests[:2])[1] == [] and moved.sent == 0  # another machine: the journal is enough
    assert moved.store.get(requests[0].id) is not None
    lost = GenerationService(reader, PredictionStore(tmp_path / "a.sqlite"), PredictionJournal(tmp_path / "k.jsonl"))
    lost.stored(requests[:2])
    assert set(PredictionJournal(tmp_path / "k.jsonl").read()) == {r.id for r in requests[:2]}


def test_a_stored_failure_is_sent_again_and_replaced(tmp_path, reader, requests):
    store = PredictionStore(tmp_path / "p.sqlite")
    store.put(Prediction(requests[0].id, None, error="HTTP 503: busy"))
    service = GenerationService(reader, store)
    answer = service.answer(requests[0])
    assert service.sent == 1 and answer.error is None and store.get(requests[0].id) == answer


class _Counting:
    """Wraps a real reader to record how many generate calls overlap (the answers are the
    reader's own)."""

    def __init__(self, inner: HFReader, concurrency: int) -> None:
        self.inner, self.name, self.concurrency = inner, inner.name, concurrency
        self.active = self.peak = 0
        self.order: list[str] = []
        self._lock = threading.Lock()

    def generate(self, request):
        with self._lock:
            self.active += 1
            self.peak = max(self.peak, self.active)
            self.order.append(request.id)
        try:
            with self._lock:  # the tiny model is not thread-safe; overlap is counted around it
                return self.inner.generate(request)
        finally:
            with self._lock:
                self.active -= 1

    def preflight(self) -> None:
        self.inner.preflight()

    def counters(self) -> dict[str, int]:
        return self.inner.counters()


@pytest.mark.parametrize("concurrency", [1, 2])
def test_in_flight_requests_stay_within_the_readers_concurrency(tmp_path, reader, requests, concurrency):
    counting = _Counting(reader, concurrency)
    service = GenerationService(counting, PredictionStore(tmp_path / "p.sqlite"))
    service.generate(requests)
    assert counting.peak <= concurrency and len(counting.order) == len(requests)
    if concurrency == 1:
        assert counting.order == [r.id for r in generation_order(requests)]  # prefix order
    assert service.counters()["requests_sent"] == len(requests) and "prefill_tokens_total" in service.counters()


def test_every_engine_implements_the_reader_protocol(reader):
    members = ("prepare", "generate", "preflight", "counters", "freeze")
    for engine in (HFReader, LlamaCppReader, OpenAIReader):
        assert all(callable(getattr(engine, m, None)) for m in members), engine
    assert isinstance(reader, Reader)
    assert isinstance(OpenAIReader(name="o", base_url="http://127.0.0.1:9/v1", model="m"), Reader)
    assert reader.concurrency == 1 and LlamaCppReader.concurrency == 1


def test_an_answer_that_ended_within_a_cap_is_reused_under_that_cap(tmp_path, reader, requests):
    """The reference is the reader itself: each reused answer equals a fresh generation of the
    request under its own cap, and a request whose answer would not fit (or did not end by
    itself) is sent, never served a truncated or longer answer."""
    store = PredictionStore(tmp_path / "p.sqlite")
    under_8 = GenerationService(reader, store).generate(requests)  # the tiny model stops after 3-4 tokens
    assert all(a.finish_reason == "stop" and a.usage["completion_tokens"] <= 4 for a in under_8.values())
    under_4 = [capped(r, 4) for r in requests]
    service = GenerationService(reader, store, PredictionJournal(tmp_path / "j.jsonl"), reuse_caps=(2, 8))
    answers = service.generate(under_4)
    assert service.sent == 0 and service.reused == len(requests)
    for request, donor in zip(under_4, requests):
        fresh = reader.generate(request)
        assert (answers[request.id].raw, answers[request.id].finish_reason, answers[request.id].usage) == \
            (fresh.raw, fresh.finish_reason, fresh.usage)
        assert answers[request.id].runtime["answer_of_request"] == donor.id
    assert set(PredictionJournal(tmp_path / "j.jsonl").read()) == {r.id for r in under_4}  # committable as this run's

    under_2 = [capped(r, 2) for r in requests]  # every answer above needs 3-4 tokens: none fits
    tight = GenerationService(reader, store, reuse_caps=(4, 8))
    cut = tight.generate(under_2)
    assert tight.sent == len(requests) and tight.reused == 0
    assert all(p.finish_reason == "length" and p.usage["completion_tokens"] == 2 for p in cut.values())
    under_16 = [capped(r, 16) for r in requests]  # a cap-2 answer ended at the cap: unknown what follows
    longer = GenerationService(reader, PredictionStore(tmp_path / "q.sqlite"), reuse_caps=(2,))
    longer.store.put(cut[under_2[0].id])
    longer.generate(under_16[:1])
    assert longer.sent == 1 and longer.reused == 0


def test_an_api_or_sampled_answer_is_never_reused_under_another_cap(reader, requests):
    stored = Prediction(requests[0].id, "Paris", "stop", {"prompt_tokens": 9, "completion_tokens": 2})
    assert answer_under_cap(capped(requests[0], 4), stored) is not None
    api = dataclasses.replace(capped(requests[0], 4), input_ids=None)  # a server's tokens are not ours to know
    sampled = dataclasses.replace(requests[0], generation={"max_new_tokens": 4, "do_sample": True})
    assert answer_under_cap(api, stored) is None and answer_under_cap(sampled, stored) is None
    failed = Prediction(requests[0].id, None, error="HTTP 503")
    assert answer_under_cap(capped(requests[0], 4), failed) is None


def test_without_a_terminal_the_service_logs_its_progress(tmp_path, reader, requests, caplog):
    service = GenerationService(reader, PredictionStore(tmp_path / "p.sqlite"), label="view", progress_every_s=0)
    with caplog.at_level(logging.INFO, logger="common.progress"):
        service.generate(requests)
    lines = [m for m in caplog.messages if m.startswith("view: ") and " sent (" in m]
    assert [line.split(" sent")[0] for line in lines] == [f"view: {k} of {len(requests)}" for k in range(1, len(requests))]
