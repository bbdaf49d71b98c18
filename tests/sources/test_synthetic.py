"""The synthetic update-stream generator: determinism, gold answers checked by an
independent resolver, templates the grammar parses, and the arms' evidence properties the
paper's claim rests on (hypothesis over the knobs)."""
from __future__ import annotations

import re

import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from arms.controls import PriorReadRefresh
from cmc.evidence import select_all
from cmc.frontends.grammar import GrammarFrontend
from cmc.graph import build_memories
from cmc.read import CMCArm
from common.configurable import instantiate_known
from common.errors import DataError
from common.io import canonical_json
from sources.synthetic import SyntheticDataset
from tests.conftest import TEMPLATES, compose_config

# --- an independent resolver: its own reading of the sentences and the question phrases ---

SENTENCES = {  # surface regex -> relation word; written here, not taken from the generator
    r"(.+) is employed by (.+)": "employer", r"(.+) is married to (.+)": "spouse",
    r"(.+) was born in the city of (.+)": "birthplace", r"(.+) is a citizen of (.+)": "citizenship",
    r"(.+) is a member of (.+)": "team", r"(.+) speaks the language of (.+)": "language",
    r"(.+) worked in the city of (.+)": "workplace",
    r"The headquarters of (.+) is located in the city of (.+)": "headquarters",
    r"The chief executive officer of (.+) is (.+)": "ceo", r"(.+) was founded by (.+)": "founder",
    r"(.+) is owned by (.+)": "owner", r"The head coach of (.+) is (.+)": "coach",
    r"(.+) is located in the country of (.+)": "country", r"(.+) is located in the continent of (.+)": "continent",
    r"(.+) is located in (.+)": "home", r"The chairperson of (.+) is (.+)": "chairperson",
    r"The twinned administrative body of (.+) is (.+)": "twin", r"The capital of (.+) is (.+)": "capital",
    r"The name of the current head of state in (.+) is (.+)": "head_of_state",
    r"The official language of (.+) is (.+)": "official_language",
}
PHRASES = {  # question noun phrase (prefix, suffix) -> relation word
    ("the employer of ", ""): "employer", ("the spouse of ", ""): "spouse", ("the birth city of ", ""): "birthplace",
    ("the country of citizenship of ", ""): "citizenship", ("the team of ", ""): "team",
    ("the language spoken by ", ""): "language", ("the city where ", " worked"): "workplace",
    ("the headquarters city of ", ""): "headquarters", ("the chief executive officer of ", ""): "ceo",
    ("the founder of ", ""): "founder", ("the owner of ", ""): "owner", ("the head coach of ", ""): "coach",
    ("the home city of ", ""): "home", ("the chairperson of ", ""): "chairperson", ("the country of ", ""): "country",
    ("the twin city of ", ""): "twin", ("the capital of ", ""): "capital", ("the head of state of ", ""): "head_of_state",
    ("the official language of ", ""): "official_language", ("the continent of ", ""): "continent",
}


def naive_state(context: str) -> dict[tuple[str, str], tuple[str, int]]:
    """Replay 'N. sentence.' lines in order; the last line for a (subject, relation) wins."""
    state = {}
    for line in context.split("\n")[1:]:
        if not line:
            continue
        serial, sentence = line.split(". ", 1)
        sentence = sentence[:-1]  # the final period
        for pattern, relation in sorted(SENTENCES.items(), key=lambda kv: -len(kv[0])):  # most literal text first
            match = re.fullmatch(pattern, sentence)
            if match:
                state[(match.group(1), relation)] = (match.group(2), int(serial))
                break
        else:
            raise AssertionError(f"no sentence form for {line!r}")
    return state


def naive_resolve(context: str, question: str) -> tuple[str, list[int]]:
    """Peel the question's noun phrases from the outside in, then walk the final state."""
    phrase = re.fullmatch(r"(?:Who|What) is (.+)\?", question).group(1)
    relations = []
    while True:
        peel = [(p, s, r) for (p, s), r in PHRASES.items() if phrase.startswith(p) and phrase.endswith(s)]
        if not peel:
            break
        prefix, suffix, relation = max(peel, key=lambda x: len(x[0]) + len(x[1]))
        relations.append(relation)
        phrase = phrase[len(prefix):len(phrase) - len(suffix)]
    state, entity, serials = naive_state(context), phrase, []
    for relation in reversed(relations):
        entity, serial = state[(entity, relation)]
        serials.append(serial)
    return entity, serials


def small(**knobs) -> SyntheticDataset:
    base = dict(depths=[1, 3, 6], update_rates=[0.0, 1.0], questions_per_cell=4, history_length=400,
                filler_entities=150)
    return SyntheticDataset(**{**base, **knobs})


# --- determinism and identity ---

def test_same_seed_same_bytes_other_seed_other_bytes():
    one, two, other = small(seed=7), small(seed=7), small(seed=8)
    assert canonical_json(one.rows()) == canonical_json(two.rows())
    assert one.pin == two.pin and one.pin["sha256"] != other.pin["sha256"]
    assert canonical_json(one.rows()) != canonical_json(other.rows())
    assert one.pin["generator"] == "cmc-synthetic/1" and one.pin["knobs"]["seed"] == 7


def test_a_cell_does_not_depend_on_the_rest_of_the_grid():
    alone = SyntheticDataset(depths=[3], update_rates=[1.0], questions_per_cell=4, history_length=400, filler_entities=150)
    assert alone.rows()[0] == next(r for r in small().rows() if r["metadata"]["source"] == "synthetic_mh_d3u100")


def test_rows_load_as_histories_and_questions_with_labels_apart():
    adapter = small()
    dataset = adapter.load()
    assert sorted(dataset.histories) == sorted(f"synthetic_d{d}u{u}" for d in (1, 3, 6) for u in ("000", "100"))
    assert {q.hop for q in dataset.questions} == {"sh", "mh"} and all(len(h) == 400 for h in dataset.histories.values())
    assert set(adapter.load_labels()) == set(adapter.load_evidence()) == {q.qid for q in dataset.questions}


# --- gold answers and evidence sets against the independent resolver ---

@settings(max_examples=25, deadline=None, suppress_health_check=[HealthCheck.too_slow])
@given(seed=st.integers(0, 10**6), rate=st.sampled_from([0.0, 0.3, 1.0]), updates=st.integers(1, 3),
       density=st.sampled_from([0.0, 1.0, 2.5]), position=st.sampled_from(["any", "early", "late"]))
def test_brute_force_resolver_agrees_with_every_gold_answer(seed, rate, updates, density, position):
    adapter = SyntheticDataset(seed=seed, depths=[1, 2, 4, 6], update_rates=[rate], questions_per_cell=3,
                               history_length=600, filler_entities=300, updates_per_key=updates, distractor_density=density,
                               answer_position=position)
    labels, evidence, truth = adapter.load_labels(), adapter.load_evidence(), adapter.load_truth()
    for row in adapter.rows():
        for qid, question in zip(row["metadata"]["qa_pair_ids"], row["questions"]):
            anchor_written = truth[qid]["anchor"]  # resolve from the true anchor (variants are off here)
            answer, serials = naive_resolve(row["context"], question)
            assert anchor_written in question
            assert (answer,) == labels[qid] and tuple(serials) == evidence[qid]


def test_grammar_frontend_parses_every_record_to_its_intended_triple():
    frontend = GrammarFrontend(str(TEMPLATES))
    adapter = small(distractor_density=2.0, updates_per_key=2, history_length=600, filler_entities=300)
    for cell in adapter.cells:
        for fact in cell.facts:
            parsed = frontend.parse(fact.pos, fact.text())
            assert parsed.status == "facts", fact.text()
            triple = parsed.triples[0]
            assert (triple.subject, triple.relation, triple.object) == fact.triple(), fact.text()


# --- the arms' evidence against the ground truth ---

def _recall(adapter: SyntheticDataset, arm) -> dict[str, float]:
    dataset = adapter.load()
    memories = build_memories(dataset, GrammarFrontend(str(TEMPLATES)))
    truth = adapter.load_evidence()
    return {e.question_id: len(set(truth[e.question_id]) & set(e.positions)) / len(truth[e.question_id])
            for e in select_all(arm, dataset, memories)}


KNOBS = dict(seed=st.integers(0, 10**6), depth=st.integers(1, 6), rate=st.sampled_from([0.0, 0.25, 0.5, 1.0]),
             redirect=st.booleans(), density=st.sampled_from([0.0, 0.5, 2.0]), variants=st.sampled_from([0.0, 0.5]),
             max_hops=st.integers(1, 6))


def _adapter(seed, depth, rate, redirect, density, variants) -> SyntheticDataset:
    return SyntheticDataset(seed=seed, depths=[depth], update_rates=[rate], questions_per_cell=4, history_length=500,
                            redirect=redirect, distractor_density=density, anchor_variant_rate=variants)


@settings(max_examples=30, deadline=None, suppress_health_check=[HealthCheck.too_slow])
@given(**KNOBS)
def test_cmc_holds_the_whole_evidence_set_when_depth_fits_and_the_anchor_is_named(
        seed, depth, rate, redirect, density, variants, max_hops):
    adapter = _adapter(seed, depth, rate, redirect, density, variants)
    recall, truth = _recall(adapter, CMCArm(max_hops=max_hops)), adapter.load_truth()
    for qid, share in recall.items():
        if truth[qid]["anchor_form"] == "name":
            # within the cap every hop's current record; beyond it exactly the first max_hops
            assert share == min(1.0, max_hops / depth)


@settings(max_examples=30, deadline=None, suppress_health_check=[HealthCheck.too_slow])
@given(**KNOBS)
def test_prior_read_refresh_loses_the_evidence_exactly_when_an_update_redirects_a_hop(
        seed, depth, rate, redirect, density, variants, max_hops):
    adapter = _adapter(seed, depth, rate, redirect, density, variants)
    recall, truth = _recall(adapter, PriorReadRefresh(max_hops=max_hops)), adapter.load_truth()
    for qid, share in recall.items():
        t = truth[qid]
        if t["anchor_form"] == "name" and depth <= max_hops:
            assert (share == 1.0) == (not t["redirected"])
            assert t["redirected"] <= redirect  # redirect=false never moves a next hop


def test_no_redirect_leaves_every_chain_hop_but_the_last_unchanged():
    truth = SyntheticDataset(depths=[4], update_rates=[1.0], redirect=False, questions_per_cell=5).load_truth()
    assert all(t["updated_hops"] == [4] and not t["redirected"] for t in truth.values())


def test_variant_anchors_are_not_graph_subjects():
    adapter = SyntheticDataset(depths=[2], update_rates=[0.0], anchor_variant_rate=1.0, questions_per_cell=8)
    memory = build_memories(adapter.load(), GrammarFrontend(str(TEMPLATES)))["synthetic_d2u000"]
    forms = set()
    for question in adapter.load().questions:
        forms.add(adapter.load_truth()[question.qid]["anchor_form"])
        assert memory.anchors.anchors(question.text) == ()
    assert forms and forms <= {"alias", "typo"}


def test_answer_position_places_the_answer_bearing_record():
    """Drawn times fix the order, so a record's rank lands near (not exactly in) its band."""
    for position, (low, high) in {"early": (0, 0.45), "middle": (0.2, 0.8), "late": (0.55, 1)}.items():
        adapter = SyntheticDataset(depths=[2], update_rates=[0.5], answer_position=position, questions_per_cell=10)
        positions = [t["answer_pos"] / 500 for t in adapter.load_truth().values()]
        assert all(low <= p <= high for p in positions), (position, positions)


# --- configuration and bad knobs ---

def test_the_config_composes_and_a_run_writes_evidence(tmp_path):
    cfg = compose_config("dataset=synthetic", "dataset.depths=[2]", "dataset.update_rates=[0.5]",
                         f"paths.results_dir={tmp_path}")
    adapter = instantiate_known(cfg.dataset)
    assert adapter.pin["knobs"]["depths"] == [2] and len(adapter.load().questions) == 10


@pytest.mark.parametrize("override, field", [
    ("dataset.depths=[7]", "dataset.depths"), ("dataset.update_rates=[1.5]", "dataset.update_rates"),
    ("dataset.history_length=20", "dataset.history_length"), ("dataset.relations=[spouse,nope]", "dataset.relations"),
    ("dataset.answer_position=middling", "dataset.answer_position"), ("dataset.redirect=maybe", "dataset.redirect"),
    ("dataset.relations=[capital,continent]", "dataset.relations"), ("dataset.questions_per_cell=0", "questions_per_cell"),
    ("dataset.update_rates=[0.5,0.501]", "update_rates"), ("dataset.filler_entities=1", "dataset.filler_entities"),
])
def test_bad_knobs_name_their_field(override, field):
    """Caught at compose time by the schema (a wrong type or choice) or by the generator."""
    with pytest.raises(DataError, match=re.escape(field)):
        instantiate_known(compose_config("dataset=synthetic", override).dataset).load()
