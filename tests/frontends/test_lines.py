"""The compact reply format of the LLM frontends (`reply_format: lines`, issue 20): one line
per record ("3 | Peru | capital | Lima", "4 | unresolved"), read by the same validation as a
JSON entry, and the same loop (batches, repair, alignment) around it."""
from __future__ import annotations

from pathlib import Path

import pytest

from cmc.frontends.llm import LLMFrontend
from cmc.frontends.llm_replies import parse_lines_reply
from cmc.records import History, Record
from tests.conftest import compose_config
from tests.frontends.oracle import GrammarOracle, served_extractor, with_generation, work_dirs
from tests.readers.faulty_server import FaultyServer

RECORDS = [Record(3, "The capital of Peru is Lima."), Record(4, "He moved there."), Record(5, "Ok."),
           Record(6, "Ann was born in Rome and lives in Oslo.")]
BATCH = 8


def test_fact_and_status_lines_are_read_and_chatter_ignored():
    reply = ("Here are the lines:\n3 | peru | Capital | Lima\n3 | Peru | capital | Lima\n- 4 | unresolved |\n"
             "6 | Ann | born_in | Rome\n6 | Ann | lives_in | Oslo\n99 | no_fact\nDone.")
    accepted, problems = parse_lines_reply(reply, RECORDS)
    (triple,) = accepted[3].triples  # the case-blind copy keeps the record's spelling; duplicates merge
    assert (triple.subject, triple.relation, triple.object) == ("Peru", "capital", "Lima")
    assert accepted[4].status == "unresolved" and not accepted[4].triples
    assert [(t.relation, t.object) for t in accepted[6].triples] == [("born_in", "Rome"), ("lives_in", "Oslo")]
    assert problems == {5: "the record was not answered"}


@pytest.mark.parametrize(("line", "problem"), [
    ("3. The capital of Peru is Lima.", "is neither 'subject | relation | object' nor a status"),  # an echo
    ("3 | Peru | capital", "is neither"),
    ("3 | Lima | capital | Peru", None),  # valid spans, wrong direction: validation cannot tell
    ("3 | Republic of Peru | capital | Lima", "subject 'Republic of Peru' is not copied"),
    ("3 | Peru | capital | Cusco", "object 'Cusco' is not copied"),
    ("3 | facts", "needs a list of triples"),
])
def test_a_bad_line_is_rejected_with_its_reason(line, problem):
    accepted, problems = parse_lines_reply(line, RECORDS[:1])
    if problem is None:
        assert 3 in accepted and not problems
    else:
        assert not accepted and problem in problems[3]


def test_a_status_line_with_a_fact_line_for_the_same_record_is_rejected():
    accepted, problems = parse_lines_reply("3 | no_fact\n3 | Peru | capital | Lima", RECORDS[:1])
    assert not accepted and "status line came with other lines" in problems[3]


@pytest.fixture(scope="module")
def history(dataset) -> History:
    full = dataset.histories["factconsolidation_6k"]
    return History(full.history_id, full.header, full.records[:BATCH * 3])


def run_loop(history: History, tmp: Path, reply_format: str) -> tuple[LLMFrontend, GrammarOracle]:
    oracle = GrammarOracle(misquoted=BATCH + 3, hopeless=2 * BATCH + 2)
    with FaultyServer(oracle) as srv:
        frontend = with_generation(LLMFrontend(served_extractor(srv.url), **work_dirs(tmp / reply_format), batch_records=BATCH,
                               reply_format=reply_format))
        frontend.prepare([history])
    return frontend, oracle


def test_the_loop_gives_the_same_extraction_in_either_format(history, tmp_path):
    """The oracle answers each format with the same reading and the same scripted mistakes
    (a misquote repaired on its own, a record never answered): the two extractions agree
    record for record, over the same calls; only the prompts and fingerprints differ."""
    (lines, lines_oracle), (json_, json_oracle) = run_loop(history, tmp_path, "lines"), run_loop(history, tmp_path, "json")
    read = lambda f: [(r.pos, r.status, [(t.subject, t.relation, t.object) for t in r.triples])  # noqa: E731
                      for r in f._corpus.records]
    assert read(lines) == read(json_)
    assert read(lines)[2 * BATCH + 1][1] == "unresolved"
    assert lines_oracle.calls == json_oracle.calls == ["batch", "batch", "repair", "batch", "repair", "align"]
    assert all("Write the lines for record" in user for user in lines_oracle.users[:-1])
    assert lines.frontend_id != json_.frontend_id
    assert "lines_parser" in lines.decisive() and "lines_parser" not in json_.decisive()


def test_the_config_names_a_lines_run_apart_and_refuses_an_unknown_format(tmp_path):
    assert compose_config("frontend=llm").frontend.name == "llm_qwen25_coder_15b"
    assert compose_config("frontend=hybrid", "frontend.reply_format=lines").frontend.name == \
        "hybrid_lines_qwen25_coder_15b"
    with pytest.raises(ValueError, match="reply_format must be one of json, lines"):
        with_generation(LLMFrontend(served_extractor("http://127.0.0.1:9"), **work_dirs(tmp_path), reply_format="yaml"))
