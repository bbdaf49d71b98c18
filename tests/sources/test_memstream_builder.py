"""MQuAKE-MemStream builder (appendix F) on a hand-written fictional fixture.

The fixture holds twelve two-hop cases. With pools of five, cases 1 and 3 share pool 0 and
collide on the capital of Esterwyn (the audit must exclude one of them); cases 4 and 9 collide
on Kaldria's head of state from different pools (only the larger-pool sensitivity sees it);
case 1's rewrite repeats its single-hop assertion verbatim; cases 2 and 7 carry two rewrites.
"""
from __future__ import annotations

import copy
import json
import os
import random
from collections import Counter
from pathlib import Path

import pyarrow as pa
import pyarrow.parquet as pq
import pytest

from cmc.frontends.grammar import GrammarFrontend
from cmc.records import History
from common.errors import DataError
from common.io import read_jsonl, sha256_file
from harness.cli import main
from sources import memstream_builder as msb
from sources import memstream_cases

ROOT = Path(__file__).resolve().parents[2]
FIXTURE = ROOT / "tests" / "data" / "mquake_cf_fixture.json"
DATA_DIR = Path(os.environ.get("CMC_DATA_DIR", ROOT.parent / "shared" / "data")).resolve()
TEMPLATES = DATA_DIR / "mquake_templates" / "cloze_templates.json"
SEED, POOL, N = 20260907, 5, 10
OUTPUTS = ("mquake_memstream.parquet", "exclusions.jsonl", "sensitivity.json", "card.json")



@pytest.fixture(scope="module")
def raw() -> list[dict]:
    return json.loads(FIXTURE.read_text(encoding="utf-8"))


@pytest.fixture(scope="module")
def frontend() -> GrammarFrontend:
    return GrammarFrontend(str(TEMPLATES))


@pytest.fixture(scope="module")
def source() -> memstream_cases.Source:
    return memstream_cases.load_source(FIXTURE)


@pytest.fixture(scope="module")
def stream(source, frontend) -> msb.MemStream:
    return msb.build(source.cases, frontend, n_cases=N, pool_size=POOL, seed=SEED)


def hub_rows(raw: list[dict]) -> list[dict]:
    """The hub parquet layout: flattened targets, no nested `orig`, an extra `split` field."""
    rows = []
    for case in copy.deepcopy(raw):
        for rw in case["requested_rewrite"]:
            for name in ("target_new", "target_true"):
                target = rw.pop(name)
                rw[f"{name}_str"], rw[f"{name}_id"] = target["str"], target["id"]
        orig = case.pop("orig")
        case["new_triples_labeled"] = orig["new_triples_labeled"]
        case["split"] = {"100": ["edited"], "1000": ["edited"]}
        rows.append(case)
    return rows


def write_hub_parquet(raw: list[dict], path: Path) -> Path:
    pq.write_table(pa.Table.from_pylist(hub_rows(raw)), path)
    return path


def cli(src: Path, out: Path, *extra: str) -> int:
    """`cmc-harness build-memstream` in this process (tests patch the pin): its exit status."""
    try:
        return main(["build-memstream", "--src", str(src), "--out", str(out), "--cases", str(N),
                     "--pool-size", str(POOL), "--templates", str(TEMPLATES), *extra])
    except SystemExit as exc:  # a DataError: one line on stderr, exit status 2
        return exc.code


def assertion(stem: str, obj: str) -> str:
    return f"{stem} {obj}."


def pre_texts(case: dict) -> list[str]:
    return ([assertion(h["cloze"], h["answer"]) for h in case["single_hops"]]
            + [assertion(r["prompt"].format(r["subject"]), r["target_true"]["str"]) for r in case["requested_rewrite"]])


def post_texts(case: dict) -> list[str]:
    return ([assertion(h["cloze"], h["answer"]) for h in case["new_single_hops"]]
            + [assertion(r["prompt"].format(r["subject"]), r["target_new"]["str"]) for r in case["requested_rewrite"]])


def replay(raw: list[dict], n: int, pool_size: int, seed: int) -> list[tuple[str, list[str]]]:
    """An independent reading of the documented generator protocol: per pool, shuffle the
    pre block, shuffle the post block, then one rng.choice per case in released order."""
    rng = random.Random(seed)
    pools = []
    for start in range(0, n, pool_size):
        members = raw[start:min(start + pool_size, n)]
        pre = [t for c in members for t in pre_texts(c)]
        post = [t for c in members for t in post_texts(c)]
        rng.shuffle(pre)
        rng.shuffle(post)
        sh = [rng.choice(c["new_single_hops"])["question"] for c in members]
        context = "Here is a list of facts:\n" + "".join(f"{i}. {t}\n" for i, t in enumerate(pre + post))
        pools.append((context, sh))
    return pools


def rows_by_source(stream: msb.MemStream) -> dict[str, dict]:
    return {row["metadata"]["source"]: row for row in stream.rows()}


# --- reading both layouts and the pin ---------------------------------------------------------

def test_github_json_is_read_in_released_order(source, raw):
    assert source.layout == "github-json" and not source.pinned
    assert [c.case_id for c in source.cases] == [c["case_id"] for c in raw] == list(range(1, 13))
    assert source.cases[1].rewrites[1].target_new == "Yssel Harbour"
    assert source.cases[0].question == raw[0]["questions"][0]


def test_hub_parquet_normalises_to_the_same_cases(source, raw, tmp_path):
    hub = memstream_cases.load_source(write_hub_parquet(raw, tmp_path / "cf.parquet"))
    assert hub.layout == "hub-parquet"
    assert hub.cases == source.cases


def test_both_layouts_give_identical_outputs(raw, tmp_path):
    parquet = write_hub_parquet(raw, tmp_path / "cf.parquet")
    assert cli(FIXTURE, tmp_path / "a", "--sensitivity") == 0
    assert cli(parquet, tmp_path / "b", "--sensitivity") == 0
    for name in OUTPUTS[:3]:
        assert sha256_file(tmp_path / "a" / name) == sha256_file(tmp_path / "b" / name), name
    cards = [json.loads((tmp_path / d / "card.json").read_text()) for d in "ab"]
    assert [c["source"]["layout"] for c in cards] == ["github-json", "hub-parquet"]
    assert cards[0]["files"] == cards[1]["files"] and cards[0]["counts"] == cards[1]["counts"]


def test_file_with_the_pinned_name_but_wrong_hash_is_refused(raw, tmp_path):
    fake = write_hub_parquet(raw, tmp_path / "CF3k-00000-of-00001.parquet")
    with pytest.raises(DataError, match="does not match the pinned CF-3k file"):
        memstream_cases.load_source(fake)
    assert cli(fake, tmp_path / "out") == 2
    assert not (tmp_path / "out").exists()


def test_require_pin_refuses_an_unpinned_file():
    with pytest.raises(DataError, match="does not match the pinned"):
        memstream_cases.load_source(FIXTURE, require_pin=True)


def test_a_file_carrying_the_pinned_hash_is_recorded_as_pinned(monkeypatch, tmp_path):
    monkeypatch.setitem(memstream_cases.PIN, "sha256", sha256_file(FIXTURE))
    assert cli(FIXTURE, tmp_path / "out", "--require-pin") == 0
    card = json.loads((tmp_path / "out" / "card.json").read_text())
    assert card["source"]["pinned"] is True and card["source"]["sha256"] == sha256_file(FIXTURE)


def test_unpinned_source_is_recorded_as_such(tmp_path):
    assert cli(FIXTURE, tmp_path / "out") == 0
    card = json.loads((tmp_path / "out" / "card.json").read_text())
    assert card["source"]["pinned"] is False and card["source"]["sha256"] == sha256_file(FIXTURE)


def test_malformed_cases_fail_with_the_field_named(raw, tmp_path):
    broken = copy.deepcopy(raw)
    del broken[2]["requested_rewrite"][0]["target_new"]
    path = tmp_path / "broken.json"
    path.write_text(json.dumps(broken))
    with pytest.raises(DataError, match=r"case_id 3.*target_new_str"):
        memstream_cases.load_source(path)
    broken = copy.deepcopy(raw)
    broken[4]["case_id"] = 1
    path.write_text(json.dumps(broken))
    with pytest.raises(DataError, match="duplicate case_id 1"):
        memstream_cases.load_source(path)


# --- order, blocks, shuffles, serials --------------------------------------------------------------

def test_first_n_cases_in_released_order_pooled_consecutively(source, frontend, stream):
    assert [[c.case_id for c in p.cases] for p in stream.pools] == [[1, 2, 3, 4, 5], [6, 7, 8, 9, 10]]
    full = msb.build(source.cases, frontend, n_cases=12, pool_size=POOL, seed=SEED)
    assert [len(p.cases) for p in full.pools] == [5, 5, 2]
    # the first pools of a longer build are the shorter build: one generator, same draws
    assert [p.context() for p in full.pools[:2]] == [p.context() for p in stream.pools]
    with pytest.raises(DataError, match="file holds 12"):
        msb.build(source.cases, frontend, n_cases=13, pool_size=POOL)


def test_pre_edit_block_precedes_post_edit_block_with_the_right_assertions(stream, raw):
    for pool in stream.pools:
        blocks = [a.block for a in pool.records]
        n_pre = blocks.count("pre")
        assert blocks == ["pre"] * n_pre + ["post"] * (len(blocks) - n_pre)
        members = [c for c in raw if c["case_id"] in {case.case_id for case in pool.cases}]
        assert Counter(a.text for a in pool.records[:n_pre]) == Counter(t for c in members for t in pre_texts(c))
        assert Counter(a.text for a in pool.records[n_pre:]) == Counter(t for c in members for t in post_texts(c))
    assert stream.counts()["assertions"] == sum(4 + 2 * len(c["requested_rewrite"]) for c in raw[:N]) == 64


def test_rewrite_repeating_a_single_hop_keeps_both_observations(stream):
    texts = Counter((a.block, a.text) for a in stream.pools[0].records)
    assert texts[("pre", "Quellin Arbor is a citizen of Varnholt.")] == 2
    assert texts[("post", "Quellin Arbor is a citizen of Esterwyn.")] == 2
    origins = {a.origin for a in stream.pools[0].records if a.text == "Quellin Arbor is a citizen of Esterwyn."}
    assert origins == {"hop", "rewrite"}


def test_shuffles_and_sampling_follow_the_documented_generator_protocol(stream, raw):
    expected = replay(raw, N, POOL, SEED)
    rows = rows_by_source(stream)
    for k, (context, sh_questions) in enumerate(expected):
        assert stream.pools[k].context() == context
        assert rows[f"mquake_memstream_sh_pool{k}"]["questions"] == sh_questions


def test_seed_changes_the_order_but_not_the_content(source, frontend, stream):
    other = msb.build(source.cases, frontend, n_cases=N, pool_size=POOL, seed=SEED + 1)
    assert [p.context() for p in other.pools] != [p.context() for p in stream.pools]
    for a, b in zip(other.pools, stream.pools):
        assert Counter((r.block, r.text) for r in a.records) == Counter((r.block, r.text) for r in b.records)


def test_context_is_a_numbered_fact_list_with_serials_from_zero(stream):
    for pool in stream.pools:
        context = pool.context()
        assert context.startswith("Here is a list of facts:\n0. ") and context.endswith(".\n")
        history = History.parse(f"pool{pool.index}", context)
        assert history.header == "Here is a list of facts:"
        assert [r.pos for r in history] == list(range(len(pool.records)))
        assert [r.text for r in history] == [a.text for a in pool.records]


# --- questions ----------------------------------------------------------------------------------------

def test_each_case_gives_its_first_composite_and_one_sampled_post_edit_hop(stream, raw):
    by_id = {c["case_id"]: c for c in raw}
    rows = rows_by_source(stream)
    assert list(rows) == ["mquake_memstream_sh_pool0", "mquake_memstream_mh_pool0",
                          "mquake_memstream_sh_pool1", "mquake_memstream_mh_pool1"]
    for k, pool in enumerate(stream.pools):
        sh, mh = rows[f"mquake_memstream_sh_pool{k}"], rows[f"mquake_memstream_mh_pool{k}"]
        assert sh["context"] == mh["context"] == pool.context()
        assert sh["metadata"]["qa_pair_ids"] == [f"mquake_memstream_sh_pool{k}_case{c.case_id}" for c in pool.cases]
        for qid, question, answers in zip(sh["metadata"]["qa_pair_ids"], sh["questions"], sh["answers"]):
            hops = by_id[int(qid.rsplit("case", 1)[1])]["new_single_hops"]
            assert [[h["answer"], *h["answer_alias"]] for h in hops if h["question"] == question] == [answers]
        for qid, question, answers in zip(mh["metadata"]["qa_pair_ids"], mh["questions"], mh["answers"]):
            case = by_id[int(qid.rsplit("case", 1)[1])]
            assert question == case["questions"][0]
            assert answers == [case["new_answer"], *case["new_answer_alias"]]
    assert sum(len(r["questions"]) for s, r in rows.items() if "_sh_" in s) == N


def test_sampling_uses_both_hop_positions(source, frontend):
    picks = Counter(k for seed in range(20) for p in msb.build(source.cases, frontend, N, POOL, seed).pools
                    for k in p.sampled)
    assert set(picks) == {0, 1}


# --- the audit --------------------------------------------------------------------------------------

def test_audit_excludes_the_multi_hop_question_whose_hop_was_overwritten(stream):
    pool = stream.pools[0]
    capital = [(pos, a) for pos, a in enumerate(pool.records)
               if a.block == "post" and a.text.startswith("The capital of Esterwyn is ")]
    last_pos, winner = capital[-1]
    loser = 3 if winner.case_id == 1 else 1
    assert stream.excluded_cases == {loser}
    (row,) = stream.exclusions()
    values = {1: "Mirecourt", 3: "Pellam Rise"}
    assert row["case_id"] == loser and row["pool"] == 0 and row["reason"] == "overwritten_by_other_case"
    assert row["qa_pair_id"] == f"mquake_memstream_mh_pool0_case{loser}"
    assert row["key"] == {"subject": "Esterwyn", "relation": "the_capital_of_is", "subject_key": "esterwyn"}
    assert (row["expected"], row["found"]) == (values[loser], values[winner.case_id])
    assert row["overwriting_record"] == {"pos": last_pos, "text": winner.text, "case_id": winner.case_id,
                                         "block": "post", "origin": winner.origin, "index": winner.index}
    rows = rows_by_source(stream)
    assert f"mquake_memstream_mh_pool0_case{loser}" not in rows["mquake_memstream_mh_pool0"]["metadata"]["qa_pair_ids"]
    assert f"mquake_memstream_sh_pool0_case{loser}" in rows["mquake_memstream_sh_pool0"]["metadata"]["qa_pair_ids"]
    counts = stream.counts()
    assert (counts["sh_questions"], counts["mh_questions"], counts["exclusions"]) == (10, 9, 1)


def test_cross_pool_collision_is_left_alone_by_the_pooled_build(stream):
    assert not ({4, 9} & stream.excluded_cases)


def test_sensitivity_over_all_cases_counts_altered_cases(source, frontend):
    sens = msb.sensitivity(source.cases, frontend, SEED, POOL)
    assert sens["cases"] == 12 and sens["reported"] == "pooled"
    pooled, single = sens["pooled"], sens["single_pool"]
    assert (pooled["pools"], pooled["altered_cases"]) == (3, 1)
    assert (single["pools"], single["pool_size"], single["altered_cases"]) == (1, 12, 2)
    # exactly one side of each colliding pair is altered
    assert len(set(single["altered_case_ids"]) & {1, 3}) == 1 and len(set(single["altered_case_ids"]) & {4, 9}) == 1
    # the pooled sensitivity reproduces the named build's exclusions on its first pools
    assert set(pooled["altered_case_ids"]) == set(msb.build(source.cases, frontend, N, POOL, SEED).excluded_cases)


def test_grammar_parses_every_assertion_as_a_fact(stream, frontend):
    for pool in stream.pools:
        history = History.parse(f"pool{pool.index}", pool.context())
        extraction = frontend.extract(history)
        assert extraction.positions("facts") == [r.pos for r in history]


def test_an_assertion_the_grammar_cannot_parse_fails_loudly(raw, frontend, tmp_path):
    broken = copy.deepcopy(raw)
    broken[1]["new_single_hops"][0]["cloze"] = "Bram Castellane once wrote"
    path = tmp_path / "broken.json"
    path.write_text(json.dumps(broken))
    with pytest.raises(DataError, match=r"not parsed by the relation grammar: case 2 post: 'Bram Castellane once wrote"):
        msb.build(memstream_cases.load_source(path).cases, frontend, n_cases=N, pool_size=POOL)


def test_only_two_hop_cases_are_accepted_for_the_named_dataset(raw, frontend, tmp_path):
    longer = copy.deepcopy(raw)
    extra = {"question": "Which continent is Mirecourt located in?", "cloze": "Mirecourt is located in the continent of",
             "answer": "Nordhaven", "answer_alias": []}
    longer[0]["single_hops"].append(extra)
    longer[0]["new_single_hops"].append(extra)
    path = tmp_path / "three_hop.json"
    path.write_text(json.dumps(longer))
    cases = memstream_cases.load_source(path).cases
    with pytest.raises(DataError, match=r"not 2-hop \(case ids \[1\]\)"):
        msb.build(cases, frontend, n_cases=N, pool_size=POOL)
    assert msb.sensitivity(cases, frontend, SEED, POOL)["cases"] == 12  # the sensitivity run takes every case


# --- outputs ----------------------------------------------------------------------------------------

def test_outputs_are_factconsolidation_rows_with_a_card(tmp_path, stream):
    assert cli(FIXTURE, tmp_path / "out", "--sensitivity") == 0
    out = tmp_path / "out"
    assert sorted(p.name for p in out.iterdir()) == sorted(OUTPUTS)  # no temp files left behind
    table = pq.read_table(out / "mquake_memstream.parquet")
    assert table.schema.names == ["context", "questions", "answers", "metadata"]
    assert table.to_pylist() == stream.rows()
    assert read_jsonl(out / "exclusions.jsonl") == stream.exclusions()
    card = json.loads((out / "card.json").read_text())
    assert card["seed"] == SEED and card["pool_size"] == POOL and card["protocol"] == msb.PROTOCOL
    assert card["counts"] == stream.counts()
    assert {k: card["counts"][k] for k in ("cases", "pools", "sh_questions", "mh_questions", "exclusions")} == {
        "cases": 10, "pools": 2, "sh_questions": 10, "mh_questions": 9, "exclusions": 1}
    assert card["files"] == {n: sha256_file(out / n) for n in OUTPUTS[:3]}
    assert card["sensitivity"] == {"pooled": {"pool_size": POOL, "altered_cases": 1},
                                   "single_pool": {"pool_size": 12, "altered_cases": 2}}


def test_without_sensitivity_no_stale_sensitivity_file_survives(tmp_path):
    out = tmp_path / "out"
    assert cli(FIXTURE, out, "--sensitivity") == 0 and (out / "sensitivity.json").exists()
    assert cli(FIXTURE, out) == 0
    assert not (out / "sensitivity.json").exists()
    card = json.loads((out / "card.json").read_text())
    assert card["sensitivity"] is None and "sensitivity.json" not in card["files"]


def test_two_runs_are_byte_identical(tmp_path):
    for name in ("one", "two"):
        assert cli(FIXTURE, tmp_path / name, "--sensitivity") == 0
    for name in OUTPUTS:
        assert sha256_file(tmp_path / "one" / name) == sha256_file(tmp_path / "two" / name), name


# --- the real file, when a user has it --------------------------------------------------------------

@pytest.mark.skipif(not os.environ.get("MQUAKE_CF3K"), reason="set MQUAKE_CF3K to the CF-3k file to check the paper's counts")
def test_real_cf3k_reproduces_the_paper_counts(frontend, tmp_path):
    src = Path(os.environ["MQUAKE_CF3K"])
    if not src.is_file():
        pytest.skip(f"MQUAKE_CF3K={src} is not a file")
    source = memstream_cases.load_source(src)
    stream = msb.build(source.cases, frontend)
    counts = stream.counts()
    assert (counts["sh_questions"], counts["mh_questions"]) == (800, 798)
    assert counts["assertions"] == 5560
    assert counts["exclusions"] == 2
    sens = msb.sensitivity(source.cases, frontend)
    assert sens["cases"] == 3000
    assert sens["pooled"]["altered_cases"] == 431, (
        f"pools of 100 over 3,000 cases alter {sens['pooled']['altered_cases']} cases; "
        f"one pool of 3,000 alters {sens['single_pool']['altered_cases']} (paper: 431)")
