"""The label screen of appendix B.3 and its least-favourable rescoring bound."""
from __future__ import annotations

import random

import pandas as pd
import pytest
from hydra.utils import instantiate

from analysis.screen import bound_table, flag_counts, least_favourable_bound, rescoring_bound, screen, screen_evidence
from cmc.frontends.grammar import GrammarFrontend
from cmc.graph import compile_memory
from cmc.read import CMCArm
from cmc.records import History, Question, Record
from tests.conftest import TEMPLATES

LINES = [
    "Alice is a citizen of Freedonia.",
    "The capital of Freedonia is Oldtown.",
    "The capital of Freedonia is Newtown.",               # Oldtown -> Newtown
    "Bob is a citizen of Sylvania.",
    "The capital of Sylvania is Marsh.",
    "Carol is married to Dave.",
    "Carol is married to Eve.",                           # Dave -> Eve
    "Frank is a citizen of Freedonia.",
    "Frank was born in the city of Oldtown.",             # Oldtown is also a current value here
    "The univeristy where Hank was educated is Vienna Academy.",
    "The headquarters of Vienna Academy is located in the city of Vienna.",
    "The headquarters of Vienna Academy is located in the city of Graz.",  # Vienna -> Graz
    "Ivan is a citizen of Ruritania.",
    "The capital of Ruritania is Greater Stavro.",
    "The capital of Ruritania is Zenda.",                 # Greater Stavro -> Zenda
]

# question id -> (text, hop, gold, flagged by equality, flagged by substring)
CASES = {
    "mh_old": ("What is the capital of the country Alice is a citizen of?", "mh", "Oldtown", True, True),
    "mh_new": ("What is the capital of the country Alice is a citizen of?", "mh", "Newtown", False, False),
    "mh_unreachable": ("What is the capital of the country Bob is a citizen of?", "mh", "Oldtown", False, False),
    "mh_current_elsewhere": ("What is the capital of the country Frank is a citizen of?", "mh", "Oldtown",
                             False, False),
    "mh_gold_inside_current": ("Where is the headquarters of the university where Hank was educated?", "mh",
                               "Vienna", True, False),
    "mh_gold_inside_earlier": ("What is the capital of the country Ivan is a citizen of?", "mh", "Stavro",
                               False, True),
    "sh_old": ("Who is Carol married to?", "sh", "the Dave.", True, True),  # normalized: articles, punctuation
    "sh_new": ("Who is Carol married to?", "sh", "EVE", False, False),
    "sh_no_anchor": ("Who is Zed married to?", "sh", "Dave", False, False),
}


@pytest.fixture(scope="module")
def synthetic():
    history = History("toy", "Facts, newer records have larger numbers.",
                      tuple(Record(i, text) for i, text in enumerate(LINES, start=1)))
    memory = compile_memory(history, GrammarFrontend(str(TEMPLATES)).extract(history))
    questions = [Question(qid, text, "toy", hop, "1k") for qid, (text, hop, *_) in CASES.items()]
    labels = {qid: (gold,) for qid, (_, _, gold, *_) in CASES.items()}
    return {"toy": memory}, questions, labels


def test_synthetic_memory_parses_every_line(synthetic):
    memories, _, _ = synthetic
    memory = memories["toy"]
    assert memory.unresolved == () and len(memory.extraction.triples()) == len(LINES)
    assert [e.object for e in memory.chains[("freedonia", "the_capital_of_is")]] == ["oldtown", "newtown"]


def test_the_screen_flags_exactly_the_superseded_references(synthetic):
    memories, questions, labels = synthetic
    evidence = screen_evidence(questions, memories, CMCArm().max_hops)
    flags = screen(evidence, labels).set_index("question_id")
    for qid, (*_, exact, substring) in CASES.items():
        assert flags.at[qid, "flagged"] == exact, qid
        assert flags.at[qid, "flagged_substring"] == substring, qid
    assert flags.at["mh_old", "earlier_keys"] == "(freedonia, the_capital_of_is, depth 1)"
    assert flags.at["sh_no_anchor", "selected_keys"] == 0


def test_earlier_and_current_values_are_normalized_surface_text(synthetic):
    memories, questions, _ = synthetic
    (hank,) = [e for e in screen_evidence(questions, memories) if e.question_id == "mh_gold_inside_current"]
    assert hank.anchors == ("hank",)
    assert hank.current_values == {"vienna academy", "graz"}
    assert hank.earlier_values == {"vienna"}
    assert [(k.subject, k.depth) for k in hank.keys] == [("hank", 0), ("vienna academy", 1)]


def test_reachability_follows_the_arms_hop_limit(synthetic):
    memories, questions, labels = synthetic
    flags = screen(screen_evidence(questions, memories, max_hops=1), labels).set_index("question_id")
    assert not flags.at["mh_old", "flagged"]  # the capital key sits at depth 1, beyond one hop
    assert flags.at["sh_old", "flagged"]


def test_flag_counts_by_hop(synthetic):
    memories, questions, labels = synthetic
    counts = flag_counts(screen(screen_evidence(questions, memories), labels)).set_index("hop")
    assert counts.loc["sh"].tolist() == [3, 1, 1]
    assert counts.loc["mh"].tolist() == [6, 2, 2]
    assert counts.loc["all"].tolist() == [9, 3, 3]


def test_bound_formula_reproduces_the_papers_numbers():
    assert rescoring_bound(313, 85, 26, 400) == pytest.approx(50.50)  # over prior read + refresh
    assert rescoring_bound(313, 83, 26, 400) == pytest.approx(51.00)  # over fact BM25
    with pytest.raises(ValueError):
        rescoring_bound(1, 0, 5, 4)


def _paper_items(b_unflagged: int, seed: int = 0) -> tuple[dict, dict, list]:
    """400 items, 26 flagged; on the 374 others A is right on 313 and B on b_unflagged."""
    rng = random.Random(seed)
    ids = [f"q{i}" for i in range(400)]
    flagged, unflagged = ids[:26], ids[26:]
    a = {q: float(i < 313) for i, q in enumerate(unflagged)}
    b_right = set(rng.sample(unflagged, b_unflagged))
    b = {q: float(q in b_right) for q in unflagged}
    for q in flagged:  # whatever the official scores on flagged items are
        a[q], b[q] = float(rng.random() < 0.5), float(rng.random() < 0.5)
    return a, b, flagged


def test_least_favourable_bound_equals_brute_force_rescoring():
    a, b, flagged = _paper_items(85)
    result = least_favourable_bound(a, b, flagged)
    assert (result["n"], result["n_flagged"], result["a_correct_unflagged"], result["b_correct_unflagged"]) == \
        (400, 26, 313, 85)
    assert result["lower_bound"] == pytest.approx(50.50)
    worst_a = {q: (0.0 if q in flagged else v) for q, v in a.items()}
    worst_b = {q: (1.0 if q in flagged else v) for q, v in b.items()}
    assert result["lower_bound"] == pytest.approx(100 * sum(worst_a[q] - worst_b[q] for q in a) / 400)
    assert result["lower_bound"] <= result["official_diff"]


def test_bound_table_reads_an_experiment_item_table():
    a, b, flagged = _paper_items(83, seed=1)
    items = pd.DataFrame([{"arm": arm, "question_id": q, "hop": "mh", "substring_em": s}
                          for arm, scores in (("cmc", a), ("fact_bm25", b)) for q, s in scores.items()]
                         + [{"arm": "cmc", "question_id": "sh0", "hop": "sh", "substring_em": 1.0}])
    table = bound_table(items, "cmc", ["fact_bm25", "absent_arm"], flagged + ["not_an_item"])
    assert table[["b", "n", "n_flagged", "lower_bound"]].values.tolist() == [["fact_bm25", 400, 26, 51.0]]


def test_screen_on_the_real_factconsolidation_graph(cfg, dataset, memories):
    arm = instantiate(cfg.arm)
    evidence = screen_evidence(dataset.questions, memories, arm.max_hops)
    flags = screen(evidence, instantiate(cfg.dataset).load_labels())  # labels after the evidence
    assert len(flags) == 800 and (flags["selected_keys"] > 0).all()
    counts = flag_counts(flags).set_index("hop")
    print("\n" + counts.to_string())
    # Measured (not the paper's definition, which is not given precisely): equality flags
    # 7 + 27; the substring variant gives 7 + 26, the paper's counts.
    assert counts.loc["sh", ["flagged", "flagged_substring"]].tolist() == [7, 7]
    assert counts.loc["mh", ["flagged", "flagged_substring"]].tolist() == [27, 26]
    differ = flags[flags["flagged"] != flags["flagged_substring"]]["question_id"].tolist()
    assert differ == ["factconsolidation_mh_262k_no79"]
