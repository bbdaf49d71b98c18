"""What every hostile case also asserts: the bad input left what was already written as it was."""
from __future__ import annotations

import hashlib
from contextlib import contextmanager
from pathlib import Path
from typing import Iterator


def tree_digest(*roots: Path) -> dict[str, str]:
    """Every file under the roots (or the root file itself), by path, with its sha256."""
    digest = {}
    for root in roots:
        files = [root] if root.is_file() else sorted(p for p in root.rglob("*") if p.is_file())
        digest |= {str(path): hashlib.sha256(path.read_bytes()).hexdigest() for path in files}
    return digest


@contextmanager
def left_unchanged(*roots: Path) -> Iterator[None]:
    """Fail unless no file under the roots was added, removed or changed inside the block
    (the block is expected to raise; the check runs either way)."""
    before = tree_digest(*roots)
    try:
        yield
    finally:
        after = tree_digest(*roots)
        changed = sorted(set(before.items()) ^ set(after.items()))
        assert not changed, f"written files changed: {changed[:5]}"
