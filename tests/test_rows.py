"""Typed rows (issue 37, item 4): one type per bundle and score file, checked on write and on
read, published as JSON Schema in docs/schemas/ and kept equal to the types there, and every
committed bundle and score file valid under both the types and the published schemas."""
from __future__ import annotations

import json
import os
import shutil
import stat
from pathlib import Path

import pytest

from common.errors import DataError
from provenance.bundle import BUNDLE_FILES, SEAL, read_bundle_jsonl, read_manifest, verify_seal, write_bundle
from provenance.row_types import FILES, check_document, check_rows, schema_texts
from tests.conftest import ROOT

SCHEMAS = ROOT / "docs" / "schemas"
COMMITTED = sorted(p for folder in ("bundles", "scores") for p in (ROOT / "results" / folder).rglob("*")
                   if p.is_file() and p.name in FILES)
BUNDLES = sorted(p.parent for p in (ROOT / "results" / "bundles").glob("*/*/SEAL"))
ARM, METHOD = BUNDLES[0], next(b for b in BUNDLES if "-gwalk-" in b.name)


def _rows(path: Path) -> list:
    text = path.read_text(encoding="utf-8")
    return [json.loads(line) for line in text.splitlines()] if FILES[path.name][1] else [json.loads(text)]


def test_published_schemas_are_the_row_types():
    """docs/schemas/ is generated (provenance.row_types.publish_schemas): it cannot drift from the types."""
    assert {p.name: p.read_text(encoding="utf-8") for p in SCHEMAS.glob("*.json")} == schema_texts()


def test_every_committed_file_is_checked_and_valid():
    assert len(COMMITTED) >= 300 and {p.name for p in COMMITTED} == set(FILES)
    for path in COMMITTED:
        rows = _rows(path)
        if FILES[path.name][1]:
            check_rows(path.name, rows, path)
        else:
            check_document(path.name, rows[0], path)


def test_every_committed_file_is_valid_under_the_published_json_schema():
    """What a tool without this package sees: the published files, a plain validator.
    jsonschema (the reference implementation) checks the schemas themselves and a sample of
    rows from every file; fastjsonschema (compiled, fast enough for 90,000 rows) every row."""
    jsonschema = pytest.importorskip("jsonschema")
    fastjsonschema = pytest.importorskip("fastjsonschema")
    schemas = {name: json.loads((SCHEMAS / f"{name.split('.')[0]}.schema.json").read_text()) for name in FILES}
    reference = {}
    for name, schema in schemas.items():
        jsonschema.Draft202012Validator.check_schema(schema)
        reference[name] = jsonschema.Draft202012Validator(schema)
    compiled = {name: fastjsonschema.compile(schema) for name, schema in schemas.items()}
    for path in COMMITTED:
        rows = _rows(path)
        for row in rows[:3] + rows[-2:]:
            reference[path.name].validate(row)
        for row in rows:
            compiled[path.name](row)


def _broken_rows():
    """(file, edit of its first row, the field the refusal names) for each way a row breaks."""
    return [
        ("evidence.jsonl", lambda r: r.update(extra=1), "field 'extra' is unknown"),
        ("evidence.jsonl", lambda r: r.update(chars="12"), "field 'chars' is '12', expected integer"),
        ("evidence.jsonl", lambda r: r.pop("sha256"), "field 'sha256' is missing"),
        ("evidence.jsonl", lambda r: r["positions"].append(True), "field 'positions[" ),
        ("requests.jsonl", lambda r: r.update(input_tokens=1.5),
         "field 'input_tokens' is 1.5, expected integer or null"),
        ("predictions.jsonl", lambda r: r.pop("request_id"), "field 'request_id' is missing"),
        ("predictions.jsonl", lambda r: r.update(usage={"prompt_tokens": "9"}), "field 'usage.prompt_tokens'"),
    ]


@pytest.mark.parametrize(("name", "edit", "field"), _broken_rows())
def test_a_broken_row_is_refused_on_write_before_anything_is_written(tmp_path, name, edit, field):
    rows = {n: read_bundle_jsonl(ARM, n) for n in ("evidence.jsonl", "requests.jsonl", "predictions.jsonl")}
    edit(rows[name][0])
    target = tmp_path / "bundle"
    with pytest.raises(DataError) as refused:
        write_bundle(target, read_manifest(ARM), *rows.values())
    assert f"{target / name}: line 1: {field}" in str(refused.value) and "\n" not in str(refused.value)
    assert list(tmp_path.iterdir()) == []  # no bundle, no staging folder


@pytest.mark.parametrize(("name", "edit", "field"), _broken_rows())
def test_a_broken_row_is_refused_on_read_naming_file_line_and_field(tmp_path, name, edit, field):
    bundle = _copy(ARM, tmp_path / "bundle")
    lines = (bundle / name).read_text(encoding="utf-8").splitlines()
    row = json.loads(lines[1])
    edit(row)
    lines[1] = json.dumps(row)
    (bundle / name).write_text("\n".join(lines) + "\n", encoding="utf-8")
    with pytest.raises(DataError) as refused:
        read_bundle_jsonl(bundle, name)
    assert f"{bundle / name}: line 2: {field}" in str(refused.value)


@pytest.mark.parametrize(("edit", "field"), [
    (lambda m: m.update(note="x"), "field 'note' is unknown"),
    (lambda m: m["population"].update(n="800"), "field 'population.n' is '800', expected integer"),
    (lambda m: m.pop("git"), "field 'git' is missing"),
])
def test_a_broken_manifest_is_refused_on_write_and_on_read(tmp_path, edit, field):
    manifest = read_manifest(ARM)
    edit(manifest)
    rows = [read_bundle_jsonl(ARM, n) for n in ("evidence.jsonl", "requests.jsonl", "predictions.jsonl")]
    with pytest.raises(DataError, match=f"manifest.json: {field}"):
        write_bundle(tmp_path / "new", manifest, *rows)
    bundle = _copy(ARM, tmp_path / "bundle")
    (bundle / "manifest.json").write_text(json.dumps(manifest), encoding="utf-8")
    with pytest.raises(DataError, match=f"{bundle / 'manifest.json'}: {field}"):
        read_manifest(bundle)


def test_a_broken_score_row_is_refused_naming_its_file():
    item = _rows(next(p for p in COMMITTED if p.name == "items.jsonl"))[0]
    with pytest.raises(DataError, match=r"s/items.jsonl: line 1: field 'strict_em' is True, expected number"):
        check_rows("items.jsonl", [{**item, "strict_em": True}], "s/items.jsonl")
    summary = _rows(next(p for p in COMMITTED if p.name == "summary.json"))[0]
    with pytest.raises(DataError, match=r"s/summary.json: field 'by_hop.mh.n' is missing"):
        check_document("summary.json", {**summary, "by_hop": {"mh": {"correct": 1}}}, "s/summary.json")


@pytest.mark.parametrize("source", [ARM, METHOD], ids=["arm", "method"])
def test_rows_read_and_written_again_are_the_same_bytes(tmp_path, source):
    """Checking changes nothing: a committed bundle, read through its types and written
    again, has the committed bytes and seal (an arm's bundle and a method's)."""
    rows = [read_bundle_jsonl(source, n) for n in ("evidence.jsonl", "requests.jsonl", "predictions.jsonl")]
    again = write_bundle(tmp_path / "again", read_manifest(source), *rows)
    for name in (*BUNDLE_FILES, SEAL):
        assert (again / name).read_bytes() == (source / name).read_bytes(), name
    assert verify_seal(again) == verify_seal(source)


def _copy(source: Path, target: Path) -> Path:
    shutil.copytree(source, target)
    for path in target.iterdir():
        os.chmod(path, stat.S_IRUSR | stat.S_IWUSR)
    return target
