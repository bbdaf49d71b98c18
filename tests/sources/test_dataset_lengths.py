"""`dataset.lengths`: a dataset cut to some history lengths (what a slow frontend is run on),
its questions with it, and its evidence kept apart from the whole dataset's."""
from __future__ import annotations

import pytest

from cmc.frontends.llm import corpus_of
from common.configurable import instantiate_known
from common.errors import DataError
from harness.packets import evidence_path
from tests.conftest import compose_config


def test_a_cut_dataset_keeps_those_histories_and_their_questions_only(dataset):
    cut = instantiate_known(compose_config("+dataset.lengths=[6k,32k]").dataset).load()
    assert sorted(cut.histories) == ["factconsolidation_32k", "factconsolidation_6k"]
    assert cut.questions == tuple(q for q in dataset.questions if q.length in ("6k", "32k"))
    assert len(cut.questions) == 400
    # the statements a direct LLM run extracts: the 6K history's all recur in the 32K one
    assert len(corpus_of(cut.histories.values())) == len(corpus_of([dataset.histories["factconsolidation_32k"]])) == 2310


def test_an_unknown_length_is_refused_naming_the_ones_there():
    with pytest.raises(DataError, match=r"dataset.lengths \['128k'\] not among the file's \['6k', '32k', '64k', '262k'\]"):
        instantiate_known(compose_config("+dataset.lengths=[6k,128k]").dataset).load()


def test_its_evidence_lives_apart_from_the_whole_datasets():
    whole, cut = compose_config("arm=cmc"), compose_config("arm=cmc", "+dataset.lengths=[6k,32k]")
    assert evidence_path(whole).parent.parent.name == "factconsolidation"
    assert evidence_path(cut).parent.parent.name == "factconsolidation-6k+32k"
    assert compose_config("population=short").population.lengths == ["6k", "32k"]
