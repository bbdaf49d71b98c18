"""Completion requests (raw text, no chat template), the multi-call methods' only kind of
call: one stop rule (`cut_at_stop`) in every engine, chat identities untouched by the new
field, and each engine's early stop giving the cut of a generation run to its end."""
from __future__ import annotations

from pathlib import Path

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from common.calls import Request, cut_at_stop
from common.configurable import instantiate_known
from common.errors import DataError
from common.io import canonical_json, sha256_text
from readers.hf import HFReader
from readers.models import HubModel
from readers.openai_api import OpenAIReader
from readers.serve import ReaderBackend
from tests.conftest import LLAMA_CPP, OFFLINE_SMALL, compose_config
from tests.readers.faulty_server import FaultyServer
from tests.readers.tiny_model import COMPLETIONS

# The tiny model is trained on this raw text (no chat template) to answer 'John Smith'
# (tokens 'J', 'ohn', ' Smith') and EOS, each token by a margin no CPU kernel or dtype moves
# (tiny_model.MIN_MARGIN): the stops below are chosen inside and across those tokens.
[(TEXT, REFERENCE)] = COMPLETIONS


@pytest.mark.parametrize("text, stops, expected", [
    ("Subquestion: x\nRetrieved fact: y", ["rieved fact:"], ("Subquestion: x\nRetrieved fact:", True)),  # stop kept
    ("a. b rieved fact: c.", ["rieved fact:", "."], ("a.", True)),  # the earliest end wins, whatever the list order
    ("abcd", ["bcd", "bc"], ("abc", True)),  # overlapping stops: the one that ends first
    ("no stop here", ["rieved fact:", "Done."], ("no stop here", False)),
    ("text", [], ("text", False)),
    ("text", [""], ("text", False)),  # an empty stop string is no stop
])
def test_cut_at_stop_rules(text, stops, expected):
    assert cut_at_stop(text, stops) == expected


ALPHABET = "ab .\n:"


@settings(deadline=None)  # a busy machine must not fail a pure function on time
@given(st.text(ALPHABET, max_size=30), st.lists(st.text(ALPHABET, max_size=4), max_size=3))
def test_cut_at_stop_keeps_the_prefix_up_to_the_first_completed_stop(text, stops):
    cut, found = cut_at_stop(text, stops)
    real = [s for s in stops if s]
    assert text.startswith(cut)
    assert found == any(s in text for s in real)
    if found:
        assert any(cut.endswith(s) for s in real)
        assert not any(s in cut[:-1] for s in real), "a stop string ended earlier"
    else:
        assert cut == text


def test_a_chat_requests_identity_is_what_it_was_before_completions():
    chat = Request("r", {"backend": "x"}, "v1", ({"role": "user", "content": "hi"},), {"max_new_tokens": 4}, (1, 2, 3))
    before = {"reader": "r", "pin": {"backend": "x"}, "prompt_version": "v1",
              "messages": [{"role": "user", "content": "hi"}], "generation": {"max_new_tokens": 4},
              "input_ids": [1, 2, 3]}  # the identity dict as it was before the `completion` field
    assert chat.identity == before and chat.id == sha256_text(canonical_json(before))
    assert Request.from_json(chat.to_json()) == chat and "completion" not in chat.to_json()
    completion = Request("r", {"backend": "x"}, "v1", (), {"max_new_tokens": 4}, (1, 2, 3), completion="hi")
    assert completion.identity == {**before, "messages": [], "completion": "hi"}
    assert Request.from_json(completion.to_json()) == completion
    assert completion.id != Request("r", {"backend": "x"}, "v1", (), {"max_new_tokens": 4}, (1, 2, 3)).id


@pytest.fixture(scope="module")
def hf(tiny_model_dir: Path) -> HFReader:
    return HFReader("local", HubModel("tiny", "local", local_path=str(tiny_model_dir)), dtype="float32")


@pytest.fixture(scope="module")
def uncapped(hf: HFReader):
    """The reference: the same text decoded to its end, no stop string (the trained answer)."""
    prediction = hf.generate(hf.prepare_completion(TEXT, "v", 40))
    assert (prediction.raw, prediction.finish_reason) == (REFERENCE, "stop")  # ended by EOS
    return prediction


STOPS = [["oh"], ["n S"], [" "], ["Smith", "oh"], ["J"], ["zz"],  # inside a token, across tokens, none found
         ["?J"], ["e?John"]]  # begun in the prompt (TEXT ends "?"): not in the continuation, so no stop


@pytest.mark.parametrize("stops", STOPS, ids=repr)
def test_the_hf_fast_path_stops_where_the_cut_of_the_whole_generation_ends(hf, uncapped, stops):
    request = hf.prepare_completion(TEXT, "v", 40, stops)
    assert request.completion == TEXT and request.messages == () and request.stop == tuple(stops)
    assert list(request.input_ids) == hf.tokenizer(TEXT)["input_ids"]  # no chat template
    prediction = hf.generate(request)
    cut, found = cut_at_stop(uncapped.raw, stops)  # the reference path: decode to the end, then cut
    assert (prediction.raw, prediction.finish_reason) == (cut, "stop")
    if found:  # stopped early, not decoded to the end and cut
        assert prediction.usage["completion_tokens"] < uncapped.usage["completion_tokens"]


@pytest.mark.parametrize("stops, expected", [([], ("John", "length")), (["oh"], ("Joh", "stop")),
                                             (["ohn"], ("John", "stop")), (["Smith"], ("John", "length"))])
def test_the_token_cap_reports_length_unless_a_stop_string_ended_the_text(hf, stops, expected):
    prediction = hf.generate(hf.prepare_completion(TEXT, "v", 2, stops))  # two tokens: 'J', 'ohn'
    assert (prediction.raw, prediction.finish_reason) == expected


def test_local_engines_refuse_sampling(hf):
    with pytest.raises(DataError, match="temperature=0.7: this engine decodes greedily only"):
        hf.prepare_completion(TEXT, "v", 8, temperature=0.7)
    cpp = instantiate_known(compose_config("reader=qwen25_coder_05b_llamacpp").reader, "test")
    with pytest.raises(DataError, match="qwen25_coder_05b_llamacpp: temperature=1.0"):
        cpp.prepare_completion(TEXT, "v", 8, temperature=1.0)


@pytest.mark.parametrize("stops", STOPS, ids=repr)
def test_the_openai_reader_on_v1_completions_returns_the_hf_readers_text(hf, stops):
    server = FaultyServer(ReaderBackend(hf, model_id="tiny")).start()
    reader = OpenAIReader(name="openai", base_url=server.url, model="tiny", api_key_env=None, max_retries=0)
    try:
        request = reader.prepare_completion(TEXT, "v", 40, stops)
        assert b'"prompt":' in reader.payload(request) and b'"messages"' not in reader.payload(request)
        assert b'"stop"' not in reader.payload(request)  # cut client side: the server drops what it matched
        served = reader.generate(request)
    finally:
        reader.close()
        server.stop()
    local = hf.generate(hf.prepare_completion(TEXT, "v", 40, stops))
    assert served.error is None and (served.raw, served.finish_reason) == (local.raw, local.finish_reason)
    assert sum(server.counts.values()) == 1


def a_stop_inside(text: str) -> str:
    """A stop string that occurs in `text` and ends about halfway through it, chosen from the
    text itself so the check never depends on what a real model happens to say."""
    middle = max(len(text) // 2, 3)
    return text[middle - 3:middle]


def check_early_stop_is_the_cut_of_the_whole_generation(reader, text: str) -> None:
    """One engine's own two paths: decoded to the token cap and cut at a stop found in that
    text, against the same request with the stop (the early stop)."""
    whole = reader.generate(reader.prepare_completion(text, "v", 12))
    stop = a_stop_inside(whole.raw)
    fast = reader.generate(reader.prepare_completion(text, "v", 12, [stop]))
    assert (fast.raw, fast.finish_reason) == (cut_at_stop(whole.raw, [stop])[0], "stop")
    assert fast.usage["completion_tokens"] < whole.usage["completion_tokens"], "stopped early, not cut afterwards"


@pytest.mark.slow
@LLAMA_CPP
@OFFLINE_SMALL
def test_llama_cpp_stops_early_at_the_cut_of_its_whole_generation():
    """No tiny GGUF exists in the tests (llama.cpp reads only GGUF): the 0.5B one that
    tests/readers/test_llamacpp.py reads. llama.cpp is fed the token ids the transformers
    reader renders for the same text, and its early stop is the cut of its own whole
    generation (the transformers reader's is checked on the tiny model above). The two
    engines' texts are not compared: llama.cpp's quantized kernels and transformers'
    de-quantized ones (bfloat16 or float32 by CPU) may pick another token."""
    cpp = instantiate_known(compose_config("reader=qwen25_coder_05b_llamacpp", "reader.n_threads=1").reader, "test")
    hf = instantiate_known(compose_config("reader=qwen25_coder_05b").reader, "test")  # its tokenizer only
    text = "Question: What is the capital city of France?\nAnswer: The capital city of France is"
    assert cpp.prepare_completion(text, "v", 12, [" is"]).input_ids == hf.prepare_completion(text, "v", 12).input_ids
    check_early_stop_is_the_cut_of_the_whole_generation(cpp, text)
