"""The tiny Qwen2 model (tests/readers/tiny_model.py) as an f32 GGUF, written with the `gguf`
package's writer, so the llama.cpp engine runs on the same weights and tokenizer as the
transformers one, offline and in a second. Its text is as much noise as the tiny model's."""
from __future__ import annotations

import hashlib
import json
from pathlib import Path
from typing import Any

import numpy as np
from safetensors.numpy import load_file

# transformers' Qwen2 tensor names -> llama.cpp's (per layer, then the rest); the output
# matrix is tied to the embeddings, which llama.cpp reuses when `output.weight` is absent.
_LAYER = {"input_layernorm.weight": "attn_norm.weight", "post_attention_layernorm.weight": "ffn_norm.weight",
          "self_attn.o_proj.weight": "attn_output.weight", "mlp.gate_proj.weight": "ffn_gate.weight",
          "mlp.up_proj.weight": "ffn_up.weight", "mlp.down_proj.weight": "ffn_down.weight",
          **{f"self_attn.{x}_proj.{p}": f"attn_{x}.{p}" for x in "qkv" for p in ("weight", "bias")}}
_GLOBAL = {"model.embed_tokens.weight": "token_embd.weight", "model.norm.weight": "output_norm.weight"}


def gguf_name(name: str) -> str:
    if name in _GLOBAL:
        return _GLOBAL[name]
    _, _, layer, rest = name.split(".", 3)  # model.layers.<i>.<rest>
    return f"blk.{layer}.{_LAYER[rest]}"


def _tokenizer(writer: Any, folder: Path, config: dict[str, Any]) -> None:
    import gguf

    data = json.loads((folder / "tokenizer.json").read_text())
    vocab = {**data["model"]["vocab"], **{t["content"]: t["id"] for t in data["added_tokens"]}}
    tokens = sorted(vocab, key=vocab.get)
    kinds = {t["content"]: gguf.TokenType.CONTROL if t["special"] else gguf.TokenType.USER_DEFINED
             for t in data["added_tokens"]}
    writer.add_tokenizer_model("gpt2")
    writer.add_tokenizer_pre("qwen2")  # the split tiny_model.QWEN2_SPLIT copies
    writer.add_token_list(tokens)
    writer.add_token_types([kinds.get(t, gguf.TokenType.NORMAL) for t in tokens])
    writer.add_token_merges([m if isinstance(m, str) else " ".join(m) for m in data["model"]["merges"]])
    writer.add_bos_token_id(config["bos_token_id"])
    writer.add_eos_token_id(config["eos_token_id"])
    writer.add_pad_token_id(config["pad_token_id"])
    writer.add_add_bos_token(False)


def write_tiny_gguf(folder: Path, dest: Path) -> Path:
    """Write the model saved in `folder` as an f32 GGUF at `dest`."""
    import gguf

    config = json.loads((folder / "config.json").read_text())
    writer = gguf.GGUFWriter(str(dest), "qwen2")
    writer.add_context_length(config["max_position_embeddings"])
    writer.add_embedding_length(config["hidden_size"])
    writer.add_feed_forward_length(config["intermediate_size"])
    writer.add_block_count(config["num_hidden_layers"])
    writer.add_head_count(config["num_attention_heads"])
    writer.add_head_count_kv(config["num_key_value_heads"])
    writer.add_rope_freq_base(config["rope_parameters"]["rope_theta"])
    writer.add_layer_norm_rms_eps(config["rms_norm_eps"])
    writer.add_file_type(gguf.LlamaFileType.ALL_F32)
    _tokenizer(writer, folder, config)
    for name, tensor in load_file(str(folder / "model.safetensors")).items():
        if name != "lm_head.weight":
            writer.add_tensor(gguf_name(name), np.ascontiguousarray(tensor, dtype=np.float32))
    writer.write_header_to_file()
    writer.write_kv_data_to_file()
    writer.write_tensors_to_file()
    writer.close()
    return dest


class TinyGGUFSource:
    """A model source the llama.cpp reader accepts (as PyPIGGUFModel): the GGUF for the
    engine, the transformers folder for the tokenizer and stop tokens."""

    def __init__(self, folder: Path, gguf_file: Path) -> None:
        self.folder, self.gguf_file = folder, gguf_file
        digest = hashlib.sha256(gguf_file.read_bytes()).hexdigest()
        self.pin = {"gguf_sha256": digest, "gguf_file": gguf_file.name, "hub_repo": "local/tiny",
                    "hub_revision": "none", "repo": "local/tiny", "revision": "none"}

    def gguf_path(self) -> Path:
        return self.gguf_file

    def resolve(self) -> str:
        return str(self.folder)
