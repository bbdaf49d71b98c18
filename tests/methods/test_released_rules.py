"""The release's text rules as the ports apply them (arms/released.py, GWalk.start_entity)
give what the release's own functions give (tests/methods/release_oracle.py, copied from
mquake_utils.py) on the same strings: hand-written ones, generated ones, and the start
entity through a served model's real (stop-cut) completion."""
from __future__ import annotations

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from arms.multicall import Caller
from arms.released import STOP_DONE, chain_entities, drop_extra_blocks, final_answer, load_prompt_file
from tests.conftest import DATA_DIR
from tests.methods import release_oracle as release
from tests.methods.conftest import openai_reader
from tests.methods.scripted import Q_GOALIE, Q_OMF, Plan

TASK = load_prompt_file(DATA_DIR / "mquake_remastered_prompts", "MeLLo-prompt.txt")
BLOCK = "\n\nQuestion: Who wrote it?\nSubquestion: Who wrote it?\nGenerated answer: Ann.\n"
HAND_WRITTEN = [
    TASK + BLOCK + "Final answer: Ann.",  # five questions: nothing to drop
    TASK + BLOCK + "Final answer: Ann\n\nQuestion: And next?\nSubquestion: x",  # a sixth block is dropped
    TASK + BLOCK + "Final answer: Ann\n\nQuestion: A?\n\nQuestion: B?\nFinal answer: B",  # seventh too
    TASK + "\n\nQuestion: Q?\nFinal answer: \n",  # an empty final answer
    TASK + "\n\nQuestion: Q?\nFinal answer: x.y.\nmore",
    TASK + "\n\nQuestion: Q?\nSubquestion: s Question: inline Final answer: z",  # markers mid-line
    "Question: a Question: b Question: c Question: d Question: e Question: f Question: g",
    "",
]


@pytest.mark.parametrize("text", HAND_WRITTEN)
def test_drop_extra_blocks_and_final_answer_are_the_releases(text):
    assert drop_extra_blocks(text) == release.remove_extra_target_occurrences(text, "Question: ", 5)
    quit_, answer = release.able_to_quit(text, TASK)
    assert final_answer(text, TASK) == (answer if quit_ else None)


def test_the_rules_on_a_generation_that_runs_into_a_further_block():
    text = TASK + BLOCK + "Final answer: Ann.\n\nQuestion: Who is Ann?\nSubquestion: Who is Ann?"
    kept = drop_extra_blocks(text)
    assert kept == TASK + BLOCK + "Final answer: Ann."  # the block and the two newlines before it
    assert final_answer(kept, TASK) == "Ann" and final_answer(TASK + BLOCK, TASK) is None


PIECES = st.sampled_from(["Question: ", "Final answer: ", "x", ".", "\n", "\n\n", " ", "ab"])
TEXTS = st.lists(PIECES, max_size=30).map("".join)


@settings(deadline=None)  # a busy machine must not fail a pure function on time
@given(TEXTS)
def test_drop_extra_blocks_on_generated_text(text):
    for keep in (1, 5):
        assert drop_extra_blocks(text, keep=keep) == release.remove_extra_target_occurrences(text, "Question: ", keep)


@settings(deadline=None)  # a busy machine must not fail a pure function on time
@given(TEXTS, TEXTS)
def test_final_answer_on_generated_text(task, rest):
    quit_, answer = release.able_to_quit(task + rest, task)
    assert final_answer(task + rest, task) == (answer if quit_ else None)


@pytest.mark.parametrize("line", [
    '"Iron Throne->(creator)->(country of citizenship)->(official language)->answer"',
    '"Dear Prudence->(performer)->(director / manager)->(country of citizenship)->(continent)->answer"',
    '"Our Mutual Friend->(author)->(spouse)->(country of citizenship)->answer" Let\'s solve it: 1',
    "S-> (a) -> ( b ) ->x(c)y-> (d",  # spaces, a segment with text around its parentheses, an unclosed one
    "no chain at all", "", "->->", "(a)(b)",
])
def test_chain_entities_is_the_releases_extract_entities(line):
    assert chain_entities(line) == release.extract_entities(line)


def test_chain_entities_reads_the_release_prompts_own_chains():
    assert chain_entities('"Half-Life->(developer)->(chief executive officer)->(country of citizenship)->(capital)->answer"') \
        == ["developer", "chief executive officer", "country of citizenship", "capital"]


SEBALD_BORN = "In which city was W. G. Sebald born?"
SEBALD_SPOUSE = "What is the capital city of the country of citizenship of W. G. Sebald's spouse?"


@pytest.mark.parametrize("question, written, expected", [
    # The "." stop ends "W. G. Sebald)" at "W."; the release's [:-1] (meant for ")") leaves "W",
    # which widens over the initial "W. G." and stops at the space after it.
    (SEBALD_BORN, "W. G. Sebald)", "W. G."),
    (SEBALD_SPOUSE, "W. G. Sebald)", "W"),  # the first "W" of the question is that of "What"
    ("What is the capital of St. Lucia?", "St. Lucia)", "St. Lucia"),  # widened to the end, "?" dropped
    ("Who is Ada Lovelace's child?", "Ada Lovelace's)", "Ada Lovelace"),  # cut at the apostrophe
    ("Who founded Chanel?", "the founder of Chanel)", "the founder of Chanel"),  # not in the question: as written
    (Q_OMF, "Our Mutual Friend)", "Our Mutual Friend"),
    (Q_GOALIE, "goaltender)", "goaltender"),
])
def test_the_start_entity_is_the_releases_on_a_served_completion(scripted, gwalk, question, written, expected):
    scripted.backend.plans[question] = Plan(expected, (), entity_output=written)
    reader = openai_reader(scripted)
    caller = Caller(reader, reader.generate, gwalk.prompt_version)
    entity = gwalk.start_entity(question, caller)
    reader.close()
    (call,) = caller.calls
    assert call.step == "entity" and call.request.stop == (STOP_DONE,) and call.prediction.raw.count(".") <= 1
    assert entity == release.extract_entity_after_call(call.request.completion + call.prediction.raw, question)
    assert entity == expected
