"""Bad values, unusable servers and disk errors end as one line naming the key, address or
file, with exit status 2 (run.py's path: report_data_errors around the stage runner), never a
traceback, and a value known when the config is composed is refused then, before anything
is written."""
from __future__ import annotations

import errno
import json
import shutil
from pathlib import Path

import pytest

import provenance.bundle
from common.errors import DataError, report_data_errors
from harness.stages import run
from provenance.bundle import write_bundle
from tests import valid_rows as rows
from tests.conftest import ROOT, compose_config
from tests.hostile.conftest import left_unchanged
from tests.hostile.servers import LocalServer


def one_line_exit(capsys, body) -> str:
    """What report_data_errors prints for `body`, asserting exit 2 and a single line."""
    with pytest.raises(SystemExit) as stopped:
        report_data_errors(body)
    err = capsys.readouterr().err
    assert stopped.value.code == 2 and "Traceback" not in err and len(err.strip().splitlines()) == 1, err
    return err.strip()


def sandboxed(tmp_path: Path, *overrides: str) -> list[str]:
    return [f"paths.results_dir={tmp_path / 'results'}", f"paths.cache_dir={tmp_path / 'cache'}", "population=quick",
            "population.per_cell=1", "allow_dirty=true", *overrides]


@pytest.mark.parametrize("overrides, named", [
    (["population.lengths=6k"], "population.lengths = '6k': must be a list"),
    (["reader=openai", "reader.timeout_s=-1"], "reader.timeout_s = -1: must be more than 0"),
    (["reader=openai", "reader.max_new_tokens=0"], "reader.max_new_tokens = 0: must be at least 1"),
    (["reader=openai", "reader.base_url=ftp://host/v1"], "reader.base_url = 'ftp://host/v1': must be an http"),
    (["reader=openai", "reader.concurrency=0"], "reader.concurrency = 0"),
    (["read.max_hops=0"], "read.max_hops = 0"),
    (["read.budget_chars=0"], "read.budget_chars = 0"),
    (["frontend=llm", "frontend.batch_records=0"], "frontend.batch_records = 0"),
    (["stage=bogus"], "stage='bogus' is not a stage"),
])
def test_a_bad_value_is_refused_when_the_config_is_composed(tmp_path, capsys, overrides, named):
    with left_unchanged(tmp_path):
        err = one_line_exit(capsys, lambda: run(compose_config(*sandboxed(tmp_path, "stage=prepare", *overrides),
                                                                check=False)))
    assert err.startswith("cmc: error: ") and named in err, err
    assert not (tmp_path / "results").exists()


def test_a_budget_below_the_header_names_the_key(tmp_path, capsys):
    err = one_line_exit(capsys, lambda: run(compose_config(*sandboxed(tmp_path, "stage=evidence", "read.budget_chars=10"))))
    assert "read.budget_chars = 10: cannot hold the 25-character header of 'factconsolidation_6k'" in err


@pytest.mark.parametrize("server", ["refused", "404"])
def test_an_unusable_server_is_one_line_naming_its_address(tmp_path, capsys, server):
    answering = LocalServer(lambda *request: (404, b"")) if server == "404" else None
    url = answering.url if answering else "http://127.0.0.1:1/v1"
    try:
        err = one_line_exit(capsys, lambda: run(compose_config(*sandboxed(
            tmp_path, "stage=generate", "reader=openai", f"reader.base_url={url}", "reader.model=m"))))
    finally:
        if answering:
            answering.close()
    assert url in err and ("Connection refused" in err if server == "refused" else "HTTP 404" in err), err


@pytest.mark.parametrize("key", ["paths.cache_dir", "paths.results_dir"])
def test_a_file_where_a_folder_should_be_is_one_line_naming_it(tmp_path, capsys, key):
    blocker = tmp_path / "a_file"
    blocker.write_text("not a folder\n")
    overrides = [o for o in sandboxed(tmp_path, "stage=generate", "reader=openai", "reader.base_url=http://127.0.0.1:1/v1")
                 if not o.startswith(key)]
    err = one_line_exit(capsys, lambda: run(compose_config(*overrides, f"{key}={blocker}")))
    assert f"{blocker}/" in err and "Not a directory" in err, err


def test_a_folder_already_where_a_bundle_goes_is_named(tmp_path, capsys):
    (tmp_path / "bundle").mkdir()
    err = one_line_exit(capsys, lambda: write_bundle(tmp_path / "bundle", {}, [], [], []))
    assert f"{tmp_path / 'bundle'}: an unsealed folder" in err


def test_a_full_disk_while_sealing_is_one_line_and_leaves_no_staging_folder(tmp_path, capsys, monkeypatch):
    real, written = provenance.bundle.atomic_write_text, []

    def fill_up(path, text):
        if len(written) == 2:
            raise OSError(errno.ENOSPC, "No space left on device", str(path))
        written.append(path)
        return real(path, text)

    monkeypatch.setattr(provenance.bundle, "atomic_write_text", fill_up)
    err = one_line_exit(capsys, lambda: write_bundle(tmp_path / "bundle", rows.manifest(["q"]), [rows.packet("q")],
                                                           [rows.request("q", "r")], [rows.prediction("q", "r")]))
    assert "requests.jsonl: No space left on device" in err, err
    assert list(tmp_path.iterdir()) == []  # neither the bundle nor a .staging-<pid> folder


def test_a_method_answer_that_is_not_text_is_named_when_scored(tmp_path):
    from analysis.tables import question_outputs

    source = next((ROOT / "results" / "bundles" / "ports").glob("*-mello-*"))
    bundle = tmp_path / source.name
    shutil.copytree(source, bundle)
    rows = [json.loads(line) for line in (bundle / "evidence.jsonl").read_text().splitlines()]
    rows[3]["answer"] = {"not": "text"}
    evidence = {row["question_id"]: row for row in rows}
    with pytest.raises(DataError, match=rf"question {rows[3]['question_id']}'s answer is dict"):
        question_outputs(bundle, evidence)
