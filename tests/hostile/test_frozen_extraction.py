"""A frozen extraction is reused by every arm and every later run: one edited by hand (a
triple added, a status changed) is refused on load, naming the file, not used as is."""
from __future__ import annotations

import json

import pytest

from cmc.frontends.llm import LLMFrontend, corpus_of
from cmc.records import History
from common.errors import DataError
from tests.frontends.oracle import GrammarOracle, served_extractor, with_generation, work_dirs
from tests.readers.faulty_server import FaultyServer


@pytest.fixture(scope="module")
def frozen(dataset, tmp_path_factory):
    full = dataset.histories["factconsolidation_6k"]
    history = History(full.history_id, full.header, full.records[:6])
    tmp = tmp_path_factory.mktemp("frozen")
    with FaultyServer(GrammarOracle()) as server:
        frontend = with_generation(LLMFrontend(served_extractor(server.url), **work_dirs(tmp), batch_records=6))
        frontend.prepare([history])
        url = server.url  # stopped after this: a load that tried to extract would fail to connect
    return history, tmp, frontend.frozen_path(corpus_of([history])), url


def _edit(path, change) -> None:
    data = json.loads(path.read_text())
    change(data)
    path.write_text(json.dumps(data) + "\n")


def _add_triple(data):
    record = next(r for r in data["records"] if r["triples"])
    record["triples"].append([*record["triples"][0][:2], "Atlantis", *record["triples"][0][3:]])


def _unresolve(data):
    record = next(r for r in data["records"] if r["triples"])
    record.update(status="unresolved", triples=[])


@pytest.mark.parametrize("change", [_add_triple, _unresolve])
def test_a_hand_edited_frozen_extraction_is_refused_on_load(frozen, tmp_path, change):
    history, tmp, path, url = frozen
    saved = path.read_text()
    try:
        _edit(path, change)
        with pytest.raises(DataError, match=rf"{path.name}: its records no longer match the records_sha256"):
            with_generation(LLMFrontend(served_extractor(url), **work_dirs(tmp), batch_records=6)).prepare([history])
    finally:
        path.write_text(saved)
    again = with_generation(LLMFrontend(served_extractor(url), **work_dirs(tmp), batch_records=6))
    again.prepare([history])  # the file as frozen loads (nothing sent: the server is gone)
    assert again.extract(history).records
