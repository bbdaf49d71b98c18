"""Sentence embedders for the dense arm, through FlagEmbedding (the library BGE-M3 ships
with). Vectors are L2-normalized, so a dot product is the cosine similarity."""
from __future__ import annotations

import os
from functools import cached_property
from pathlib import Path
from typing import Any, Literal, Sequence

import numpy as np

from cmc.io import canonical_json, sha256_text
from cmc.readers.models import ModelSource


class FlagEmbedder:
    """`kind="m3"`: BGEM3FlagModel dense vectors (normalized CLS, `max_length` tokens);
    `kind="flag"`: FlagModel with the given pooling (mean pooling for MiniLM)."""

    def __init__(self, name: str, model: ModelSource, kind: Literal["m3", "flag"] = "flag",
                 pooling_method: str = "cls", max_length: int = 512, batch_size: int = 64,
                 use_fp16: bool = False) -> None:
        if kind not in ("m3", "flag"):
            raise ValueError(f"embedder kind must be 'm3' or 'flag', got {kind!r}")
        self.name, self.source, self.kind = name, model, kind
        self.pooling_method, self.max_length, self.batch_size, self.use_fp16 = pooling_method, max_length, batch_size, use_fp16

    @property
    def pin(self) -> dict[str, Any]:
        return {"name": self.name, "kind": self.kind, "pooling": self.pooling_method,
                "max_length": self.max_length, **self.source.pin}

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
        if self.kind == "m3":
            out = self._model.encode(list(texts), batch_size=self.batch_size, max_length=self.max_length)["dense_vecs"]
        else:
            out = self._model.encode(list(texts), batch_size=self.batch_size, max_length=self.max_length)
        vectors = np.asarray(out, dtype=np.float32)
        return vectors / np.maximum(np.linalg.norm(vectors, axis=1, keepdims=True), 1e-12)


def cached_vectors(embedder: Any, texts: Sequence[str], cache_dir: str | Path) -> np.ndarray:
    """The embedder's vectors for `texts`, computed once per (embedder pin, texts) and kept
    on disk (written to a temp file, then renamed): the dense arm and the multi-call
    methods embed the same fact banks again and again."""
    key = sha256_text(canonical_json([embedder.pin, list(texts)]))
    path = Path(cache_dir) / f"{key[:32]}.npy"
    if path.is_file():
        return np.load(path)
    vectors = embedder.encode(list(texts))
    path.parent.mkdir(parents=True, exist_ok=True)
    tmp = path.with_name(f".{path.name}.{os.getpid()}.tmp.npy")
    np.save(tmp, vectors)
    os.replace(tmp, path)
    return vectors


def _cuda() -> bool:
    import torch

    return torch.cuda.is_available()
