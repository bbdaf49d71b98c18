"""The sparse BM25 must score exactly like rank_bm25.BM25Okapi, the reference it replaces."""
import numpy as np
from hypothesis import given, settings
from hypothesis import strategies as st
from rank_bm25 import BM25Okapi as Reference

from arms.bm25 import BM25Okapi
from arms.ranking import rank
from arms.retrieval import build_fact_index, fact_tokens
from cmc.normalize import key_tokens

words = st.sampled_from([f"w{i}" for i in range(12)])


@settings(max_examples=150, deadline=None)
@given(corpus=st.lists(st.lists(words, min_size=0, max_size=8), min_size=1, max_size=25),
       query=st.lists(words, min_size=0, max_size=6))
def test_scores_match_rank_bm25_on_generated_corpora(corpus, query):
    if not any(corpus):  # rank_bm25 divides by zero on an all-empty corpus
        return
    np.testing.assert_allclose(BM25Okapi(corpus).get_scores(query), Reference(corpus).get_scores(query), rtol=1e-12, atol=1e-12)


def test_scores_and_top100_match_rank_bm25_on_the_real_6k_history(dataset, memories):
    memory = memories["factconsolidation_6k"]
    index = build_fact_index(memory)
    reference = Reference([fact_tokens(memory, e) for e in index.facts])
    for question in dataset.questions_of("factconsolidation_6k")[:40]:
        query = key_tokens(question.text)
        ours, theirs = index.bm25.get_scores(query), reference.get_scores(query)
        np.testing.assert_allclose(ours, theirs, rtol=1e-10, atol=1e-10)
        assert rank(ours, index.positions, 100) == rank(np.asarray(theirs), index.positions, 100)


def test_ties_go_to_the_newer_record():
    scores = np.array([1.0, 2.0, 1.0, 2.0 + 1e-12])
    # equal scores after rounding: positions 3 > 1 and 9 > 5, so the newer record leads
    assert rank(scores, np.array([5, 1, 9, 3]), 4) == [3, 1, 2, 0]


def test_empty_corpus_scores_nothing():
    assert BM25Okapi([]).get_scores(["w1"]).shape == (0,)
    assert rank(BM25Okapi([]).get_scores(["w1"]), np.array([], dtype=np.int64), 100) == []
