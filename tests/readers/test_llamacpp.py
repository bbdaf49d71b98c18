"""The llama.cpp reader on the real 0.5B GGUF: it is fed exactly the token ids the harness
fixes (llama.cpp's own tokenizer agrees), greedy output is reproducible across processes,
reusing the KV of a shared prefix gives the tokens of a cold run, and a whole run through
run.py seals and scores. Skipped only where llama-cpp-python is not installed."""
from __future__ import annotations

import json
import subprocess
import sys
from functools import lru_cache
from pathlib import Path

import pandas as pd
import pytest

from common.configurable import instantiate_known
from common.errors import DataError
from common.prompt import Prompt, load_prompt
from provenance.bundle import verify_seal
from readers.hf import common_prefix_len
from readers.llamacpp import LlamaCppReader
from tests.conftest import LLAMA_CPP, PARQUET, ROOT, compose_config

needs_llama = LLAMA_CPP  # skipped only where llama-cpp-python is absent and CI is not set
READER = "qwen25_coder_05b_llamacpp"
# One thread: under pytest -n 2 other tests share the CPU, and llama.cpp's threads spin at
# every op barrier (2 threads on 2 busy cores decoded 0.4 tok/s, 1 thread 12.8).
THREADS = "reader.n_threads=1"


@lru_cache(maxsize=None)
def history_6k() -> tuple[list[str], list[str]]:
    """The 6K FactConsolidation history's fact lines and its single-hop questions."""
    frame = pd.read_parquet(PARQUET)
    row = frame[frame["metadata"].map(lambda m: m["source"]) == "factconsolidation_sh_6k"].iloc[0]
    return row["context"].splitlines(), list(row["questions"])


def evidence(facts: int) -> str:
    """The first `facts` facts of the real history, with its header line (~19 tokens a fact)."""
    return "\n".join(history_6k()[0][:facts + 1])


def question(i: int) -> str:
    return history_6k()[1][i]


@pytest.fixture(scope="module")
def prompt() -> Prompt:
    return compose_prompt()


def compose_prompt() -> Prompt:
    return load_prompt(compose_config().prompt)


def make_reader(**overrides: object) -> LlamaCppReader:
    cfg = compose_config(f"reader={READER}", THREADS, *(f"reader.{k}={v}" for k, v in overrides.items())).reader
    return instantiate_known(cfg, "test")


@pytest.mark.parametrize("size", ["05b", "15b"])
def test_llamacpp_configs_read_the_same_model_as_the_transformers_ones(size: str) -> None:
    """Same model node, so both engines read the same verified GGUF (and one tokenizer);
    building the reader imports nothing optional and loads nothing."""
    hf = compose_config(f"reader=qwen25_coder_{size}").reader  # composed: both inherit conf/model/*_gguf.yaml
    cpp = compose_config(f"reader=qwen25_coder_{size}_llamacpp").reader
    assert cpp._target_ == "readers.llamacpp.LlamaCppReader" and cpp.name == f"qwen25_coder_{size}_llamacpp"
    assert cpp.model == hf.model and cpp.max_input_tokens == hf.max_input_tokens
    assert cpp.max_new_tokens == hf.max_new_tokens
    reader = instantiate_known(compose_config(f"reader=qwen25_coder_{size}_llamacpp").reader, "test")
    assert isinstance(reader, LlamaCppReader) and reader._llm is None and reader.n_threads >= 1


@needs_llama
@pytest.mark.slow
def test_input_ids_equal_llama_cpp_tokenization_of_the_rendered_chat(prompt: Prompt) -> None:
    from llama_cpp import Llama

    reader, capped = make_reader(), make_reader(max_input_tokens=1000)
    vocab = Llama(model_path=reader.gguf, vocab_only=True, verbose=False)
    requests = [reader.prepare(prompt, evidence(15), question(0)),
                reader.prepare(prompt, evidence(455), question(1)),  # the whole 6K history
                capped.prepare(prompt, evidence(455), question(2))]  # cut to the input cap
    assert requests[2].evidence_truncated_tokens > 0 and len(requests[2].input_ids) <= 1000
    for request in requests:
        text = reader.tokenizer.apply_chat_template(list(request.messages), tokenize=False,
                                                    add_generation_prompt=True, enable_thinking=False)
        assert vocab.tokenize(text.encode(), add_bos=False, special=True) == list(request.input_ids)
    pin = requests[0].pin
    assert pin["engine"] == "llama.cpp" and pin["identity_scheme"] == 2 and "stored_dtype" not in pin
    transformers_request = instantiate_known(compose_config("reader=qwen25_coder_05b").reader, "test").prepare(
        prompt, evidence(15), question(0))
    assert transformers_request.input_ids == requests[0].input_ids, "both engines read the same tokens"
    assert transformers_request.messages == requests[0].messages and transformers_request.id != requests[0].id


def test_a_missing_llama_cpp_names_the_extra(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setitem(sys.modules, "llama_cpp", None)  # import llama_cpp now raises ImportError
    with pytest.raises(DataError, match=r"pip install \.\[llamacpp\]"):
        make_reader().pin


GENERATE_IN_A_FRESH_PROCESS = """
import json, sys
from tests.readers.test_llamacpp import compose_prompt, evidence, make_reader, question
reader = make_reader(max_new_tokens=16)
request = reader.prepare(compose_prompt(), evidence(15), question(3))
print(json.dumps(reader.generate(request).to_json()))
"""


@needs_llama
@pytest.mark.slow
def test_generation_is_identical_in_two_processes() -> None:
    runs = []
    for _ in range(2):
        done = subprocess.run([sys.executable, "-c", GENERATE_IN_A_FRESH_PROCESS], cwd=ROOT, capture_output=True,
                              text=True, timeout=600)
        assert done.returncode == 0, done.stderr[-2000:]
        runs.append(json.loads(done.stdout.splitlines()[-1]))
    first, second = runs
    assert first == second, "same request, same bytes"
    assert first["raw"] and first["error"] is None and first["usage"]["completion_tokens"] > 0
    runtime = first["runtime"]
    assert runtime["llama_cpp"] and runtime["n_threads"] >= 1 and "CPU" in runtime["system_info"]


@needs_llama
@pytest.mark.slow
def test_prefix_reuse_gives_the_tokens_of_cold_runs(prompt: Prompt) -> None:
    """One ~1,400-token evidence block, in one Llama: a question, the same question again
    (all its KV kept but the last token's), then another question (the KV kept up to where
    the questions differ, past two 512-token batches). Each must equal a cold run's 16 tokens."""
    warm, cold = make_reader(prefix_cache=True), make_reader(prefix_cache=False)
    block = evidence(70)
    requests = [warm.prepare(prompt, block, question(q)) for q in (4, 4, 5)]
    warm_ids = [warm.generate_ids(r.input_ids, 16) for r in requests]
    shared = common_prefix_len(requests[1].input_ids, requests[2].input_ids)
    assert shared > 2 * 512 and warm.prefill_tokens_total == sum(len(r.input_ids) for r in requests)
    assert warm.prefill_tokens_saved == len(requests[1].input_ids) - 1 + shared
    cold_ids = [cold.generate_ids(r.input_ids, 16) for r in requests[1:]]  # requests[0] is requests[1]
    assert cold.prefill_tokens_saved == 0
    assert warm_ids == [cold_ids[0], *cold_ids]


@needs_llama
@pytest.mark.slow
def test_run_py_end_to_end_seals_and_scores(tmp_path: Path) -> None:
    results = tmp_path / "results"
    done = subprocess.run(
        [sys.executable, "run.py", f"reader={READER}", THREADS, "population=quick", "population.per_cell=1", "arm=cmc",
         f"paths.results_dir={results}", f"paths.cache_dir={tmp_path / 'cache'}",
         f"hydra.run.dir={tmp_path / 'hydra'}"],
        cwd=ROOT, capture_output=True, text=True, timeout=1200)
    assert done.returncode == 0, done.stderr[-3000:]
    bundle = results / "bundles" / "adhoc" / f"factconsolidation-grammar-quick-cmc-{READER}"
    verify_seal(bundle)
    predictions = [json.loads(line) for line in (bundle / "predictions.jsonl").read_text().splitlines()]
    assert len(predictions) == 2 and all(p["error"] is None and p["raw"] for p in predictions)
    assert all(p["runtime"]["llama_cpp"] for p in predictions)
    manifest = json.loads((bundle / "manifest.json").read_text())
    assert manifest["reader_pin"]["engine"] == "llama.cpp"
    summaries = list(results.rglob("summary.json"))
    assert len(summaries) == 1 and json.loads(summaries[0].read_text())["n"] == 2
