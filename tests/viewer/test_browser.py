"""The report in a real browser: Debian's chromium, headless, loading the pages from disk
(no server, no network). Its DOM after the page's own script has run is what is checked:
the filter's live counts, a question page's anchors, graph and records, and the seal error
of a tampered bundle. Screenshots are saved for a person to look at.

Chromium comes from `make browser` (a prerequisite of `make test`). Without it the test
skips, except in CI (env CI set), where a missing browser is a failure.
"""
from __future__ import annotations

import os
import shutil
import struct
import subprocess
from html.parser import HTMLParser
from pathlib import Path

import pytest

from provenance.bundle import read_bundle_jsonl, read_manifest
from tests.conftest import DATA_DIR
from tests.viewer.bundles import quick, tampered
from viewer.load import load_bundles
from viewer.write import write_report

QID = "factconsolidation_mh_6k_no0"
SHOTS = os.environ.get("CMC_VIEW_SCREENSHOTS")  # a folder to keep the screenshots in, if set


def chromium() -> str:
    found = next((shutil.which(n) for n in ("chromium", "chromium-browser") if shutil.which(n)), None)
    if found is None:
        message = "no chromium binary on PATH; `make browser` installs Debian's chromium (root or sudo)"
        if os.environ.get("CI"):
            pytest.fail(f"CI: {message}")
        pytest.skip(message)
    return found


def browse(url: str, profile: Path, *flags: str) -> str:
    """Run headless chromium on a file:// URL; returns stdout (the DOM for --dump-dom)."""
    command = [chromium(), "--headless", "--no-sandbox", "--disable-gpu", "--no-first-run", "--hide-scrollbars",
               f"--user-data-dir={profile}", "--window-size=1400,1800", *flags, url]
    done = subprocess.run(command, capture_output=True, text=True, timeout=120, check=False)
    assert done.returncode == 0, done.stderr[-2000:]
    return done.stdout


class Elements(HTMLParser):
    """Start tags with their attributes and the text inside them, in document order."""

    def __init__(self, html: str) -> None:
        super().__init__()
        self.items: list[dict] = []
        self._open: list[dict] = []
        self.feed(html)

    def handle_starttag(self, tag, attrs):
        item = {"tag": tag, **{k: v or "" for k, v in attrs}, "text": ""}
        self.items.append(item)
        if tag not in ("img", "br", "meta", "link", "input", "path", "rect", "circle", "line", "polyline"):
            self._open.append(item)

    def handle_endtag(self, tag):
        while self._open:
            if self._open.pop()["tag"] == tag:
                break

    def handle_data(self, data):
        for item in self._open:
            item["text"] += data

    def find(self, tag: str, cls: str | None = None, **attrs: str) -> list[dict]:
        return [i for i in self.items if i["tag"] == tag and (cls is None or cls in i.get("class", "").split())
                and all(i.get(k.replace("_", "-")) == v for k, v in attrs.items())]


def screenshot(url: str, profile: Path, path: Path) -> tuple[int, int]:
    browse(url, profile, f"--screenshot={path}")
    head = path.read_bytes()[:24]
    assert head[:8] == b"\x89PNG\r\n\x1a\n", f"{path} is not a PNG"
    if SHOTS:
        Path(SHOTS).mkdir(parents=True, exist_ok=True)
        shutil.copy(path, Path(SHOTS) / path.name)
    return struct.unpack(">II", head[16:24])


@pytest.fixture(scope="module")
def report(tmp_path_factory):
    out = tmp_path_factory.mktemp("view") / "report"
    return write_report(load_bundles([quick("cmc")], DATA_DIR), out)


def test_index_lists_all_questions_and_filters_them(report, tmp_path):
    population = read_manifest(quick("cmc"))["population"]
    dom = Elements(browse(report.joinpath("index.html").as_uri(), tmp_path / "profile", "--dump-dom"))
    rows = dom.find("tr", "qrow")
    assert len(rows) == population["n"] == 8 and not any("hidden" in r for r in rows)
    assert dom.find("span", id="shown-count")[0]["text"] == "8 of 8 questions"
    # The page's script computed this from the rows; the Wilson bounds match scoring.intervals.
    assert dom.find("span", id="acc-0")[0]["text"] == "A: cmc: 8/8 = 100.0% [67.6, 100.0]"
    filtered = Elements(browse(report.joinpath("index.html").as_uri() + "?hop=mh", tmp_path / "profile", "--dump-dom"))
    shown = [r for r in filtered.find("tr", "qrow") if "hidden" not in r]
    assert [r["data-hop"] for r in shown] == ["mh"] * 4
    assert filtered.find("span", id="acc-0")[0]["text"] == "A: cmc: 4/4 = 100.0% [51.0, 100.0]"
    width, height = screenshot(report.joinpath("index.html").as_uri(), tmp_path / "profile", tmp_path / "index.png")
    assert (width, height) == (1400, 1800)


def test_question_page_shows_anchors_graph_and_records(report, tmp_path):
    packet = next(p for p in read_bundle_jsonl(quick("cmc"), "evidence.jsonl") if p["question_id"] == QID)
    url = report.joinpath("q", f"{QID}.html").as_uri()
    dom = Elements(browse(url, tmp_path / "profile", "--dump-dom"))
    assert [a["text"] for a in dom.find("span", "anchor")] == packet["trace"]["anchors"]
    (svg,) = dom.find("svg", "traversal")
    nodes = {n["text"].split("(depth")[0].strip() for n in dom.find("g", "node")}
    assert nodes == {"our mutual friend", "charles darwin", "amala paul", "belgium"}
    assert len(dom.find("path", "edge")) == len(packet["trace"]["edges"]) == 3
    records = dom.find("li", "record")
    assert [int(r["data-pos"]) for r in records] == packet["positions"]
    assert records[1]["text"].strip() == "322. Amala Paul is a citizen of Belgium."
    assert [g["text"] for g in dom.find("span", "gold")] == ["Belgium"]
    screenshot(url, tmp_path / "profile", tmp_path / "question.png")


def test_tampered_bundle_shows_a_seal_error_and_no_label(tmp_path):
    bundle = tampered(quick("cmc"), tmp_path / "bundle")
    out = write_report(load_bundles([bundle], DATA_DIR), tmp_path / "report")
    for page in ("index.html", f"q/{QID}.html"):
        dom = Elements(browse(out.joinpath(page).as_uri(), tmp_path / "profile", "--dump-dom"))
        (error,) = dom.find("div", id="seal-error")
        assert "Seal check failed" in error["text"] and "predictions.jsonl changed since sealing" in error["text"]
        assert not dom.find("mark") and not dom.find("span", "gold") and not dom.find("span", "right")
    assert dom.find("div", id="golds-hidden")
    assert not Elements(browse(out.joinpath("index.html").as_uri(), tmp_path / "profile", "--dump-dom")).find(
        "span", id="acc-0")
    screenshot(out.joinpath(f"q/{QID}.html").as_uri(), tmp_path / "profile", tmp_path / "tampered.png")
