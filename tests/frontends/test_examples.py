"""Extraction prompts with worked examples (issue 38 item 3): an exchange shown to the
extractor before its request, drawn from the source records only, and a `prompt` option that
picks such a prompt without touching the default fingerprints or run names; and
`subject_first`, which holds the extractor to the examples' convention that the subject is
the entity the record names first."""
from __future__ import annotations

import json
import re

import pytest

from cmc.frontends.grammar import GrammarFrontend
from cmc.frontends.llm import LLMFrontend, corpus_of
from cmc.frontends.llm_replies import parse_lines_reply, subject_named_first
from cmc.records import History, Record
from common import prompt as prompts
from common.errors import DataError
from common.prompt import load_prompt
from tests.conftest import TEMPLATES, compose_config
from tests.frontends.oracle import GrammarOracle, served_extractor, with_generation, work_dirs
from tests.readers.faulty_server import FaultyServer
from tests.readers.test_hf_reader import make_reader

EXAMPLE_PROMPTS = sorted(p.stem for p in prompts.PROMPT_DIR.glob("*.json") if "examples" in json.loads(p.read_text()))
LINES_EXAMPLE_PROMPTS = [name for name in EXAMPLE_PROMPTS if name.startswith("extract_lines")]


def example_records(user: str) -> list[Record]:
    return [Record(int(pos), text) for pos, text in re.findall(r"^(\d+)\. (.*)$", user, re.MULTILINE)]


def test_a_prompt_without_examples_keeps_its_version_and_two_messages():
    prompt = load_prompt("extract_lines")
    assert prompt.version == "1af61ae608137875"  # computed before prompts could carry examples
    assert [m["role"] for m in prompt.messages("1. A is B.", "q")] == ["system", "user"]


@pytest.mark.parametrize("name", EXAMPLE_PROMPTS)
def test_worked_examples_sit_between_the_system_message_and_the_request(name):
    prompt = load_prompt(name)
    messages = prompt.messages("1. The capital of Peru is Lima.", "Write the lines for record 1.")
    assert [m["role"] for m in messages] == ["system", *["user", "assistant"] * len(prompt.examples), "user"]
    assert messages[-1]["content"].startswith("1. The capital of Peru is Lima.")
    assert prompt.version != load_prompt("extract_lines").version


@pytest.mark.parametrize("name", LINES_EXAMPLE_PROMPTS)
def test_every_worked_example_is_a_valid_reply_drawn_from_the_source_records(name, dataset):
    """The shown reply must pass the validation a real reply meets (literal spans, one line a
    record), and its records must be statements of the corpus: no question, no answer."""
    statements = {r.text for r in corpus_of(dataset.histories.values())}
    assert LINES_EXAMPLE_PROMPTS, "no lines prompt with examples to check"
    for user, reply in load_prompt(name).examples:
        records = example_records(user)
        accepted, problems = parse_lines_reply(reply, records)
        assert not problems and len(accepted) == len(records) > 0
        assert all(len(accepted[r.pos].triples) == 1 for r in records)
        assert {r.text for r in records} <= statements


@pytest.mark.parametrize("example", [["user", "assistant"], {"user": "1. A is B."}, {"user": " ", "assistant": "x"}])
def test_a_malformed_example_is_refused_naming_the_file(tmp_path, monkeypatch, example):
    (tmp_path / "bad.json").write_text(json.dumps({"name": "bad", "system": "s", "query": "{question}", "joiner": "\n",
                                                   "examples": [example]}))
    monkeypatch.setattr(prompts, "PROMPT_DIR", tmp_path)
    with pytest.raises(DataError, match=r"bad\.json: cannot load prompt 'bad'"):
        load_prompt("bad")


def test_the_chat_template_renders_the_example_before_the_request(tiny_model_dir):
    """The transformers reader (and llama.cpp, which uses its tokens) feeds the model the
    example exchange as turns of the conversation, before the request."""
    reader = make_reader(tiny_model_dir)
    prompt = load_prompt(LINES_EXAMPLE_PROMPTS[0])
    request = reader.prepare(prompt, "1. The capital of Peru is Lima.", "Write the lines for record 1.")
    text = reader.tokenizer.decode(request.input_ids)
    (user, reply), = prompt.examples
    assert text.index(user) < text.index(reply) < text.index("1. The capital of Peru is Lima.")


def test_the_prompt_option_names_the_run_and_changes_only_its_own_fingerprint(tmp_path):
    default = compose_config("frontend=llm", "frontend.reply_format=lines").frontend
    assert default.name == "llm_lines_qwen25_coder_15b"
    named = compose_config("frontend=llm", "frontend.reply_format=lines", "frontend.prompt=extract_lines").frontend
    assert named.name == default.name  # the format's own prompt, spelled out: the same run
    examples = compose_config("frontend=hybrid", "frontend.reply_format=lines",
                              f"frontend.prompt={LINES_EXAMPLE_PROMPTS[0]}").frontend
    assert examples.name == f"hybrid_{LINES_EXAMPLE_PROMPTS[0].removeprefix('extract_')}_qwen25_coder_15b"
    json_examples = compose_config("frontend=llm", f"frontend.prompt={LINES_EXAMPLE_PROMPTS[0]}").frontend
    assert json_examples.name == f"llm_json_{LINES_EXAMPLE_PROMPTS[0].removeprefix('extract_')}_qwen25_coder_15b"
    make = lambda **kw: with_generation(LLMFrontend(served_extractor("http://127.0.0.1:9"),  # noqa: E731
                                                    **work_dirs(tmp_path), reply_format="lines", **kw))
    plain, spelled, shown = make(), make(prompt="extract_lines"), make(prompt=LINES_EXAMPLE_PROMPTS[0])
    assert plain.frontend_id == spelled.frontend_id != shown.frontend_id
    request = shown.batch_request([Record(1, "The capital of Peru is Lima.")], {}, {})
    assert [m["role"] for m in request.messages] == ["system", "user", "assistant", "user"]
    with pytest.raises(DataError, match="no_such_prompt"):
        make(prompt="no_such_prompt")


def test_a_triple_named_against_the_record_order_is_turned_round():
    record = Record(7, "The chief executive officer of Apple Inc. is Tim Cook.")
    accepted, _ = parse_lines_reply("7 | Tim Cook | chief_executive_officer | Apple Inc.", [record])
    turned, count = subject_named_first(accepted[7])
    (triple,) = turned.triples
    assert count == 1 and (triple.subject, triple.object) == ("Apple Inc.", "Tim Cook")
    assert record.text[slice(*triple.subject_span)] == "Apple Inc." and triple.subject_span[0] < triple.object_span[0]
    assert subject_named_first(turned) == (turned, 0)  # already in record order: untouched
    nested = Record(8, "The mayor of New York is York.")  # an object read inside its subject stays as read
    accepted, _ = parse_lines_reply("8 | New York | mayor | York", [nested])
    assert subject_named_first(accepted[8]) == (accepted[8], 0)


@pytest.fixture(scope="module")
def history(dataset) -> History:
    full = dataset.histories["factconsolidation_6k"]
    return History(full.history_id, full.header, full.records[:16])


def test_subject_first_undoes_an_extractor_that_names_the_object_first(history, tmp_path):
    """The oracle reads like the grammar (whose every FactConsolidation form names the subject
    first) but swaps subject and object of three statements in every answer: subject_first
    gives back the grammar's reading and counts the three; without it they stay swapped."""
    turned = (2, 5, 11)

    def run(subject_first: bool) -> LLMFrontend:
        with FaultyServer(GrammarOracle(turned=turned)) as srv:
            frontend = with_generation(LLMFrontend(served_extractor(srv.url), **work_dirs(tmp_path / str(subject_first)),
                                                   batch_records=8, reply_format="lines", subject_first=subject_first))
            frontend.prepare([history])
        return frontend

    pairs = lambda extraction: [[(t.subject, t.object) for t in r.triples] for r in extraction.records]  # noqa: E731
    reference = pairs(GrammarFrontend(str(TEMPLATES)).extract(history))
    fixed, left = run(True), run(False)
    assert pairs(fixed.extract(history)) == reference and fixed.metadata["subject_first_turned"] == len(turned)
    assert [i for i, (a, b) in enumerate(zip(pairs(left.extract(history)), reference), 1) if a != b] == list(turned)
    assert "subject_first_turned" not in left.metadata and fixed.frontend_id != left.frontend_id
    # extracted again in the same process from its journal: the count is of the extraction, not of replies seen
    fixed.frozen_path(corpus_of([history])).unlink()
    fixed._corpus = None
    fixed.prepare([history])
    assert fixed.metadata["subject_first_turned"] == len(turned) and fixed.metadata["cost"]["sent"] == 0
