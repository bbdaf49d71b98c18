"""Constrained decoding (issue 38): a request's Constraint enters its id only when set (every
unconstrained request keeps the id it had), and each engine enforces it: transformers through
llguidance, an OpenAI-compatible server through `response_format` (readers.serve decodes it
with the transformers engine). The tiny model's text is noise: the tests assert only that what
it says parses under the grammar, never what it says."""
from __future__ import annotations

import dataclasses
import json

import pytest

from common.calls import Constraint, Request
from common.errors import DataError
from common.prompt import load_prompt
from readers.hf import HFReader
from readers.models import HubModel
from readers.openai_api import OpenAIReader
from readers.serve import OpenAIServer, ReaderBackend
from readers.structured import response_constraint, response_format
from tests.readers.tiny_model import EVIDENCE, PROMPT_NAME, QA

PROMPT = load_prompt(PROMPT_NAME)
QUESTIONS = [q for q, _ in QA] + ["what is the capital of Peru?", "who wrote Hamlet?"]
# Two literals the trained answers are not: unconstrained, the model says neither.
TWO_LITERALS = Constraint("gbnf", 'root ::= "Lyon" | "Kyoto"')
SCHEMA = {"type": "object", "properties": {"answer": {"enum": ["Lyon", "Kyoto"]}, "sure": {"type": "boolean"}},
          "required": ["answer", "sure"], "additionalProperties": False}

# Ids these requests had before constraints existed (computed at commit 60d5507).
GOLDEN = [
    (Request("tiny", {"backend": "transformers", "dtype": "float32"}, "v1", ({"role": "user", "content": "hi"},),
             {"max_new_tokens": 8, "do_sample": False}, (1, 2, 3)),
     "ae44a8845f5e670e3a5c1acd81260fa8945de8be6af059c5c483a8af72ccc6f1"),
    (Request("tiny", {"backend": "openai"}, "v1", (), {"max_tokens": 8, "temperature": 0.0, "stop": ["\n"]}, None,
             completion="Q: x\nA:"),
     "b5f5b65272664dd74affbad57b3117696cdb2db67315b32ed7ee4d10719d185b"),
]


@pytest.mark.parametrize("request_, expected", GOLDEN)
def test_a_request_without_a_constraint_keeps_its_id(request_, expected):
    assert request_.id == expected and "constraint" not in request_.to_json()
    assert Request.from_json(request_.to_json()).id == expected


def test_a_constraint_enters_the_id_and_survives_a_round_trip():
    plain = GOLDEN[0][0]
    gbnf, schema = dataclasses.replace(plain, constraint=TWO_LITERALS), dataclasses.replace(
        plain, constraint=Constraint.json_schema(SCHEMA))
    assert len({plain.id, gbnf.id, schema.id}) == 3
    assert gbnf.to_json()["constraint"] == {"kind": "gbnf", "grammar": TWO_LITERALS.grammar}
    assert Request.from_json(gbnf.to_json()) == gbnf and Request.from_json(schema.to_json()).id == schema.id


def test_unknown_kinds_and_empty_grammars_are_refused():
    with pytest.raises(DataError, match="not one of"):
        Constraint("lark", "start: 'a'")
    with pytest.raises(DataError, match="non-empty"):
        Constraint("gbnf", " ")


@pytest.fixture(scope="module")
def hf_reader(tiny_model_dir):
    return HFReader("tiny", HubModel("local/tiny", "none", local_path=str(tiny_model_dir)), dtype="float32",
                    device="cpu", max_new_tokens=48)


def constrained(reader, question: str, constraint: Constraint):
    return reader.generate(dataclasses.replace(reader.prepare(PROMPT, EVIDENCE, question), constraint=constraint))


def parses(raw: str) -> bool:
    try:
        value = json.loads(raw)
    except ValueError:
        return False
    return (isinstance(value, dict) and set(value) == {"answer", "sure"} and value["answer"] in ("Lyon", "Kyoto")
            and isinstance(value["sure"], bool))


def test_transformers_says_only_what_the_grammar_allows(hf_reader):
    free = [hf_reader.generate(hf_reader.prepare(PROMPT, EVIDENCE, q)).raw for q in QUESTIONS]
    assert not all(answer in ("Lyon", "Kyoto") for answer in free)  # without it, it says other things
    for question in QUESTIONS:
        prediction = constrained(hf_reader, question, TWO_LITERALS)
        assert prediction.raw in ("Lyon", "Kyoto") and prediction.finish_reason == "stop"


def test_transformers_replies_parse_under_a_json_schema(hf_reader):
    free = [hf_reader.generate(hf_reader.prepare(PROMPT, EVIDENCE, q)).raw for q in QUESTIONS]
    assert not any(parses(answer) for answer in free)
    for question in QUESTIONS:
        prediction = constrained(hf_reader, question, Constraint.json_schema(SCHEMA))
        assert parses(prediction.raw), prediction.raw


def test_a_grammar_llguidance_cannot_read_is_a_data_error(hf_reader):
    with pytest.raises(DataError, match="llguidance"):
        constrained(hf_reader, QUESTIONS[0], Constraint("gbnf", "root ::= undefined_rule"))


def test_response_format_both_ways():
    schema = Constraint.json_schema(SCHEMA)
    assert response_constraint(response_format(schema)) == schema
    assert response_constraint(None) is None and response_constraint({"type": "text"}) is None
    assert response_constraint({"type": "json_object"}) == Constraint.json_schema({"type": "object"})
    assert isinstance(response_constraint({"type": "json_schema", "json_schema": "x"}), str)
    with pytest.raises(DataError, match="JSON schema constraint only"):
        response_format(TWO_LITERALS)


@pytest.fixture(scope="module")
def served(hf_reader):
    with OpenAIServer(ReaderBackend(hf_reader, model_id="tiny-served")) as server:
        with OpenAIReader("tiny_openai", server.url, "tiny-served", api_key_env=None, max_new_tokens=48,
                          max_retries=0) as reader:
            yield reader


def test_a_served_model_honours_response_format(served, hf_reader):
    for question in QUESTIONS:
        got = constrained(served, question, Constraint.json_schema(SCHEMA))
        assert got.error is None and parses(got.raw), got
        assert got.raw == constrained(hf_reader, question, Constraint.json_schema(SCHEMA)).raw  # the engine's answer
    body = json.loads(served.payload(dataclasses.replace(served.prepare(PROMPT, EVIDENCE, "q"),
                                                         constraint=Constraint.json_schema(SCHEMA))))
    assert body["response_format"]["json_schema"]["schema"] == SCHEMA
    assert "response_format" not in json.loads(served.payload(served.prepare(PROMPT, EVIDENCE, "q")))


def test_the_api_reader_refuses_a_grammar_and_the_server_a_bad_response_format(served):
    refused = constrained(served, QUESTIONS[0], TWO_LITERALS)
    assert refused.raw is None and "JSON schema constraint only" in refused.error
    request = served.prepare(PROMPT, EVIDENCE, QUESTIONS[0])
    body = {**json.loads(served.payload(request)), "response_format": {"type": "regex"}}
    response = served.client.post(f"{served._connect_url}/chat/completions", json=body)
    assert response.status_code == 400 and "response_format" in response.text
