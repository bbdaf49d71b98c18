"""Tiny, randomly initialised checkpoints in the hub layout of the paper's readers, built
offline in a second: Qwen3.5 (`model_type: qwen3_5`, a vision tower beside a text model of
linear- and full-attention layers, as Qwen/Qwen3.5-4B ships) and Llama 3.1 (a
PreTrainedTokenizerFast tokenizer and a template with a `date_string`). Their answers are
noise; they exist so the user's own command runs the real loading, template and generation
code of those architectures without the hub.
"""
from __future__ import annotations

import json
from pathlib import Path

import torch
from transformers import LlamaConfig, LlamaForCausalLM
from transformers.models.qwen3_5 import Qwen3_5Config, Qwen3_5ForConditionalGeneration

from tests.readers.tiny_model import chat_tokenizer

# Llama 3.1's template, reduced to what the harness sends: the system header carries the
# date (today's unless `date_string` is given), then one header per message.
LLAMA31_TEMPLATE = (
    "{{- bos_token }}"
    "{%- if not date_string is defined %}{%- set date_string = '26 Jul 2024' %}{%- endif %}"
    "{%- for message in messages %}"
    "{{- '<|start_header_id|>' + message['role'] + '<|end_header_id|>\\n\\n' }}"
    "{%- if message['role'] == 'system' %}{{- 'Today Date: ' + date_string + '\\n\\n' }}{%- endif %}"
    "{{- message['content'] + '<|eot_id|>' }}"
    "{%- endfor %}"
    "{%- if add_generation_prompt %}{{- '<|start_header_id|>assistant<|end_header_id|>\\n\\n' }}{%- endif %}"
)
LLAMA31_SPECIAL = ["<|begin_of_text|>", "<|start_header_id|>", "<|end_header_id|>", "<|eot_id|>"]


def build_tiny_qwen35(dest: Path, seed: int = 0) -> Path:
    """A qwen3_5 checkpoint as the hub lays it out (Qwen3_5ForConditionalGeneration), which
    AutoModelForCausalLM loads as its text model; three linear-attention layers and one
    full-attention layer, like the real 3:1 pattern."""
    tokenizer = chat_tokenizer()
    torch.manual_seed(seed)
    text = dict(vocab_size=len(tokenizer), hidden_size=32, intermediate_size=64, num_hidden_layers=4,
                num_attention_heads=2, num_key_value_heads=1, head_dim=16, linear_key_head_dim=8,
                linear_value_head_dim=8, linear_num_key_heads=2, linear_num_value_heads=2,
                layer_types=["linear_attention"] * 3 + ["full_attention"], max_position_embeddings=8192,
                eos_token_id=tokenizer.convert_tokens_to_ids("<|im_end|>"))
    vision = dict(depth=1, hidden_size=16, intermediate_size=32, num_heads=2, out_hidden_size=32, patch_size=2,
                  temporal_patch_size=1, spatial_merge_size=1)
    model = Qwen3_5ForConditionalGeneration(Qwen3_5Config(text_config=text, vision_config=vision))
    model.save_pretrained(dest)
    tokenizer.save_pretrained(dest)
    return dest


def build_tiny_llama31(dest: Path, seed: int = 0) -> Path:
    tokenizer = chat_tokenizer()
    tokenizer.add_special_tokens({"additional_special_tokens": LLAMA31_SPECIAL})
    tokenizer.bos_token, tokenizer.eos_token = "<|begin_of_text|>", "<|eot_id|>"
    tokenizer.chat_template = LLAMA31_TEMPLATE
    torch.manual_seed(seed)
    ids = tokenizer.convert_tokens_to_ids(["<|begin_of_text|>", "<|eot_id|>"])
    model = LlamaForCausalLM(LlamaConfig(
        vocab_size=len(tokenizer), hidden_size=32, intermediate_size=64, num_hidden_layers=2, num_attention_heads=2,
        num_key_value_heads=1, max_position_embeddings=8192, bos_token_id=ids[0], eos_token_id=ids[1]))
    model.save_pretrained(dest)
    tokenizer.save_pretrained(dest)
    # As the hub's tokenizer_config says: the tokenizer is tokenizer.json as it stands.
    config_path = dest / "tokenizer_config.json"
    config = json.loads(config_path.read_text())
    config_path.write_text(json.dumps({**config, "tokenizer_class": "PreTrainedTokenizerFast"}, indent=1))
    return dest
