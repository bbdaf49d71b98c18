"""Constrained decoding in the llama.cpp engine, on the tiny model written as a GGUF
(tests/readers/tiny_gguf.py): its grammar sampler keeps replies inside the grammar, and every
token it picks is one llguidance (the transformers engine's enforcer) accepts at that step."""
from __future__ import annotations

import dataclasses

import pytest

from common.calls import Constraint
from common.prompt import load_prompt
from readers.constrained import matcher
from readers.hf import HFReader
from readers.llamacpp import LlamaCppReader
from readers.models import HubModel
from tests.conftest import LLAMA_CPP
from tests.readers.test_constrained import QUESTIONS, SCHEMA, TWO_LITERALS, parses
from tests.readers.tiny_gguf import TinyGGUFSource, write_tiny_gguf
from tests.readers.tiny_model import EVIDENCE, PROMPT_NAME

pytestmark = LLAMA_CPP
PROMPT = load_prompt(PROMPT_NAME)
# A grammar with choices at several steps: a name, then one of two relations, then a number.
STEPS = Constraint("gbnf", 'root ::= ("Paris" | "Tokyo" | "John Smith") " | " ("capital" | "ceo") " | " [0-9]{1,3}')


@pytest.fixture(scope="module")
def engines(tiny_model_dir, tmp_path_factory):
    gguf = write_tiny_gguf(tiny_model_dir, tmp_path_factory.mktemp("gguf") / "tiny-f32.gguf")
    cpp = LlamaCppReader("tiny_cpp", TinyGGUFSource(tiny_model_dir, gguf), max_new_tokens=48, n_threads=1)
    hf = HFReader("tiny", HubModel("local/tiny", "none", local_path=str(tiny_model_dir)), dtype="float32",
                  device="cpu", max_new_tokens=48)
    return cpp, hf


def answer(reader, question: str, constraint: Constraint | None):
    return reader.generate(dataclasses.replace(reader.prepare(PROMPT, EVIDENCE, question), constraint=constraint))


def test_llama_cpp_says_only_what_the_grammar_allows(engines):
    cpp, _ = engines
    assert not all(answer(cpp, q, None).raw in ("Lyon", "Kyoto") for q in QUESTIONS)
    for question in QUESTIONS:
        got = answer(cpp, question, TWO_LITERALS)
        assert got.raw in ("Lyon", "Kyoto") and got.finish_reason == "stop"


def test_llama_cpp_replies_parse_under_a_json_schema(engines):
    cpp, _ = engines
    for question in QUESTIONS:
        assert parses(answer(cpp, question, Constraint.json_schema(SCHEMA)).raw)


@pytest.mark.parametrize("constraint", [TWO_LITERALS, STEPS, Constraint.json_schema(SCHEMA)],
                         ids=["two_literals", "steps", "json_schema"])
def test_every_token_llama_cpp_picks_is_one_llguidance_allows(engines, constraint):
    """Token-by-token validity across engines: llama.cpp's grammar sampler never picks a
    token the transformers engine's mask would have removed, and stops where it may end."""
    cpp, hf = engines
    for question in QUESTIONS:
        ids = cpp.prepare(PROMPT, EVIDENCE, question).input_ids
        tokens = cpp.generate_ids(ids, 48, (), constraint)
        eos = tuple(hf.model.generation_config.eos_token_id)
        check = matcher(hf.tokenizer, constraint, hf.model.config.vocab_size, eos)
        assert tokens[-1] in eos and check.consume_tokens(tokens[:-1]), (question, tokens, check.get_error())
        assert check.is_accepting()
        assert hf.generate(dataclasses.replace(hf.prepare(PROMPT, EVIDENCE, question), constraint=constraint)).raw
