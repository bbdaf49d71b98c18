"""`object_position` (issue 38): where the constrained lines grammar lets each object lie
against its subject. `after_subject`: the object starts after the subject's last word;
`apart`: before or after, never sharing a word. Either way the one reply the `any` grammar
still lets through to the validator, an entity given as both subject and object, cannot be
decoded; the default keeps every grammar and fingerprint as it was. Checked against each
position's definition span pair by span pair, and by decoding on the tiny model."""
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
# Whether an object of words [o_first, o_last] may go with a subject of words [s_first, s_last].
ALLOWED = {"any": lambda s_first, s_last, o_first, o_last: True,
           "after_subject": lambda s_first, s_last, o_first, o_last: o_first > s_last,
           "apart": lambda s_first, s_last, o_first, o_last: o_first > s_last or o_last < s_first}


def frontend(tmp_path, **kw) -> LLMFrontend:
    return LLMFrontend(served_extractor("http://127.0.0.1:9"), **work_dirs(tmp_path), reply_format="lines", **kw)


def word_spans(text: str) -> list[tuple[int, int, str]]:
    """(first word, last word, text) of every run of words, without crossing a '|'."""
    words = _words(text)
    return [(i, j, text[words[i][0]:words[j][1]]) for i in range(len(words)) for j in range(i, len(words))
            if "|" not in text[words[i][0]:words[j][1]]]


@pytest.mark.parametrize("position", list(ALLOWED))
def test_each_grammar_takes_exactly_the_span_pairs_its_position_allows(hf, position):
    """Sampled pairs of spans of each record, half of them overlapping or out of order where
    the record has such pairs: the grammar takes the line exactly when the position allows it."""
    pick = random.Random(38)
    for pos, text in enumerate(FACTS[:8] + TRICKY, 1):
        grammar, found = lines_grammar([Record(pos, text)], position), word_spans(text)
        pairs = [(s, o) for s in found for o in found]
        refused = [(s, o) for s, o in pairs if not ALLOWED["apart"](s[0], s[1], o[0], o[1])]
        backward = [(s, o) for s, o in pairs if o[1] < s[0]]
        sample = pick.sample(pairs, min(8, len(pairs))) + pick.sample(refused, min(3, len(refused))) + \
            pick.sample(backward, min(3, len(backward)))
        for (s_first, s_last, subject), (o_first, o_last, obj) in sample:
            line = f"{pos} | {subject} | rel | {obj}"
            assert accepts(hf, grammar, line) == ALLOWED[position](s_first, s_last, o_first, o_last), (text, line)


@pytest.mark.parametrize("position", ["after_subject", "apart"])
def test_a_period_inside_the_sentence_may_end_either_slot(hf, position):
    grammar = lines_grammar([Record(1, TRICKY[0])], position)
    for line in ("1 | Apple Inc. | founded_by | Steve Jobs", "1 | Apple Inc | founded_by | Steve Jobs",
                 "1 | Apple | rel | Inc.", "1 | unresolved"):
        assert accepts(hf, grammar, line), line
    for line in ("1 | Apple Inc. | rel | Apple Inc.", "1 | Steve Jobs. | rel | Jobs",
                 "1 | Apple Inc. | founded_by | Steve Jobs."):
        assert not accepts(hf, grammar, line), line
    assert accepts(hf, grammar, "1 | Steve Jobs | founded | Apple Inc.") == (position == "apart")


@pytest.mark.parametrize("position", ["after_subject", "apart"])
def test_a_record_of_one_word_has_no_fact(hf, position):
    grammar = lines_grammar([Record(1, "Ok.")], position)
    assert accepts(hf, grammar, "1 | no_fact") and not accepts(hf, grammar, "1 | Ok | rel | Ok")


def test_the_position_is_in_the_fingerprint_and_the_request_and_the_default_changes_neither(tmp_path):
    plain = frontend(tmp_path, constrained=True)
    assert frontend(tmp_path, constrained=True, object_position="any").frontend_id == plain.frontend_id
    assert plain.batch_request(RECORDS[:2], {}, {}).constraint == lines_grammar(RECORDS[:2])
    ids = {plain.frontend_id}
    for position in ("after_subject", "apart"):
        front = frontend(tmp_path, constrained=True, object_position=position)
        assert front.batch_request(RECORDS[:2], {}, {}).constraint == lines_grammar(RECORDS[:2], position)
        ids.add(front.frontend_id)
    assert len(ids) == 3


@pytest.mark.parametrize("kw, says", [
    ({"constrained": False, "object_position": "apart"}, "needs constrained: true"),
    ({"constrained": True, "object_position": "apart", "reply_format": "json"}, "reply_format='json'"),
    ({"constrained": True, "object_position": "before"}, "object_position must be one of any, after_subject, apart"),
])
def test_a_position_no_grammar_enforces_is_refused_when_the_frontend_is_built(tmp_path, kw, says):
    with pytest.raises(ValueError, match=says):
        LLMFrontend(served_extractor("http://127.0.0.1:9"), **work_dirs(tmp_path), **{"reply_format": "lines", **kw})
    with pytest.raises(ValueError, match="needs reply_format lines"):
        json_schema(RECORDS[:2], "apart")


@pytest.mark.parametrize("position", ["after_subject", "apart"])
def test_transformers_replies_are_never_rejected(hf, tmp_path, position):
    bad, calls = run_batches(hf, tmp_path, "lines", constrained=True, object_position=position)
    assert bad == 0, calls.replies


@LLAMA_CPP
@pytest.mark.parametrize("position", ["after_subject", "apart"])
def test_llama_cpp_replies_are_never_rejected(hf, tiny_model_dir, tmp_path, position):
    from readers.llamacpp import LlamaCppReader
    from tests.readers.tiny_gguf import TinyGGUFSource, write_tiny_gguf

    gguf = write_tiny_gguf(tiny_model_dir, tmp_path / "tiny-f32.gguf")
    cpp = LlamaCppReader("tiny_cpp", TinyGGUFSource(tiny_model_dir, gguf), max_new_tokens=160, n_threads=1)
    bad, calls = run_batches(cpp, tmp_path, "lines", constrained=True, object_position=position)
    assert bad == 0, calls.replies
    for batch, raw in zip(BATCHES, calls.replies):  # and each reply is one the other engine's grammar takes
        assert accepts(hf, lines_grammar(batch, position), raw + "\n"), raw
