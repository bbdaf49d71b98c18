"""`span_order: subject_first` (issue 38): the constrained lines grammar starts each object
after its subject's last word, so the one reply the `any` grammar still lets through to the
validator, an entity given as both subject and object, cannot be decoded; the default keeps
every grammar and fingerprint as it was. Checked against the grammar's definition span pair by
span pair, and by decoding on the tiny model (transformers and llama.cpp)."""
from __future__ import annotations

import random

import pytest

from cmc.frontends.llm import LLMFrontend
from cmc.frontends.reply_grammar import _words, json_schema, lines_grammar
from cmc.records import Record
from tests.conftest import LLAMA_CPP
from tests.frontends.oracle import served_extractor, work_dirs
from tests.frontends.test_constrained import BATCHES, RECORDS, accepts, hf, run_batches  # noqa: F401 (fixture)
from tests.readers.tiny_model import FACTS

TRICKY = ["Apple Inc. was founded by Steve Jobs.", "The capital of United States of America is Washington, D.C.",
          "Ok then.", "a | b c d"]


def frontend(tmp_path, **kw) -> LLMFrontend:
    return LLMFrontend(served_extractor("http://127.0.0.1:9"), **work_dirs(tmp_path), reply_format="lines", **kw)


def word_spans(text: str) -> list[tuple[int, int, str]]:
    """(first word, last word, text) of every run of words, without crossing a '|'."""
    words = _words(text)
    return [(i, j, text[words[i][0]:words[j][1]]) for i in range(len(words)) for j in range(i, len(words))
            if "|" not in text[words[i][0]:words[j][1]]]


def test_the_object_must_start_after_the_subject_ends(hf):
    """For sampled pairs of spans of each record: the ordered grammar takes the line exactly
    when the object's first word comes after the subject's last; the `any` grammar takes every
    pair (so the order is the only thing the option adds)."""
    pick = random.Random(38)
    for pos, text in enumerate(FACTS[:8] + TRICKY, 1):
        record = [Record(pos, text)]
        ordered, free = lines_grammar(record, "subject_first"), lines_grammar(record)
        found = word_spans(text)
        pairs = [(s, o) for s in found for o in found]
        for (s_first, s_last, subject), (o_first, _, obj) in pick.sample(pairs, min(12, len(pairs))):
            line = f"{pos} | {subject} | rel | {obj}"
            assert accepts(hf, ordered, line) == (o_first > s_last), (text, line)
            assert accepts(hf, free, line), (text, line)


def test_a_period_inside_the_sentence_may_end_the_subject(hf):
    record = [Record(1, TRICKY[0])]
    ordered = lines_grammar(record, "subject_first")
    for line in ("1 | Apple Inc. | founded_by | Steve Jobs", "1 | Apple Inc | founded_by | Steve Jobs",
                 "1 | Apple | rel | Inc.", "1 | unresolved"):
        assert accepts(hf, ordered, line), line
    for line in ("1 | Steve Jobs | founded | Apple Inc.", "1 | Apple Inc. | rel | Apple Inc.",
                 "1 | Steve Jobs. | rel | Jobs", "1 | Apple Inc. | founded_by | Steve Jobs."):
        assert not accepts(hf, ordered, line), line


def test_a_record_of_one_word_has_no_fact_under_the_ordered_grammar(hf):
    ordered = lines_grammar([Record(1, "Ok.")], "subject_first")
    assert accepts(hf, ordered, "1 | no_fact") and not accepts(hf, ordered, "1 | Ok | rel | Ok")


def test_the_option_is_in_the_fingerprint_and_the_request_and_the_default_changes_neither(tmp_path):
    plain = frontend(tmp_path, constrained=True)
    assert frontend(tmp_path, constrained=True, span_order="any").frontend_id == plain.frontend_id
    ordered = frontend(tmp_path, constrained=True, span_order="subject_first")
    assert ordered.frontend_id != plain.frontend_id
    assert ordered.batch_request(RECORDS[:2], {}, {}).constraint == lines_grammar(RECORDS[:2], "subject_first")
    assert plain.batch_request(RECORDS[:2], {}, {}).constraint == lines_grammar(RECORDS[:2])


@pytest.mark.parametrize("kw, says", [
    ({"constrained": False, "span_order": "subject_first"}, "needs constrained: true"),
    ({"constrained": True, "span_order": "subject_first", "reply_format": "json"}, "reply_format='json'"),
    ({"constrained": True, "span_order": "object_first"}, "span_order must be one of any, subject_first"),
])
def test_an_order_no_grammar_enforces_is_refused_when_the_frontend_is_built(tmp_path, kw, says):
    with pytest.raises(ValueError, match=says):
        LLMFrontend(served_extractor("http://127.0.0.1:9"), **work_dirs(tmp_path), **{"reply_format": "lines", **kw})
    with pytest.raises(ValueError, match="needs reply_format lines"):
        json_schema(RECORDS[:2], "subject_first")


def test_transformers_ordered_replies_are_never_rejected(hf, tmp_path):
    bad, calls = run_batches(hf, tmp_path, "lines", constrained=True, span_order="subject_first")
    assert bad == 0, calls.replies


@LLAMA_CPP
def test_llama_cpp_ordered_replies_are_never_rejected(hf, tiny_model_dir, tmp_path):
    from readers.llamacpp import LlamaCppReader
    from tests.readers.tiny_gguf import TinyGGUFSource, write_tiny_gguf

    gguf = write_tiny_gguf(tiny_model_dir, tmp_path / "tiny-f32.gguf")
    cpp = LlamaCppReader("tiny_cpp", TinyGGUFSource(tiny_model_dir, gguf), max_new_tokens=160, n_threads=1)
    bad, calls = run_batches(cpp, tmp_path, "lines", constrained=True, span_order="subject_first")
    assert bad == 0, calls.replies
    for batch, raw in zip(BATCHES, calls.replies):  # and each reply is one the other engine's grammar takes
        assert accepts(hf, lines_grammar(batch, "subject_first"), raw + "\n"), raw
