"""GGUF to transformers: de-quantize a verified GGUF into a plain bf16 Hugging Face folder
(safetensors, tokenizer, generation config with the right stop tokens), record which library
versions made it, and make the folder shareable and durable before it is installed.

Separate from readers/offline.py, which obtains the bytes and owns the cache (lock,
marker, atomic rename): this is the one recipe that decides what lands in the folder, and
CONVERT_VERSION names it.
"""
from __future__ import annotations

import contextlib
import os
from importlib.metadata import PackageNotFoundError, version
from pathlib import Path
from typing import Any

from common.errors import DataError
from readers.gguf_bytes import INSTALL_HINT

CONVERT_VERSION = 2  # bump when the recipe changes what lands in the folder (2: transformers 5 unpacking;
                     # the 0.5B's tensors, template, token ids and stop list equal 1's, checked)


def convert_gguf(gguf: Path, out: Path, dtype: str = "bfloat16") -> None:
    """De-quantize with transformers and save a plain HF folder (safetensors + tokenizer)."""
    import torch
    from transformers import AutoConfig, AutoModelForCausalLM, AutoTokenizer, GgufConfig

    try:
        import gguf as _gguf  # noqa: F401
    except ImportError as exc:
        raise DataError(f"converting {gguf.name} needs the `gguf` package; run `{INSTALL_HINT}`") from exc
    torch_dtype = getattr(torch, dtype)
    folder, name = str(gguf.parent), gguf.name
    # Parsing the GGUF metadata (the 151k-token vocab) takes ~15 s each time; handing the
    # config to the model load saves one of the three parses.
    config = AutoConfig.from_pretrained(folder, gguf_file=name)
    tokenizer = AutoTokenizer.from_pretrained(folder, gguf_file=name)
    # transformers 5 keeps GGUF blocks packed unless told to unpack them, and a packed model
    # cannot be saved: this folder is the plain dense model.
    model = AutoModelForCausalLM.from_pretrained(folder, gguf_file=name, config=config, dtype=torch_dtype,
                                                 quantization_config=GgufConfig(dequantize=True))
    _align_eos(model, tokenizer)
    model.save_pretrained(out, safe_serialization=True)
    tokenizer.save_pretrained(out)
    del model


def _align_eos(model: Any, tokenizer: Any) -> None:
    """A turn ends with the GGUF's eos (<|im_end|>); generation also stops on <|endoftext|>,
    as the official instruct repos' generation config says ([im_end, endoftext]).
    transformers 4.x's GGUF converter reported <|endoftext|> as the tokenizer's eos (made the
    pad token here), 5.x reports <|im_end|> and <|endoftext|> as pad: either way the stop list
    is the GGUF eos, then the other of the two."""
    gguf_eos = model.config.eos_token_id
    if not isinstance(gguf_eos, int):
        return
    previous = tokenizer.eos_token_id
    if previous not in (None, gguf_eos):
        tokenizer.eos_token = tokenizer.convert_ids_to_tokens(gguf_eos)
        if tokenizer.pad_token_id is None:
            tokenizer.pad_token = tokenizer.convert_ids_to_tokens(previous)
    other = next((t for t in (previous, tokenizer.pad_token_id) if t not in (None, gguf_eos)), None)
    model.generation_config.eos_token_id = [gguf_eos] if other is None else [gguf_eos, other]


def converter_versions() -> dict[str, str]:
    """The installed versions of the libraries the recipe runs on, for the folder marker."""
    out: dict[str, str] = {}
    for dist in ("torch", "transformers", "gguf", "tokenizers", "safetensors"):
        with contextlib.suppress(PackageNotFoundError):
            out[dist] = version(dist)
    return out


def finish_tree(root: Path) -> None:
    """Make the folder world-readable (save_pretrained leaves safetensors at 0600, which
    breaks a cache shared between users) and flush it to disk before the rename."""
    for path in root.rglob("*"):
        if path.is_file():
            path.chmod(0o644)
            with open(path, "rb") as handle:
                os.fsync(handle.fileno())
    root.chmod(0o755)
    with contextlib.suppress(OSError):
        fd = os.open(root, os.O_RDONLY)
        try:
            os.fsync(fd)
        finally:
            os.close(fd)
