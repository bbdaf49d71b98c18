"""The generation service on the tiny trained model: what is stored or journaled is never
sent again, a stored failure is, the journal and the store reconcile both ways, in-flight
requests stay within the reader's concurrency, and every engine implements the protocol."""
from __future__ import annotations

import threading

import pytest

from cmc.cache import PredictionStore
from cmc.generation import GenerationService, generation_order
from cmc.journal import PredictionJournal
from cmc.prompt import load_prompt
from cmc.readers.base import Prediction, Reader
from cmc.readers.hf import HFReader
from cmc.readers.llamacpp import LlamaCppReader
from cmc.readers.models import HubModel
from cmc.readers.openai_api import OpenAIReader
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
