"""Committed QUICK bundles and edited copies of them, shared by the viewer tests."""
from __future__ import annotations

import json
import os
import shutil
import stat
from pathlib import Path
from typing import Callable

from common.io import sha256_file
from provenance.bundle import BUNDLE_FILES, SEAL, seal_text

ROOT = Path(__file__).resolve().parents[2]
TABLE1 = ROOT / "results" / "bundles" / "table1"


def quick(arm: str) -> Path:
    return TABLE1 / f"factconsolidation-grammar-quick-{arm}-qwen25_coder_15b"


def copy(source: Path, target: Path) -> Path:
    shutil.copytree(source, target)
    for path in target.iterdir():
        os.chmod(path, stat.S_IRUSR | stat.S_IWUSR)
    return target


def tampered(source: Path, target: Path) -> Path:
    """One byte of predictions.jsonl changed, seal left as it was."""
    bundle = copy(source, target)
    data = bytearray((bundle / "predictions.jsonl").read_bytes())
    at = data.index(b'"raw":"') + len(b'"raw":"')
    data[at] = ord("X") if data[at] != ord("X") else ord("Y")
    (bundle / "predictions.jsonl").write_bytes(bytes(data))
    return bundle


def edited(source: Path, target: Path, name: str, edit: Callable[[list[dict]], None], reseal: bool = True) -> Path:
    """Rows of one JSONL file edited, then (by default) re-sealed consistently: the seal
    proves integrity, not authorship, so only the viewer's own checks stand in the way."""
    bundle = copy(source, target)
    rows = [json.loads(line) for line in (bundle / name).read_text().splitlines()]
    edit(rows)
    (bundle / name).write_text("".join(json.dumps(r, sort_keys=True) + "\n" for r in rows))
    if reseal:
        (bundle / SEAL).write_text(seal_text({n: sha256_file(bundle / n) for n in BUNDLE_FILES}))
    return bundle
