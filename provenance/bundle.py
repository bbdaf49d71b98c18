"""Sealed prediction bundles.

A bundle is a folder: manifest.json, evidence.jsonl, requests.jsonl, predictions.jsonl and
SEAL (the sha256 of each file and of the whole). It is assembled in a temporary sibling
folder, sealed, made read-only and renamed into place, so a reader of `results/` sees a
complete sealed bundle or none. Scores are written beside it, never inside. Every row is checked against its type
(provenance/row_types.py, published as docs/schemas/) before a bundle is written and when it is read.
"""
from __future__ import annotations

import json
import os
import shutil
import stat
from pathlib import Path
from typing import Any, Iterable

from common.errors import DataError
from common.io import (atomic_write_text, canonical_json, json_text, jsonl_text, read_json, read_jsonl, sha256_file,
                       sha256_text, writable_dir)
from provenance.row_types import check_document, check_rows

BUNDLE_FILES = ("manifest.json", "evidence.jsonl", "requests.jsonl", "predictions.jsonl")
SEAL = "SEAL"


class SealError(DataError):
    """A bundle whose files no longer match their seal (or that was never sealed)."""


def write_bundle(
    path: str | Path,
    manifest: dict[str, Any],
    evidence: Iterable[dict[str, Any]],
    requests: Iterable[dict[str, Any]],
    predictions: Iterable[dict[str, Any]],
) -> Path:
    """Write, seal, freeze and move a bundle into `path` (which must not exist yet)."""
    target = Path(path)
    if target.exists():
        state = "a sealed bundle" if (target / SEAL).is_file() else "an unsealed folder (not made by a seal)"
        raise DataError(f"{target}: {state} is already there; bundles are immutable: move it away to seal again")
    rows = {"evidence.jsonl": list(evidence), "requests.jsonl": list(requests), "predictions.jsonl": list(predictions)}
    check_document("manifest.json", manifest, target / "manifest.json")  # a broken row writes nothing
    for name, table in rows.items():
        check_rows(name, table, target / name)
    staging = target.with_name(f".{target.name}.staging-{os.getpid()}")
    shutil.rmtree(writable_dir(target.parent) / staging.name, ignore_errors=True)
    staging.mkdir()
    try:
        _fill(staging, manifest, *rows.values())
        os.replace(staging, target)
    except BaseException:  # a full disk or an interrupt leaves no half-written staging folder behind
        shutil.rmtree(staging, ignore_errors=True)
        raise
    return target


def _fill(staging: Path, manifest: dict[str, Any], evidence: Iterable[dict[str, Any]],
          requests: Iterable[dict[str, Any]], predictions: Iterable[dict[str, Any]]) -> None:
    """The bundle's files and SEAL, written and made read-only inside the staging folder."""
    texts = {
        "manifest.json": json_text(manifest),
        "evidence.jsonl": jsonl_text(evidence),
        "requests.jsonl": jsonl_text(requests),
        "predictions.jsonl": jsonl_text(predictions),
    }
    for name, text in texts.items():
        atomic_write_text(staging / name, text)
    atomic_write_text(staging / SEAL, seal_text({n: sha256_text(t) for n, t in texts.items()}))
    for name in (*BUNDLE_FILES, SEAL):
        os.chmod(staging / name, stat.S_IRUSR | stat.S_IRGRP | stat.S_IROTH)


def seal_text(digests: dict[str, str]) -> str:
    files = {name: digests[name] for name in BUNDLE_FILES}
    return json_text({"files": files, "seal": sha256_text(canonical_json(files))})


def verify_seal(path: str | Path) -> str:
    """Recompute every file's hash; return the seal, or raise SealError naming the file."""
    return _verified_record(Path(path))["seal"]


def sealed_digests(path: str | Path) -> dict[str, str]:
    """The verified sha256 of each bundle file, by name."""
    return _verified_record(Path(path))["files"]


def _verified_record(bundle: Path) -> dict[str, Any]:
    seal_path = bundle / SEAL
    if not seal_path.is_file():
        raise SealError(f"{bundle}: no SEAL file; the bundle was never sealed")
    extra = sorted(p.name for p in bundle.iterdir() if p.name not in (*BUNDLE_FILES, SEAL))
    if extra:  # a shared bundle is data: nothing may travel beside the sealed files
        raise SealError(f"{bundle}: holds files beyond a bundle's ({', '.join(extra)}); refusing it")
    try:
        recorded = json.loads(seal_path.read_text(encoding="utf-8"))
        check_document("SEAL", recorded, seal_path)
        digests, seal = dict(recorded["files"]), str(recorded["seal"])
    except DataError as exc:
        raise SealError(f"{seal_path}: not a SEAL record ({exc})") from exc
    except (ValueError, KeyError, TypeError) as exc:
        raise SealError(f"{seal_path}: not a SEAL record ({type(exc).__name__}: {exc})") from exc
    for name in BUNDLE_FILES:
        if not (bundle / name).is_file():
            raise SealError(f"{bundle}: sealed file {name} is missing")
        if sha256_file(bundle / name) != digests.get(name):
            raise SealError(f"{bundle}: {name} changed since sealing (sha256 mismatch); refusing to score")
    if sha256_text(canonical_json(digests)) != seal:
        raise SealError(f"{bundle}: SEAL file is inconsistent")
    return {"files": digests, "seal": seal}


def read_bundle_jsonl(path: str | Path, name: str) -> list[dict[str, Any]]:
    """A bundle file's rows, each checked against its type (DataError names line and field)."""
    rows = read_jsonl(Path(path) / name)
    check_rows(name, rows, Path(path) / name)
    return rows


def read_manifest(path: str | Path) -> dict[str, Any]:
    manifest = read_json(Path(path) / "manifest.json")
    if not isinstance(manifest, dict):
        raise DataError(f"{Path(path) / 'manifest.json'}: a manifest is a JSON object")
    check_document("manifest.json", manifest, Path(path) / "manifest.json")
    return manifest


def run_slice(path: str | Path) -> dict[str, str]:
    """What a bundle shares with the other views of one table: everything in its run name but
    the arm. Tables and analyses select one slice, so two readers are never pooled."""
    return manifest_slice(read_manifest(path))


def manifest_slice(manifest: dict[str, Any]) -> dict[str, str]:
    """`run_slice` of a manifest already read."""
    config = manifest["config"]
    return {"dataset": config["dataset"]["name"], "frontend": config["frontend"]["name"],
            "population": manifest["population"]["name"], "reader": config["reader"]["name"]}
