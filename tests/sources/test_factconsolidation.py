import shutil
from collections import Counter

import pyarrow as pa
import pyarrow.parquet as pq
import pytest
from hydra.utils import instantiate

from common.errors import DataError
from sources.rows import RowDataset


def test_real_split_gives_four_shared_histories_and_800_questions(dataset):
    assert sorted(len(h) for h in dataset.histories.values()) == [455, 2310, 4580, 18332]
    assert len(dataset.questions) == 800
    assert len({q.qid for q in dataset.questions}) == 800
    cells = Counter((q.hop, q.length) for q in dataset.questions)
    assert set(cells.values()) == {100} and len(cells) == 8
    assert all(q.qid.startswith(f"factconsolidation_{q.hop}_{q.length}_no") for q in dataset.questions)


def test_labels_cover_every_question_and_stay_out_of_the_dataset(cfg, dataset):
    adapter = instantiate(cfg.dataset)
    labels = adapter.load_labels()
    assert set(labels) == {q.qid for q in dataset.questions}
    assert all(isinstance(a, tuple) and a for a in labels.values())
    assert labels["factconsolidation_mh_262k_no0"] == ("Philippines",)


def _adapter(cfg, path, sha256=None):
    return RowDataset(
        name="factconsolidation",
        path=str(path), sha256=sha256 or cfg.dataset.sha256, hub_repo="none/none",
        hub_revision="0" * 40, hub_filename="x.parquet",
    )


def test_wrong_sha256_is_refused(cfg, tmp_path):
    copy = tmp_path / "cr.parquet"
    shutil.copy(cfg.dataset.path, copy)
    with pytest.raises(DataError, match="does not match the pinned"):
        _adapter(cfg, copy, sha256="0" * 64).load()


def _rewrite(cfg, tmp_path, mutate):
    from common.io import sha256_file

    table = pq.read_table(cfg.dataset.path)
    path = tmp_path / "mutated.parquet"
    pq.write_table(mutate(table), path)
    return _adapter(cfg, path, sha256_file(path))


def test_missing_column_is_named(cfg, tmp_path):
    adapter = _rewrite(cfg, tmp_path, lambda t: t.drop_columns(["answers"]))
    with pytest.raises(DataError, match=r"missing column\(s\) \['answers'\]"):
        adapter.load()


def test_malformed_context_line_names_row_and_line(cfg, tmp_path):
    def corrupt(table):
        contexts = table.column("context").to_pylist()
        contexts[0] = contexts[0].replace("\n1. ", "\nnot numbered ", 1)
        return table.set_column(0, "context", pa.array(contexts))

    adapter = _rewrite(cfg, tmp_path, corrupt)
    with pytest.raises(DataError, match=r"row 0: history .* line 3 is not a numbered record"):
        adapter.load()


def test_missing_local_file_and_no_hub_says_where_it_looked(cfg, tmp_path, monkeypatch):
    monkeypatch.setattr("huggingface_hub.constants.HF_HUB_OFFLINE", True)  # fail fast, as offline CI does
    adapter = _adapter(cfg, tmp_path / "absent.parquet")
    with pytest.raises(DataError, match="no local copy at .*absent.parquet.*CMC_DATA_DIR"):
        adapter.load()
