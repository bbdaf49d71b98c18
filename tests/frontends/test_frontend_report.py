"""`cmc-harness frontend-report` end to end: a frozen direct extraction of the real 6K history
(made by the served grammar oracle with one statement it never answers) read against the
grammar frontend: the subset of histories found from the file, the one lost statement in
the agreement counts, and CMC evidence built with both frontends. An unresolved record is
shown to the reader in every packet of its history (cmc/read.py), so that one statement
changes every packet: none of its reader requests is the grammar run's."""
from __future__ import annotations

import pandas as pd

from cmc.frontends.grammar import GrammarFrontend
from cmc.frontends.llm import LLMFrontend, corpus_of
from harness.cli import main as cli
from tests.conftest import TEMPLATES
from tests.frontends.oracle import GrammarOracle, served_extractor, with_generation, work_dirs
from tests.readers.faulty_server import FaultyServer

HOPELESS = 7  # a statement the oracle never answers: unresolved in the extraction


def test_the_report_compares_a_frozen_extraction_with_the_grammar_and_builds_cmc_evidence(dataset, tmp_path):
    history = dataset.histories["factconsolidation_6k"]
    with FaultyServer(GrammarOracle(hopeless=HOPELESS)) as srv:
        frontend = with_generation(LLMFrontend(extractor=served_extractor(srv.url), name="llm_oracle", **work_dirs(tmp_path)))
        frontend.prepare([history])
    corpus = corpus_of([history])
    frozen = frontend.frozen_path(corpus)
    grammar = GrammarFrontend(str(TEMPLATES)).extract(corpus)
    facts = sum(r.status == "facts" for r in grammar.records)
    assert grammar.records[HOPELESS - 1].status == "facts"

    assert cli(["frontend-report", str(frozen), "--out", str(tmp_path / "tables")]) == 0

    (row,) = pd.read_csv(tmp_path / "tables" / "frontends.csv").to_dict("records")
    assert (row["histories"], row["frontend"], row["statements"]) == ("6k", "llm_oracle", len(corpus))
    assert (row["facts"], row["unresolved"]) == (facts - 1, 1)
    assert row["same_status"] == len(corpus) - 1
    assert row["both_facts"] == row["same_spans"] == row["same_triples"] == facts - 1
    assert row["calls"] == frontend.metadata["cost"]["calls"] > 0 and pd.isna(row["rules_kept"])

    coverage = pd.read_csv(tmp_path / "tables" / "frontends_coverage.csv")
    questions = len(dataset.questions_of(history.history_id))
    by = coverage.set_index(["frontend", "hop"])
    assert set(coverage["frontend"]) == {"grammar", "llm_oracle"} and set(coverage["histories"]) == {"6k"}
    assert by.loc["grammar", "n"].sum() == by.loc["llm_oracle", "n"].sum() == questions
    assert (by.loc["grammar", "same_packet"] == by.loc["grammar", "n"]).all()
    assert by.loc["llm_oracle", "same_packet"].sum() == 0  # record 7 rides along in every packet
    # the grammar's packets plus one record: gold can only be gained, here only where record 7 holds it
    gained = by.loc["llm_oracle", "gold_present"] - by.loc["grammar", "gold_present"]
    assert (gained >= 0).all()
    # ... and every packet one record longer, none cut at the budget
    assert (by.loc["llm_oracle", "median_chars"] > by.loc["grammar", "median_chars"]).all()
    assert by["truncated"].sum() == 0


def test_with_every_statement_read_the_packets_are_the_grammar_runs(dataset, tmp_path):
    history = dataset.histories["factconsolidation_6k"]
    with FaultyServer(GrammarOracle()) as srv:
        frontend = with_generation(LLMFrontend(extractor=served_extractor(srv.url), name="llm_oracle", **work_dirs(tmp_path)))
        frontend.prepare([history])
    assert cli(["frontend-report", str(frontend.frozen_path(corpus_of([history]))), "--out", str(tmp_path / "tables")]) == 0
    coverage = pd.read_csv(tmp_path / "tables" / "frontends_coverage.csv").set_index(["frontend", "hop"])
    assert (coverage.loc["llm_oracle", "same_packet"] == coverage.loc["llm_oracle", "n"]).all()
    assert (coverage.loc["llm_oracle", "gold_present"] == coverage.loc["grammar", "gold_present"]).all()
