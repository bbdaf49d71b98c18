"""Shared pieces of the method tests: the ports built from their configs, the scripted model
served over HTTP, and runs of the harness stages on the quick population's first question
of each hop (factconsolidation_mh_6k_no0, factconsolidation_sh_6k_no0)."""
from __future__ import annotations

from pathlib import Path
from typing import Any

import pytest

from arms.multicall import Call, Caller, Method, MethodAnswer
from common.configurable import instantiate_known
from common.io import read_jsonl
from provenance.bundle import read_bundle_jsonl
from readers.openai_api import OpenAIReader
from tests.conftest import compose_config
from tests.methods.scripted import ScriptedBackend
from tests.readers.faulty_server import FaultyServer

POPULATION = ("population=quick", "population.per_cell=1", "population.name=m2")
QIDS = ["factconsolidation_mh_6k_no0", "factconsolidation_sh_6k_no0"]


@pytest.fixture(scope="session")
def embeddings_dir(tmp_path_factory: pytest.TempPathFactory) -> Path:
    """One embedding cache for every method test (vectors are keyed by embedder and texts)."""
    return tmp_path_factory.mktemp("embeddings")


@pytest.fixture(scope="session")
def questions(dataset) -> dict[str, Any]:
    return {q.qid: q for q in dataset.questions}


@pytest.fixture(scope="session")
def memory_6k(memories):
    return memories["factconsolidation_6k"]


def build_method(arm: str, embeddings_dir: Path) -> Method:
    return instantiate_known(compose_config(f"arm={arm}", f"arm.cache_dir={embeddings_dir}").arm, "test")


@pytest.fixture(scope="session")
def mello(embeddings_dir: Path) -> Method:
    return build_method("mello", embeddings_dir)


@pytest.fixture(scope="session")
def gwalk(embeddings_dir: Path) -> Method:
    return build_method("gwalk", embeddings_dir)


@pytest.fixture
def scripted() -> FaultyServer:
    """The scripted model behind this repo's server; `server.backend` is the script."""
    server = FaultyServer(ScriptedBackend()).start()
    yield server
    server.backend.abandoned = True
    server.backend.release.set()
    server.stop()


def openai_reader(server: FaultyServer) -> OpenAIReader:
    return OpenAIReader(name="openai", base_url=server.url, model="scripted", api_key_env=None, max_retries=0,
                        concurrency=1)


def answer_directly(method: Method, question: Any, memory: Any, server: FaultyServer) -> tuple[MethodAnswer, list[Call]]:
    """One question through the method, each call sent to the served model as it comes."""
    reader = openai_reader(server)
    caller = Caller(reader, reader.generate, method.prompt_version)
    try:
        return method.answer(question, memory, caller), caller.calls
    finally:
        reader.close()


def scripted_reader(server: FaultyServer) -> tuple[str, ...]:
    return ("reader=openai", f"reader.base_url={server.url}", "reader.model=scripted", "reader.api_key_env=null",
            "reader.max_retries=0", "reader.concurrency=1")


def tiny_reader(model_dir: Path) -> tuple[str, ...]:
    return ("reader=local", f"reader.model.local_path={model_dir}", "reader.dtype=float32")


def run_overrides(results: Path, arm: str, reader: tuple[str, ...], embeddings_dir: Path, *extra: str) -> list[str]:
    """A run of `arm` over the two questions, its results under `results`."""
    return [f"arm={arm}", *reader, *POPULATION, f"paths.results_dir={results / 'results'}",
            f"paths.cache_dir={results / 'cache'}", f"arm.cache_dir={embeddings_dir}", *extra]


def bundle_path(results: Path, arm: str, reader: str) -> Path:
    return results / "results" / "bundles" / "adhoc" / f"factconsolidation-grammar-m2-{arm}-{reader}"


def scores_path(results: Path, arm: str, reader: str) -> Path:
    return results / "results" / "scores" / "adhoc" / f"factconsolidation-grammar-m2-{arm}-{reader}"


def bundle_files(bundle: Path) -> dict[str, bytes]:
    return {p.name: p.read_bytes() for p in sorted(bundle.iterdir())}


def scored(scores: Path) -> list[bool]:
    """Each question's substring_em, in the run's question order."""
    return [row["substring_em"] for row in read_jsonl(scores / "items.jsonl")]


def check_method_bundle(bundle, method: str, first_steps: list[str]) -> None:
    """One evidence row per question, its calls starting with `first_steps`; one request and
    prediction row per call."""
    evidence = read_bundle_jsonl(bundle, "evidence.jsonl")
    requests = read_bundle_jsonl(bundle, "requests.jsonl")
    predictions = read_bundle_jsonl(bundle, "predictions.jsonl")
    assert [row["question_id"] for row in evidence] == QIDS and all(row["arm"] == method for row in evidence)
    calls = [(row["question_id"], call) for row in evidence for call in row["calls"]]
    assert all([c["step"] for c in row["calls"][:len(first_steps)]] == first_steps for row in evidence)
    assert [(r["question_id"], {"step": r["step"], "request_id": r["request_id"]}) for r in requests] == calls
    assert [p["request_id"] for p in predictions] == [r["request_id"] for r in requests]
    assert all(r["completion"] and r["input_tokens"] > 0 for r in requests)
    assert all(p["error"] is None and isinstance(p["raw"], str) for p in predictions)
