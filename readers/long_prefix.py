"""Two copies the transformers reader skips over a long shared prefix, answers unchanged.

Measured on the 1.5B reader answering over a 32K-token cached prefix (py-spy, one core,
table5 latest_state_full, 44 s a question): 24% of the time went to `DynamicLayer.update`,
which appends by `torch.cat` and so copies the whole cache at every forward step, and 19%
to `repeat_kv`, which expands the key/value heads to the query heads before the question's
own prefill attends to the prefix (sdpa's grouped-query mode is used in transformers only
without a mask, and a prefill after a cached prefix needs one).

- `GrowingLayer` keeps spare room after its keys and values and writes new ones in place;
  attention gets a view of the same values.
- `prefill_gqa_sdpa` hands multi-token attention with a mask to sdpa with `enable_gqa`
  instead of expanded copies; everything else goes to transformers' own sdpa function.

Both give attention the same numbers in the same order, so the logits are bitwise those of
the stock path (tests/readers/test_long_prefix.py compares them on the tiny model); the
request pin keeps `sdpa`, as the kernel and its results are sdpa's.
"""
from __future__ import annotations

from typing import Any

import torch
from transformers import AttentionInterface, DynamicCache, PreTrainedModel
from transformers.cache_utils import DynamicLayer
from transformers.integrations.sdpa_attention import sdpa_attention_forward
from transformers.masking_utils import AttentionMaskInterface, sdpa_mask

PREFILL_GQA_SDPA = "sdpa_prefill_gqa"  # registered name; the pin still says sdpa (same kernel, same numbers)


class GrowingLayer(DynamicLayer):
    """A full-attention cache layer that appends in place. Room beyond what is stored is at
    least HEADROOM tokens, so a question and its answer after a cached prefix fit in the room
    the prefix was stored with (a deep copy of the prefix copies that room too)."""

    HEADROOM = 512

    def __init__(self) -> None:
        self._key_room: torch.Tensor | None = None
        self._value_room: torch.Tensor | None = None
        self._length = 0
        super().__init__()

    # The base class reads and assigns `keys` / `values` (crop, offload, reorder): views of the
    # stored part, and an assignment replaces the room with exactly what was assigned.
    @property
    def keys(self) -> torch.Tensor | None:  # type: ignore[override]
        room = self._key_room
        return room if room is None or room.dim() < 4 else room[..., :self._length, :]

    @keys.setter
    def keys(self, value: torch.Tensor | None) -> None:
        self._key_room = value
        self._length = 0 if value is None or value.dim() < 4 else value.shape[-2]

    @property
    def values(self) -> torch.Tensor | None:  # type: ignore[override]
        room = self._value_room
        return room if room is None or room.dim() < 4 else room[..., :self._length, :]

    @values.setter
    def values(self, value: torch.Tensor | None) -> None:
        self._value_room = value

    def update(self, key_states: torch.Tensor, value_states: torch.Tensor, *args: Any,
               **kwargs: Any) -> tuple[torch.Tensor, torch.Tensor]:
        if not self.is_initialized:
            self.lazy_initialization(key_states, value_states)
        start, end = self._length, self._length + key_states.shape[-2]
        room = self._key_room
        if room is None or room.dim() < 4 or end > room.shape[-2]:
            self._key_room = _grown(room, key_states, start, end + max(self.HEADROOM, end // 8))
            self._value_room = _grown(self._value_room, value_states, start, self._key_room.shape[-2])
        self._key_room[..., start:end, :] = key_states
        self._value_room[..., start:end, :] = value_states
        self._length = end
        return self.keys, self.values


def _grown(room: torch.Tensor | None, states: torch.Tensor, stored: int, capacity: int) -> torch.Tensor:
    """A new room of `capacity` tokens holding the first `stored` tokens of the old one."""
    new = states.new_empty((*states.shape[:-2], capacity, states.shape[-1]))
    if stored:
        new[..., :stored, :] = room[..., :stored, :]
    return new


def new_cache(model: PreTrainedModel) -> DynamicCache:
    """The model's own dynamic cache, its plain full-attention layers replaced by growing ones
    (sliding-window and linear-attention layers are kept as they are)."""
    cache = DynamicCache(config=model.config)
    cache.layers = [GrowingLayer() if type(layer) is DynamicLayer else layer for layer in cache.layers]
    return cache


def prefill_gqa_sdpa(module: torch.nn.Module, query: torch.Tensor, key: torch.Tensor, value: torch.Tensor,
                     attention_mask: torch.Tensor | None, dropout: float = 0.0, scaling: float | None = None,
                     **kwargs: Any) -> tuple[torch.Tensor, None]:
    """sdpa_attention_forward, except that a masked multi-token query over grouped key/value
    heads is given to sdpa as it is (`enable_gqa`) rather than over `repeat_kv` copies."""
    groups = getattr(module, "num_key_value_groups", 1)
    if (groups == 1 or query.shape[2] == 1 or attention_mask is None or kwargs.get("position_bias") is not None
            or kwargs.get("softcap") is not None or kwargs.get("output_attentions", False)):
        return sdpa_attention_forward(module, query, key, value, attention_mask, dropout=dropout, scaling=scaling,
                                      **kwargs)
    out = torch.nn.functional.scaled_dot_product_attention(query, key, value, attn_mask=attention_mask,
                                                           dropout_p=dropout, scale=scaling, enable_gqa=True)
    return out.transpose(1, 2).contiguous(), None


def use_prefill_gqa(model: PreTrainedModel) -> None:
    """Switch a model loaded with sdpa to `prefill_gqa_sdpa` (registered once per process).
    CPU only (as is the growing cache, see HFReader): on CUDA transformers avoids a masked
    grouped-query call, which falls back to sdpa's math kernel (its note in sdpa_attention.py),
    so there the numbers would not be those of the kernel it picks."""
    if PREFILL_GQA_SDPA not in AttentionInterface._global_mapping:
        AttentionInterface.register(PREFILL_GQA_SDPA, prefill_gqa_sdpa)
        AttentionMaskInterface.register(PREFILL_GQA_SDPA, sdpa_mask)
    model.set_attn_implementation(PREFILL_GQA_SDPA)
