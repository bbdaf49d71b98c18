"""scripts/analysis.ipynb runs headless over bundles made with the tiny test reader."""
from __future__ import annotations

from pathlib import Path

import pytest

from harness.stages import run
from tests.conftest import ROOT, compose_config

nbformat = pytest.importorskip("nbformat")
nbclient = pytest.importorskip("nbclient")

pytestmark = pytest.mark.slow

NOTEBOOK = ROOT / "scripts" / "analysis.ipynb"
QUESTION = "factconsolidation_mh_6k_no2"  # multi-hop, in the quick population


def tagged(nb, tag: str):
    (cell,) = [c for c in nb.cells if tag in c.metadata.get("tags", [])]
    return cell


def text_output(cell) -> str:
    parts = []
    for out in cell.get("outputs", []):
        if out.output_type == "stream":
            parts.append(out.text)
        elif "data" in out:
            parts.append(out.data.get("text/plain", ""))
    return "".join(parts)


@pytest.fixture(scope="module")
def bundles(tmp_path_factory, tiny_model_dir) -> Path:
    tmp = tmp_path_factory.mktemp("notebook")
    # a second reader's CMC bundle sits in the same folder: the analysis must not pool it
    for arm, name in (("cmc", "local"), ("fact_bm25", "local"), ("cmc", "local2")):
        run(compose_config("reader=local", f"reader.model.local_path={tiny_model_dir}", f"reader.name={name}",
                           "population=quick", "experiment=table1", f"arm={arm}",
                           f"paths.results_dir={tmp / 'results'}", f"paths.cache_dir={tmp / 'cache'}"))
    return tmp / "results" / "bundles"


def test_notebook_is_valid_nbformat_v4():
    nb = nbformat.read(NOTEBOOK, as_version=4)
    nbformat.validate(nb)
    assert nb.nbformat == 4
    assert not any(c.get("outputs") for c in nb.cells if c.cell_type == "code"), "commit the notebook without outputs"
    assert 'BUNDLES_DIR = "results/bundles"' in tagged(nb, "parameters").source


def test_notebook_executes_and_drills_into_one_question(bundles, dataset):
    nb = nbformat.read(NOTEBOOK, as_version=4)
    tagged(nb, "parameters").source = (f"BUNDLES_DIR = {str(bundles)!r}\nEXPERIMENT = 'table1'\n"
                                       f"POPULATION = 'quick'\nREADER = 'local'\nQUESTION_ID = {QUESTION!r}")
    nbclient.NotebookClient(nb, timeout=600, kernel_name="python3",
                            resources={"metadata": {"path": str(ROOT)}}).execute()

    assert "16 scored items: 8 questions x 2 views" in text_output(tagged(nb, "items"))  # local2 left out
    selection = text_output(tagged(nb, "selection"))
    assert "gold_in_evidence" in selection and "correct_without_gold" in selection and "fact_bm25" in selection
    question = next(q for q in dataset.questions if q.qid == QUESTION)
    drill = text_output(tagged(nb, "drill-down"))
    assert question.text in drill
    assert "=== cmc" in drill and "=== fact_bm25" in drill
    assert "anchors: ['steve sax']" in drill and "traversal path" in drill and "prediction:" in drill
    gold = text_output(tagged(nb, "gold"))
    assert "gold: ('Italy',)" in gold and "gold_in_evidence" in gold
    images = [o for c in nb.cells for o in c.get("outputs", []) if "image/png" in o.get("data", {})]
    assert len(images) == 1
