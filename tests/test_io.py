"""Crash-safe writes: whole files only, and the permissions a plain open() would give."""
from __future__ import annotations

import os
import stat
from pathlib import Path

import pytest

from common.io import atomic_write_text, read_jsonl, write_jsonl


def _mode(path: Path) -> int:
    return stat.S_IMODE(path.stat().st_mode)


def test_written_file_has_umask_mode_not_mkstemp_0600(tmp_path: Path) -> None:
    plain = tmp_path / "plain.txt"
    plain.write_text("x")
    atomic = atomic_write_text(tmp_path / "sub" / "atomic.txt", "x")
    assert _mode(atomic) == _mode(plain)


def test_failed_write_leaves_old_file_and_no_temp(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    target = write_jsonl(tmp_path / "rows.jsonl", [{"a": 1}])

    def disk_full(fd: int) -> None:
        raise OSError(28, "No space left on device")

    monkeypatch.setattr(os, "fsync", disk_full)
    with pytest.raises(OSError, match="No space"):
        write_jsonl(target, [{"a": 2}])
    assert read_jsonl(target) == [{"a": 1}]
    assert sorted(p.name for p in tmp_path.iterdir()) == ["rows.jsonl"]
