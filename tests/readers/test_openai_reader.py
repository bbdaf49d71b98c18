"""The `openai` reader against a real OpenAI-compatible HTTP server on 127.0.0.1 serving
the tiny Qwen2 model, with injected faults: only transport faults (500, 429, timeout,
dropped connection, undecodable body) are retried, everything else is recorded as a
terminal error, and the server's per-body counter proves no request is sent again after
it was answered."""
from __future__ import annotations

import hashlib
import socket
import time
from collections import Counter
from pathlib import Path

import pytest

from common.io import canonical_json
from common.prompt import load_prompt
from readers.hf import HFReader
from readers.models import HubModel, folder_sha256
from readers.openai_api import OpenAIReader
from readers.serve import Completion, ReaderBackend, load_backend
from tests.readers.faulty_server import FaultyServer
from tests.readers.tiny_model import EVIDENCE, QA

MAX_TOKENS = 8
MAX_RETRIES = 3
# The tiny model's trained questions, plus two it never saw (noise, but deterministic).
QUESTIONS = [q for q, _ in QA] + ["what is the capital of Peru?", "who wrote Hamlet?"]


@pytest.fixture(scope="module")
def hf_reader(tiny_model_dir):
    return HFReader("tiny_hf", HubModel("tiny", "local", local_path=str(tiny_model_dir)),
                    dtype="float32", max_new_tokens=MAX_TOKENS)


@pytest.fixture(scope="module")
def backend(hf_reader):
    return ReaderBackend(hf_reader, model_id="tiny-qwen2-served")


@pytest.fixture(scope="module")
def server(backend):
    srv = FaultyServer(backend, retry_after="0", timeout_hold_s=30.0).start()
    yield srv
    srv.stop()


@pytest.fixture(autouse=True)
def _clean(request):
    if "server" in request.fixturenames:
        request.getfixturevalue("server").reset()


@pytest.fixture(scope="module")
def prompt():
    return load_prompt("memoryagentbench_factconsolidation")


def make_reader(url: str, **kw) -> OpenAIReader:
    args = dict(name="tiny_openai", base_url=url, model="tiny-alias", max_new_tokens=MAX_TOKENS,
                timeout_s=30.0, max_retries=MAX_RETRIES, backoff_s=0.01, max_backoff_s=0.05,
                concurrency=4)
    args.update(kw)
    return OpenAIReader(**args)


@pytest.fixture
def reader(server):
    with make_reader(server.url) as r:
        yield r


@pytest.fixture(scope="module")
def expected(hf_reader, prompt):
    """The local reader's own greedy answer per question (prepare + generate, no HTTP)."""
    return {q: hf_reader.generate(hf_reader.prepare(prompt, EVIDENCE, q)).raw for q in QUESTIONS}


def body_hash(reader: OpenAIReader, request) -> str:
    return hashlib.sha256(reader.payload(request)).hexdigest()


def assert_sent_once_per_fault(server: FaultyServer) -> None:
    """Each body reached the server at most 1 + (faults injected on it) times, and nothing
    was sent after the server answered it."""
    per_body: dict[str, list[str]] = {}
    for digest, outcome in server.log:
        per_body.setdefault(digest, []).append(outcome)
    for digest, outcomes in per_body.items():
        faults = [o for o in outcomes if o != "ok"]
        assert server.counts[digest] == len(outcomes) <= 1 + len(faults), outcomes
        assert "ok" not in outcomes[:-1], f"sent again after an answer: {outcomes}"


def test_clean_request_matches_served_model(server, reader, prompt, expected):
    req = reader.prepare(prompt, EVIDENCE, QUESTIONS[0])
    pred = reader.generate(req)
    assert pred.error is None and pred.request_id == req.id
    assert pred.raw == expected[QUESTIONS[0]]
    assert pred.model == "tiny-qwen2-served"  # the id the server returns, not our alias
    assert pred.finish_reason in {"stop", "length"}
    assert pred.usage["completion_tokens"] <= MAX_TOKENS and pred.usage["prompt_tokens"] > 0
    assert server.counts == Counter({body_hash(reader, req): 1})
    # Identity: the reader's pin, not the key, and no token ids for a remote reader.
    assert req.pin == {"backend": "openai", "base_url": server.url, "model": "tiny-alias", "extra_body": {}}
    assert req.generation == {"max_tokens": MAX_TOKENS, "temperature": 0.0}
    assert req.input_ids is None and req.prompt_version == prompt.version
    assert list(req.messages) == prompt.messages(EVIDENCE, QUESTIONS[0])


@pytest.mark.parametrize("faults", [
    ["500"], ["503"], ["429"], ["timeout"], ["drop"], ["badjson"], ["500", "drop", "429"],
], ids=lambda f: "+".join(f))
def test_transport_faults_are_retried_then_answered(server, prompt, expected, faults):
    timeout = 1.5 if "timeout" in faults else 30.0
    with make_reader(server.url, timeout_s=timeout) as reader:
        req = reader.prepare(prompt, EVIDENCE, QUESTIONS[0])
        server.inject(*faults)
        pred = reader.generate(req)
    assert pred.error is None and pred.raw == expected[QUESTIONS[0]]
    assert server.log == [(body_hash(reader, req), f) for f in faults + ["ok"]]
    assert server.counts[body_hash(reader, req)] == len(faults) + 1
    assert_sent_once_per_fault(server)


def test_retry_after_is_honoured_and_capped(server, reader, prompt):
    req = reader.prepare(prompt, EVIDENCE, QUESTIONS[1])
    slow = make_reader(server.url, backoff_s=0.001, max_backoff_s=5.0)
    server.inject("429:0.4")
    start = time.monotonic()
    assert slow.generate(req).error is None
    assert time.monotonic() - start >= 0.4  # waited as told, not the 1 ms backoff
    server.reset()
    server.inject("503:3600")  # an absurd Retry-After is capped at max_backoff_s (0.05 s)
    start = time.monotonic()
    assert reader.generate(req).error is None
    assert time.monotonic() - start < 10
    assert server.counts[body_hash(reader, req)] == 2
    slow.close()


@pytest.mark.parametrize("status", ["400", "401", "404", "422"])
def test_client_errors_are_not_retried(server, reader, prompt, status):
    req = reader.prepare(prompt, EVIDENCE, QUESTIONS[0])
    server.inject(status, "ok")
    pred = reader.generate(req)
    assert pred.raw is None and f"HTTP {status}" in pred.error and "non-retryable" in pred.error
    assert server.counts[body_hash(reader, req)] == 1
    assert list(server.faults) == ["ok"]  # the queued success was never asked for


def test_wellformed_200_without_choices_is_not_retried(server, reader, prompt):
    req = reader.prepare(prompt, EVIDENCE, QUESTIONS[0])
    server.inject("nochoices")
    pred = reader.generate(req)
    assert pred.raw is None and "without choices" in pred.error
    assert server.counts[body_hash(reader, req)] == 1


def test_exhausted_retries_become_an_error_prediction(server, reader, prompt):
    req = reader.prepare(prompt, EVIDENCE, QUESTIONS[2])
    server.inject(*["500"] * (MAX_RETRIES + 1), "ok")
    pred = reader.generate(req)
    assert pred.raw is None and pred.request_id == req.id
    assert f"after {MAX_RETRIES + 1} attempts" in pred.error and "HTTP 500" in pred.error
    assert server.counts[body_hash(reader, req)] == MAX_RETRIES + 1
    assert list(server.faults) == ["ok"]
    # Mixed transport faults exhaust the same budget.
    server.reset()
    server.inject("drop", "badjson", "429", "502")
    pred = reader.generate(req)
    assert pred.raw is None and "502" in pred.error
    assert_sent_once_per_fault(server)


def test_unreachable_server_is_an_error_not_an_exception(prompt):
    with socket.socket() as s:  # a port nobody listens on
        s.bind(("127.0.0.1", 0))
        port = s.getsockname()[1]
    with make_reader(f"http://127.0.0.1:{port}/v1", max_retries=2) as reader:
        pred = reader.generate(reader.prepare(prompt, EVIDENCE, QUESTIONS[0]))
        assert pred.raw is None and "ConnectError" in pred.error and "after 3 attempts" in pred.error
        with pytest.raises(RuntimeError, match="unreachable"):
            reader.preflight()


def test_the_generation_service_drives_the_api_reader_concurrently(tmp_path, server, reader, prompt, expected):
    from generation.service import GenerationService
    from generation.store import PredictionStore

    reqs = [reader.prepare(prompt, EVIDENCE, q) for q in QUESTIONS]
    server.inject("500", "drop")  # two of the six hit a fault on their first send
    seen = []
    service = GenerationService(reader, PredictionStore(tmp_path / "p.sqlite"), on_finished=lambda p: seen.append(p))
    preds = service.generate(reqs)
    assert [preds[r.id].raw for r in reqs] == [expected[q] for q in QUESTIONS]
    assert all(p.error is None for p in preds.values()) and sorted(p.request_id for p in seen) == sorted(preds)
    assert sum(server.counts.values()) == len(reqs) + 2
    assert set(server.counts) == {body_hash(reader, r) for r in reqs}
    assert_sent_once_per_fault(server)
    assert service.generate(reqs) == preds and sum(server.counts.values()) == len(reqs) + 2  # stored: none resent


def test_extra_body_is_identity_and_reaches_the_server(server, prompt, expected):
    plain = make_reader(server.url)
    nothink = make_reader(server.url, extra_body={"chat_template_kwargs": {"enable_thinking": False}})
    a = plain.prepare(prompt, EVIDENCE, QUESTIONS[0])
    b = nothink.prepare(prompt, EVIDENCE, QUESTIONS[0])
    assert a.id != b.id and b.pin["extra_body"] == {"chat_template_kwargs": {"enable_thinking": False}}
    assert b"chat_template_kwargs" in nothink.payload(b)
    pred = nothink.generate(b)
    assert pred.error is None and pred.raw == expected[QUESTIONS[0]]
    plain.close(), nothink.close()


def test_api_key_is_sent_but_never_part_of_identity(server, prompt, monkeypatch):
    monkeypatch.setenv("CMC_TEST_KEY", "sk-secret-123")
    reader = make_reader(server.url, api_key_env="CMC_TEST_KEY")
    req = reader.prepare(prompt, EVIDENCE, QUESTIONS[0])
    assert "sk-secret-123" not in canonical_json(req.to_json())
    assert "sk-secret-123" not in reader.payload(req).decode()
    assert reader._headers()["Authorization"] == "Bearer sk-secret-123"
    assert reader.preflight() == ["tiny-qwen2-served"]
    monkeypatch.delenv("CMC_TEST_KEY")
    assert "Authorization" not in reader._headers()
    reader.close()


class _Scripted:
    """A backend that returns fixed answers: content edge cases a tiny model won't produce."""

    model_id = "scripted"

    def __init__(self, texts):
        self.texts = list(texts)

    def complete(self, messages, max_tokens, chat_template_kwargs=None):
        return Completion(self.texts.pop(0), "stop", 3, 1)


def test_answer_content_is_never_retried(prompt):
    answers = ["", "<think>\nthe pool says Rome\n</think>\n\nRome", "I don't know", "Paris"]
    with FaultyServer(_Scripted(answers)) as srv, make_reader(srv.url) as reader:
        req = reader.prepare(prompt, EVIDENCE, QUESTIONS[0])
        first = reader.generate(req)
        assert first.raw == "" and first.error is None  # empty answer: content, kept, not retried
        assert reader.generate(req).raw == "Rome"  # leading think block stripped
        assert reader.generate(req).raw == "I don't know"
        assert srv.counts[body_hash(reader, req)] == 3 and all(o == "ok" for _, o in srv.log)


def test_reader_configs_instantiate(monkeypatch):
    from hydra.utils import instantiate

    monkeypatch.delenv("HY4_BASE_URL", raising=False)
    monkeypatch.setenv("OPENAI_BASE_URL", "http://127.0.0.1:9999/v1")
    from tests.conftest import compose_config

    hy4 = instantiate(compose_config("reader=hy4_preview").reader)  # composed: it inherits the openai reader
    assert isinstance(hy4, OpenAIReader) and hy4.name == "hy4_preview"
    assert (hy4.model, hy4.api_key_env, hy4.temperature, hy4.max_new_tokens) == ("hy4-preview", "HY4_API_KEY", 0.0, 64)
    assert hy4.base_url == "https://api.example.invalid/v1"
    assert hy4.pin["extra_body"] == {"chat_template_kwargs": {"enable_thinking": False}}
    assert type(hy4.pin["extra_body"]) is dict  # plain JSON, not a DictConfig
    generic = instantiate(compose_config("reader=openai").reader)
    assert generic.base_url == "http://127.0.0.1:9999/v1" and generic.model == "served-model"


def test_cli_backend_from_a_model_folder(tiny_model_dir):
    backend = load_backend(model_dir=tiny_model_dir, dtype="float32")
    assert backend.model_id == Path(tiny_model_dir).name
    assert backend.reader.source.pin == {"repo": Path(tiny_model_dir).resolve().name, "revision": "local",
                                         "local_sha256": folder_sha256(Path(tiny_model_dir))}
    with pytest.raises(ValueError, match="exactly one"):
        load_backend()


def test_presets_set_one_answer_cap_for_every_backend_and_refuse_an_input_cap(monkeypatch):
    """table5's 32-token answers reach the API as max_tokens; table3's 4,096-token input cap
    cannot be honoured without a tokenizer, so the reader says so instead of ignoring it."""
    from hydra.utils import instantiate

    from tests.conftest import compose_config

    monkeypatch.setenv("OPENAI_BASE_URL", "http://127.0.0.1:9999/v1")
    reader = instantiate(compose_config("experiment=table5", "reader=openai").reader)
    assert reader.generation["max_tokens"] == 32
    with pytest.raises(Exception, match="cannot cap input at 4096 tokens") as info:
        instantiate(compose_config("experiment=table3", "reader=openai").reader)
    assert "transformers reader" in str(info.value)
