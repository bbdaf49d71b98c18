"""The viewer on the committed QUICK Table 1 bundles: what the pages hold, that labels need a
verified seal, that bundle text is escaped, and that bad input is refused by name."""
from __future__ import annotations

import json
import re

import pytest

from common.configurable import UnknownTargetError
from common.errors import DataError
from provenance.bundle import read_bundle_jsonl, read_manifest
from tests.conftest import DATA_DIR
from tests.viewer.bundles import ROOT, edited, quick, tampered
from viewer.load import load_bundles
from viewer.write import MARKER, build_pages, write_report

QID = "factconsolidation_mh_6k_no0"
PAGE = f"q/{QID}.html"


@pytest.fixture(scope="module")
def cmc_pages():
    return build_pages(load_bundles([quick("cmc")], DATA_DIR))


@pytest.fixture(scope="module")
def pair():
    bundles = load_bundles([quick("fact_bm25"), quick("cmc")], DATA_DIR)
    return bundles, build_pages(bundles)


def test_index_lists_every_question_of_the_population(cmc_pages):
    population = read_manifest(quick("cmc"))["population"]["n"]
    ids = re.findall(r'<tr class="qrow[^"]*" data-qid="([^"]+)"', cmc_pages["index.html"])
    assert ids == [p["question_id"] for p in read_bundle_jsonl(quick("cmc"), "predictions.jsonl")]
    assert len(ids) == population == 8
    assert sorted(cmc_pages) == sorted(["index.html", *(f"q/{q}.html" for q in ids)])
    assert re.search(r"<td>all</td><td class=\"num\">8</td><td class=\"num\">8</td><td class=\"num\">100.0%</td>"
                     r"<td class=\"num\">\[67.6, 100.0\]</td>", cmc_pages["index.html"])


def test_question_page_shows_anchors_graph_records_and_gold(cmc_pages):
    page = cmc_pages[PAGE]
    packet = next(p for p in read_bundle_jsonl(quick("cmc"), "evidence.jsonl") if p["question_id"] == QID)
    assert re.findall(r'<span class="chip anchor">([^<]+)</span>', page) == packet["trace"]["anchors"]
    assert page.count('<g class="node ') == 4 and page.count('<path class="edge current"') == 3
    assert [int(p) for p in re.findall(r'<li class="record[^"]*" data-pos="(\d+)"', page)] == packet["positions"]
    assert '<span class="chip gold">Belgium</span>' in page
    assert "<mark>Belgium</mark>" in page  # in the output and in record 322
    assert re.search(r'data-pos="322"><span class="serial">322\.</span> Amala Paul is a citizen of <mark>Belgium</mark>',
                     page)
    assert '<dd class="input-tokens">248</dd>' in page


def test_same_bundles_give_the_same_bytes(tmp_path):
    bundles = [quick("stale_closure"), quick("cmc")]
    first = write_report(load_bundles(bundles, DATA_DIR), tmp_path / "a")
    second = write_report(load_bundles(bundles, DATA_DIR), tmp_path / "b")
    files = sorted(p.relative_to(first) for p in first.rglob("*") if p.is_file())
    assert files == sorted(p.relative_to(second) for p in second.rglob("*") if p.is_file())
    assert all((first / f).read_bytes() == (second / f).read_bytes() for f in files)
    assert str(tmp_path) not in (first / "index.html").read_text()  # no machine path in a page
    write_report(load_bundles(bundles[:1], DATA_DIR), first)  # a report folder is replaced whole
    assert not (first / f"q/{QID}.html").read_text().count("B: cmc")


def test_two_bundles_pair_their_scores(pair):
    _, pages = pair
    index = pages["index.html"]
    wtl = re.findall(r'<tr class="wtl"><td>(\w+)</td><td class="num">(\d+)</td><td class="num">(\d+)</td>'
                     r'<td class="num">(\d+)</td><td class="num">(\d+)</td>', index)
    assert wtl == [("all", "8", "0", "2", "6"), ("mh", "4", "0", "0", "4"), ("sh", "4", "0", "2", "2")]
    listed = re.findall(r'<table class="disagreements">(.*?)</table>', index, re.S)[0]
    assert listed.count("<tr>") == 1 + 6  # header + the six questions where the views differ
    assert "Wolverhampton" in listed and "Rodez" in listed  # both answers, side by side


def test_ranked_arm_gets_its_retrieval_curve(pair):
    _, pages = pair
    index = pages["index.html"]
    assert '<svg class="recall-chart"' in index
    rows = re.findall(r'<tr><td>all</td><td class="num">(\d+)</td><td class="num">8</td><td class="num">[\d.]+</td>'
                      r'<td class="num">([\d.]+)%</td><td class="num">([\d.]+)%</td>', index)
    assert rows[0] == ("1", "50.0", "45.8") and rows[-1] == ("100", "87.5", "71.9")
    page = pages[PAGE]
    assert "#146 → rank 1" in page and "#335 → not ranked" in page


def test_stale_view_draws_the_stale_values(tmp_path):
    pages = build_pages(load_bundles([quick("stale_closure")], DATA_DIR))
    page = pages["q/factconsolidation_mh_6k_no2.html"]
    assert page.count('<path class="edge stale"') == 3
    assert "stale: baseball (record 35)" in page and "stale: england (record 272)" in page


def test_tampered_bundle_shows_the_seal_error_and_no_label(tmp_path):
    bundle = tampered(quick("cmc"), tmp_path / "bundle")
    (loaded,) = load_bundles([bundle], DATA_DIR)
    assert loaded.labels is None and loaded.seal is None
    pages = build_pages([loaded])
    for html in pages.values():
        assert 'id="seal-error"' in html and "predictions.jsonl changed since sealing" in html
        assert "<mark>" not in html and 'class="chip gold"' not in html and 'class="badge right"' not in html
        assert str(tmp_path) not in html
    assert "Gold answers are not shown" in pages[PAGE]
    assert 'data-correct0=""' in pages["index.html"] and "Accuracy (substring EM" not in pages["index.html"]


def test_bundle_text_is_escaped(tmp_path):
    attack = '<script>document.title="pwned"</script><img src=x onerror=alert(1)>'

    def edit(rows):
        rows[0]["raw"] = attack
    bundle = edited(quick("cmc"), tmp_path / "bundle", "predictions.jsonl", edit)
    pages = build_pages(load_bundles([bundle], DATA_DIR))
    for html in (pages["index.html"], pages[PAGE]):
        assert attack not in html and "<img src=x" not in html
        assert "&lt;script&gt;document.title=&#34;pwned&#34;&lt;/script&gt;" in html


@pytest.mark.parametrize(("name", "edit", "message"), [
    ("evidence.jsonl", lambda rows: rows[2].pop("positions"), r"evidence.jsonl: line 3: field 'positions' is missing"),
    ("requests.jsonl", lambda rows: rows[0].update(input_tokens="248"), r"requests.jsonl: line 1: field 'input_tokens'"),
    ("predictions.jsonl", lambda rows: rows[1].update(question_id="nope"), r"line 2: question_id 'nope' is not a question"),
    ("evidence.jsonl", lambda rows: rows[0]["trace"]["edges"][0].pop(), r"trace edge 0 is not \[subject"),
])
def test_bad_rows_are_refused_by_file_line_and_field(tmp_path, name, edit, message):
    bundle = edited(quick("cmc"), tmp_path / "bundle", name, edit)
    with pytest.raises(DataError, match=message):
        build_pages(load_bundles([bundle], DATA_DIR))


def _manifest_edit(tmp_path, change):
    bundle = edited(quick("cmc"), tmp_path / "bundle", "evidence.jsonl", lambda rows: None, reseal=False)
    manifest = json.loads((bundle / "manifest.json").read_text())
    change(manifest)
    (bundle / "manifest.json").write_text(json.dumps(manifest))
    return bundle


def test_a_manifest_names_only_known_classes_and_data_paths(tmp_path):
    marker = tmp_path / "ran"
    bundle = _manifest_edit(tmp_path, lambda m: m["config"]["dataset"].update(
        {"_target_": "pathlib.Path.write_text", "self": str(marker), "data": "x"}))
    with pytest.raises(UnknownTargetError, match=r"dataset.*pathlib.Path.write_text"):
        load_bundles([bundle], DATA_DIR)
    assert not marker.exists()
    other = _manifest_edit(tmp_path / "2", lambda m: m["config"]["dataset"].update(path="${oc.env:HOME}/x.parquet"))
    with pytest.raises(DataError, match=r"config.dataset.path = '\$\{oc.env:HOME\}/x.parquet' interpolates"):
        load_bundles([other], DATA_DIR)
    nameless = _manifest_edit(tmp_path / "3", lambda m: m["config"]["arm"].pop("name"))
    with pytest.raises(DataError, match=r"manifest.json: config.arm.name is missing"):
        load_bundles([nameless], DATA_DIR)


def test_two_bundles_must_hold_the_same_questions():
    other = ROOT / "results" / "bundles" / "adhoc" / "factconsolidation-grammar-p104-cmc-qwen25_coder_15b"
    with pytest.raises(DataError, match="hold different questions"):
        build_pages(load_bundles([quick("fact_bm25"), other], DATA_DIR))


def test_report_never_replaces_a_folder_it_did_not_write(tmp_path):
    (tmp_path / "mine.txt").write_text("keep")
    with pytest.raises(DataError, match="not a report the viewer wrote"):
        write_report(load_bundles([quick("cmc")], DATA_DIR), tmp_path)
    assert (tmp_path / "mine.txt").read_text() == "keep"
    out = write_report(load_bundles([quick("cmc")], DATA_DIR), tmp_path / "report")
    assert (out / MARKER).is_file() and (out / "index.html").is_file()
