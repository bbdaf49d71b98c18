"""Every JSON file the harness writes, and every one committed, is strict JSON: no NaN or
Infinity tokens (JavaScript's JSON.parse and many JSON Lines readers reject them); a missing
value is null."""
from __future__ import annotations

import json
from pathlib import Path

import numpy as np
import pandas as pd
import pytest

from common.io import canonical_json, json_text, jsonl_text, without_nan

ROOT = Path(__file__).resolve().parent.parent


def strict_loads(text: str):
    def refuse(token: str):
        raise ValueError(f"non-standard JSON token {token}")
    return json.loads(text, parse_constant=refuse)


def committed_json_files() -> list[Path]:
    files = [p for folder in ("results", "datasets", "conf", "cmc", "docs") for pattern in ("*.json", "*.jsonl")
             for p in (ROOT / folder).rglob(pattern)]
    assert len(files) > 100  # the committed bundles and scores are among them
    return sorted(files)


def test_every_committed_json_file_parses_strictly():
    bad = []
    for path in committed_json_files():
        text = path.read_text(encoding="utf-8")
        try:
            if path.suffix == ".jsonl":
                for line in text.splitlines():
                    if line.strip():
                        strict_loads(line)
            else:
                strict_loads(text)
        except ValueError as exc:
            bad.append(f"{path.relative_to(ROOT)}: {exc}")
    assert not bad, bad[:5]


@pytest.mark.parametrize("value", [float("nan"), float("inf"), -float("inf"), np.float64("nan")])
@pytest.mark.parametrize("write", [canonical_json, json_text, lambda v: jsonl_text([v])])
def test_the_writers_refuse_what_strict_json_cannot_hold(value, write):
    with pytest.raises(ValueError):
        write({"x": [1, value]})


def test_missing_values_of_a_frame_become_null():
    frame = pd.DataFrame({"parsed": pd.array([None, "x"], dtype="string"), "score": [np.nan, 1.0],
                          "when": pd.to_datetime([None, "2026-01-01"]), "n": pd.array([pd.NA, 2], dtype="Int64")})
    rows = without_nan(frame.astype(object).to_dict("records")) + without_nan(frame.to_dict("records"))
    text = jsonl_text([{k: v for k, v in row.items() if k != "when"} for row in rows])
    parsed = [strict_loads(line) for line in text.splitlines()]
    assert parsed[0] == {"parsed": None, "score": None, "n": None} == parsed[2]
    assert parsed[1]["parsed"] == "x" and rows[0]["when"] is None and rows[1]["when"] is not None


@pytest.mark.parametrize("text", ['{"a": NaN}', '{"a": [1, Infinity]}', '-Infinity'])
def test_a_file_holding_nan_is_a_data_error_naming_it(tmp_path, text):
    from common.errors import DataError
    from common.io import read_json, read_jsonl

    (tmp_path / "x.json").write_text(text)
    (tmp_path / "x.jsonl").write_text('{"ok": 1}\n' + text + "\n")
    with pytest.raises(DataError, match=r"x\.json: not valid JSON .*is not JSON \(a missing value is null\)"):
        read_json(tmp_path / "x.json")
    with pytest.raises(DataError, match=r"x\.jsonl: line 2 is not JSON"):
        read_jsonl(tmp_path / "x.jsonl")


def test_a_nan_in_a_config_value_is_one_line_not_a_traceback(tmp_path):
    from common.errors import DataError
    from provenance.manifest import experiment_config
    from tests.conftest import compose_config

    cfg = compose_config("reader=openai", "reader.temperature=nan", f"paths.results_dir={tmp_path}")
    with pytest.raises(DataError, match="NaN or infinite"):
        json_text(experiment_config(cfg))
