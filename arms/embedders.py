"""Sentence embedders for the dense arm, through FlagEmbedding (the library BGE-M3 ships
with). Vectors are L2-normalized, so a dot product is the cosine similarity."""
from __future__ import annotations

import os
import threading
from contextlib import contextmanager
from functools import cached_property
from pathlib import Path
from typing import Any, Iterator, Literal, Sequence

import numpy as np

from common.configurable import configurable
from common.io import canonical_json, sha256_text, writable_dir
from readers.models import ModelSource


@configurable
class FlagEmbedder:
    """`kind="m3"`: BGEM3FlagModel dense vectors (normalized CLS, `max_length` tokens);
    `kind="flag"`: FlagModel with the given pooling (mean pooling for MiniLM)."""

    def __init__(self, name: str, model: ModelSource, kind: Literal["m3", "flag"] = "flag",
                 pooling_method: str = "cls", max_length: int = 512, batch_size: int = 64,
                 use_fp16: bool = False, cpu_threads: int = 1) -> None:
        if kind not in ("m3", "flag"):
            raise ValueError(f"embedder kind must be 'm3' or 'flag', got {kind!r}")
        self.name, self.source, self.kind = name, model, kind
        self.pooling_method, self.max_length, self.batch_size, self.use_fp16 = pooling_method, max_length, batch_size, use_fp16
        # On a CPU the float sums of a forward pass follow torch's thread count (MiniLM's query
        # vector moved by ~1e-7 between 1 and 2 threads, enough to swap two near-tied facts of
        # a top-100 and change a sealed packet), so encoding runs on a fixed count, whatever
        # the machine or OMP_NUM_THREADS says. More threads are faster and machine-dependent.
        if not isinstance(cpu_threads, int) or cpu_threads < 1:
            raise ValueError(f"embedder cpu_threads must be a positive integer, got {cpu_threads!r}")
        self.cpu_threads = cpu_threads

    @property
    def pin(self) -> dict[str, Any]:
        return {"name": self.name, "kind": self.kind, "pooling": self.pooling_method, "max_length": self.max_length,
                **({"cpu_threads": self.cpu_threads} if self.cpu_threads != 1 else {}), **self.source.pin}

    @property
    def cache_identity(self) -> dict[str, Any]:
        """What cached vectors are keyed by: the pin plus the thread count they were encoded
        on, so vectors cached before encoding ran on fixed threads are never mixed with new
        ones (the pin alone feeds request ids, and stays as it was at the default count)."""
        return {**self.pin, "encoded_on_threads": self.cpu_threads}

    @cached_property
    def _model(self) -> Any:
        from FlagEmbedding import BGEM3FlagModel, FlagModel

        path = str(self.source.resolve())
        if self.kind == "m3":
            return BGEM3FlagModel(path, use_fp16=self.use_fp16, devices="cpu" if not _cuda() else None)
        return FlagModel(path, pooling_method=self.pooling_method, normalize_embeddings=True,
                         use_fp16=self.use_fp16, devices="cpu" if not _cuda() else None,
                         passage_max_length=self.max_length, query_max_length=self.max_length)

    def encode(self, texts: Sequence[str]) -> np.ndarray:
        if not texts:
            return np.zeros((0, 0), dtype=np.float32)
        with torch_threads(None if _cuda() else self.cpu_threads):
            out = self._model.encode(list(texts), batch_size=self.batch_size, max_length=self.max_length)
        if self.kind == "m3":
            out = out["dense_vecs"]
        vectors = np.asarray(out, dtype=np.float32)
        return vectors / np.maximum(np.linalg.norm(vectors, axis=1, keepdims=True), 1e-12)


_THREADS = threading.Lock()


@contextmanager
def torch_threads(count: int | None) -> Iterator[None]:
    """Run a block on `count` torch CPU threads (None: as set), then restore the caller's."""
    import torch

    with _THREADS:  # the count is process-wide: two encoders at once would restore each other's
        before = torch.get_num_threads()
        if count is not None:
            torch.set_num_threads(count)
        try:
            yield
        finally:
            torch.set_num_threads(before)


def cached_vectors(embedder: Any, texts: Sequence[str], cache_dir: str | Path) -> np.ndarray:
    """The embedder's vectors for `texts`, computed once per (embedder pin, texts) and kept
    on disk (written to a temp file, then renamed): the dense arm and the multi-call
    methods embed the same fact banks again and again."""
    key = sha256_text(canonical_json([getattr(embedder, "cache_identity", embedder.pin), list(texts)]))
    path = Path(cache_dir) / f"{key[:32]}.npy"
    if path.is_file():
        return np.load(path)
    vectors = embedder.encode(list(texts))
    writable_dir(path.parent)
    tmp = path.with_name(f".{path.name}.{os.getpid()}.tmp.npy")
    np.save(tmp, vectors)
    os.replace(tmp, path)
    return vectors


def _cuda() -> bool:
    import torch

    return torch.cuda.is_available()
