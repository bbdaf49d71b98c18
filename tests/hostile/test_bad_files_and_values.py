"""Bad files and values get one clear error naming the file or key, before anything is
sealed or scored, and leave what was written as it was."""
from __future__ import annotations

import json

import pytest

from common.configurable import instantiate_known
from common.errors import DataError
from common.io import read_json, read_jsonl
from harness.generate import run_prepare
from harness.runs import Run
from provenance.bundle import read_manifest
from provenance.vault import LabelVault
from tests.conftest import compose_config
from tests.hostile.conftest import left_unchanged
from tests.hostile.test_replay_untrusted import SOURCE, _tampered_bundle


@pytest.mark.parametrize("content, why", [
    (b'{"config": ', "not valid JSON"),
    (b"\xff\xfe{}", "not UTF-8"),
    (b"[1, 2]", "a manifest is a JSON object"),
])
def test_a_broken_manifest_names_the_file(tmp_path, content, why):
    (tmp_path / "manifest.json").write_bytes(content)
    with left_unchanged(tmp_path), pytest.raises(DataError, match=rf"manifest.json: .*{why}"):
        read_manifest(tmp_path)


def test_a_missing_file_and_a_bad_jsonl_line_are_named(tmp_path):
    with pytest.raises(DataError, match=r"nope.json: cannot be read"):
        read_json(tmp_path / "nope.json")
    (tmp_path / "rows.jsonl").write_text('{"a": 1}\n{"a": \n')
    with pytest.raises(DataError, match=r"rows.jsonl: line 2 is not JSON"):
        read_jsonl(tmp_path / "rows.jsonl")


@pytest.mark.parametrize("override, message", [
    ("arm.max_hops=1.5", r"config: arm\.max_hops = 1\.5: .*converted to Integer"),
    ("arm.budget_chars=lots", r"config: arm\.budget_chars = 'lots': .*converted to Integer"),
    ("arm.empty_fallback=latst_state", r"arm\.empty_fallback = 'latst_state': .*expected one of \[history, latest_state\]"),
    ("+arm.max_hopz=3", r"arm\.max_hopz is not a parameter of cmc\.read\.CMCArm \(its parameters: budget_chars, "),
    ("reader.dtype=float99", r"reader\.dtype = 'float99': .*expected one of \[auto, float32, bfloat16, float16\]"),
    ("population.per_cell=many", r"population\.per_cell = 'many'"),
])
def test_a_typo_in_a_value_or_a_key_fails_at_compose_time(override, message):
    """The structured schemas (harness/schemas.py) catch it before any stage runs."""
    with pytest.raises(DataError, match=message):
        compose_config("arm=cmc", override)


@pytest.mark.parametrize("override, key", [
    ("arm.max_hops=0", "max_hops must be an integer"),
    ("arm.budget_chars=-5", "budget_chars must be a positive integer"),
])
def test_a_value_of_the_right_type_out_of_range_is_one_data_error(override, key):
    with pytest.raises(DataError, match=rf"config: arm\.{key.split()[0]} = "):  # when the config is checked
        compose_config("arm=cmc", override)
    with pytest.raises(DataError, match=rf"arm: {key}"):  # and by the constructor, for a config built by hand
        instantiate_known(compose_config("arm=cmc", override, check=False).arm, "arm")


def test_an_empty_population_stops_before_anything_is_frozen(tmp_path):
    cfg = compose_config("arm=cmc", "population=quick", "population.lengths=[]", "population.name=none",
                         f"paths.results_dir={tmp_path}", f"paths.cache_dir={tmp_path / 'c'}")
    with pytest.raises(DataError, match="population 'none' selects no question"):
        run_prepare(cfg, Run(cfg))
    assert not (tmp_path / "work").exists()


@pytest.mark.parametrize("labels", [{}, "empty"])
def test_a_question_without_gold_is_named_and_nothing_is_scored(tmp_path, labels):
    bundle = _tampered_bundle(tmp_path, lambda manifest, bundle: None)
    ids = [json.loads(line)["question_id"] for line in (SOURCE / "predictions.jsonl").read_text().splitlines()]
    gold = {q: ("x",) for q in ids[1:]} | ({} if labels == {} else {ids[0]: ()})
    with left_unchanged(bundle), pytest.raises(DataError, match=rf"no gold answer for 1 question\(s\), e.g. \['{ids[0]}'\]"):
        LabelVault(lambda: gold).open(bundle)


def _parquet_with_context(path, context_cells, question: str = "q") -> None:
    import pyarrow as pa
    import pyarrow.parquet as pq

    raw = pa.array(context_cells, type=pa.binary())
    text = pa.Array.from_buffers(pa.string(), len(raw), raw.buffers())  # bytes stored as a string column, unchecked
    pq.write_table(pa.table({"context": text, "questions": [[question]] * len(raw), "answers": [[["a"]]] * len(raw),
                             "metadata": [{"source": "f_sh_6k", "qa_pair_ids": ["x"]}] * len(raw)}), path)


@pytest.mark.parametrize("question", ["", "   ", "\t\n"])
def test_an_empty_question_is_refused_naming_the_row(tmp_path, question):
    from common.io import sha256_file
    from sources.rows import RowDataset

    path = tmp_path / "rows.parquet"
    _parquet_with_context(path, [b"Facts:\n0. ok\n"], question=question)
    with left_unchanged(tmp_path), pytest.raises(DataError, match=r"rows.parquet: row 0: question 'x' has no text"):
        RowDataset("f", str(path), sha256=sha256_file(path)).load()


def test_a_question_whose_golds_normalise_to_nothing_is_flagged_when_scored(tmp_path, dataset, caplog):
    from analysis.bundle_scores import score_bundle, unwinnable

    ids = [json.loads(line)["question_id"] for line in (SOURCE / "predictions.jsonl").read_text().splitlines()]
    gold = {q: ("Paris",) for q in ids} | {ids[2]: ("  ", "...", "the")}
    assert unwinnable(gold) == [ids[2]]
    with caplog.at_level("WARNING"):
        out = score_bundle(SOURCE, gold, {q.qid: q for q in dataset.questions}, tmp_path / "scores")
    assert json.loads((out / "summary.json").read_text())["unwinnable"] == [ids[2]]
    assert f"cannot be answered right (first {ids[2]})" in caplog.text


@pytest.mark.parametrize("damage, why", [
    ("truncate", "not a readable parquet file"),
    ("non_utf8", "a text cell is not UTF-8"),
    ("not_parquet", "not a readable parquet file"),
])
def test_a_damaged_parquet_is_named_even_under_a_matching_pin(tmp_path, damage, why):
    from common.io import sha256_file
    from sources.rows import RowDataset

    path = tmp_path / "rows.parquet"
    _parquet_with_context(path, [b"0. ok\n", b"0. caf\xe9\n"] if damage == "non_utf8" else [b"0. ok\n"])
    if damage == "truncate":
        path.write_bytes(path.read_bytes()[:-20])
    elif damage == "not_parquet":
        path.write_bytes(b'{"context": "a json file renamed"}')
    dataset = RowDataset("f", str(path), sha256=sha256_file(path))  # the user re-pinned the damaged file
    with left_unchanged(tmp_path), pytest.raises(DataError, match=rf"rows.parquet: {why}"):
        dataset.load()


def test_an_edited_byte_in_the_real_parquet_is_refused_by_its_pin(tmp_path):
    from tests.conftest import PARQUET

    copy = tmp_path / "factconsolidation" / "Conflict_Resolution.parquet"
    copy.parent.mkdir()
    data = bytearray(PARQUET.read_bytes())
    data[len(data) // 2] ^= 0x80  # one bit of one byte, mid-file
    copy.write_bytes(bytes(data))
    dataset = instantiate_known(compose_config(f"paths.data_dir={tmp_path}").dataset, "dataset")
    with left_unchanged(tmp_path), pytest.raises(DataError, match=r"Conflict_Resolution.parquet: sha256 .* does not match"):
        dataset.load()
