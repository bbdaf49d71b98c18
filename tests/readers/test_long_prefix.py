"""The long-prefix fast path (in-place cache, grouped-query prefill) against the stock
transformers path it replaces: same stored values, bitwise the same logits."""
from __future__ import annotations

import copy
from pathlib import Path

import pytest
import torch
from hypothesis import given, settings
from hypothesis import strategies as st
from transformers import AutoModelForCausalLM, DynamicCache
from transformers.cache_utils import DynamicLayer

from readers.long_prefix import PREFILL_GQA_SDPA, GrowingLayer, new_cache, use_prefill_gqa


@settings(max_examples=40, deadline=None)
@given(st.lists(st.integers(1, 700), min_size=1, max_size=6), st.integers(0, 2**16))
def test_a_growing_layer_holds_what_concatenation_holds(steps: list[int], seed: int) -> None:
    generator = torch.Generator().manual_seed(seed)
    growing, reference = GrowingLayer(), DynamicLayer()
    stored = 0
    for n in steps:
        k, v = (torch.randn(1, 2, n, 4, generator=generator) for _ in range(2))
        got, expected = growing.update(k, v), reference.update(k, v)
        stored += n
        assert all(torch.equal(a, b) for a, b in zip(got, expected))
        assert growing.get_seq_length() == reference.get_seq_length() == stored
        assert growing._key_room.shape[-2] >= stored  # and the room only grows when it must:
    assert growing._key_room.shape[-2] < stored + GrowingLayer.HEADROOM + max(stored // 8, 1) + max(steps)


def test_a_copied_layer_is_independent_and_appends_in_place() -> None:
    stored = GrowingLayer()
    stored.update(torch.ones(1, 2, 10, 4), torch.ones(1, 2, 10, 4))
    private = copy.deepcopy(stored)
    room = private._key_room
    private.update(torch.zeros(1, 2, 3, 4), torch.zeros(1, 2, 3, 4))
    assert private._key_room is room, "an append within the room reallocated"
    assert private.get_seq_length() == 13 and stored.get_seq_length() == 10
    assert torch.equal(stored.keys, torch.ones(1, 2, 10, 4))


def _load(model_dir: Path, dtype: torch.dtype, fast: bool):
    model = AutoModelForCausalLM.from_pretrained(model_dir, dtype=dtype, attn_implementation="sdpa").eval()
    if fast:
        use_prefill_gqa(model)
    return model


@pytest.mark.parametrize("dtype", [torch.float32, torch.bfloat16])
def test_logits_are_bitwise_the_stock_paths(tiny_model_dir: Path, dtype: torch.dtype,
                                            monkeypatch: pytest.MonkeyPatch) -> None:
    """A cached prefix, a question prefilled over it (masked, several tokens), then greedy
    decoding: every step's logits equal the stock model's with its DynamicCache, and the
    grouped-query branch did run."""
    stock, fast = _load(tiny_model_dir, dtype, False), _load(tiny_model_dir, dtype, True)
    assert fast.config._attn_implementation == PREFILL_GQA_SDPA and fast.config.num_key_value_heads < \
        fast.config.num_attention_heads
    sdpa, grouped = torch.nn.functional.scaled_dot_product_attention, []

    def recording_sdpa(query, key, value, **kwargs):
        grouped.append(kwargs.get("enable_gqa", False) and kwargs.get("attn_mask") is not None and query.shape[2] > 1)
        return sdpa(query, key, value, **kwargs)

    monkeypatch.setattr(torch.nn.functional, "scaled_dot_product_attention", recording_sdpa)
    ids = torch.randint(5, fast.config.vocab_size, (1, 300), generator=torch.Generator().manual_seed(1))
    prefix, question = ids[:, :260], ids[:, 260:]
    with torch.no_grad():
        caches = DynamicCache(config=stock.config), new_cache(fast)
        assert all(isinstance(layer, GrowingLayer) for layer in caches[1].layers)
        outs = [m(input_ids=prefix, cache=c, use_cache=True) for m, c in zip((stock, fast), caches)]
        assert torch.equal(outs[0].logits, outs[1].logits)
        caches = DynamicCache(config=stock.config), copy.deepcopy(outs[1].cache)
        for layer, stored in zip(caches[0].layers, outs[0].cache.layers):
            layer.update(stored.keys.clone(), stored.values.clone())
        step = question
        for _ in range(12):
            outs = [m(input_ids=step, cache=c, use_cache=True) for m, c in zip((stock, fast), caches)]
            assert torch.equal(outs[0].logits, outs[1].logits)
            step = outs[0].logits[:, -1:].argmax(-1)
    assert any(grouped), "the masked multi-token prefill did not take the grouped-query branch"
