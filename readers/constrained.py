"""Constrained decoding in the local engines: a request's Constraint (a JSON schema or a
GBNF grammar, common/calls.py) enforced token by token, so a reply outside it cannot be
decoded at all.

transformers: llguidance (`pip install .[readers]`) computes, before every step, the set of
tokens that keep the text inside the grammar; every other logit is set to -inf, so greedy
decoding takes the best token the grammar allows, and EOS only once the grammar may end.
llama.cpp: the engine's own grammar sampler (LlamaGrammar from the GBNF, or from the JSON
schema through llama.cpp's schema converter).
"""
from __future__ import annotations

import json
from functools import lru_cache
from typing import Any, Sequence

import torch
from transformers import LogitsProcessor, PreTrainedTokenizerBase

from common.calls import Constraint
from common.errors import DataError

# JSON is decoded compact in both engines, one layout (json.dumps with separators=(",", ":")):
# a weak model otherwise spends its cap on whitespace, and the engines' replies differ in it.
COMPACT_JSON = {"whitespace_flexible": False, "item_separator": ",", "key_separator": ":"}
_LLAMA_SPACE = '" "?'  # the space rule llama.cpp's schema converter writes


def llguidance_module() -> Any:
    """Import llguidance lazily: only a constrained request needs it."""
    try:
        import llguidance
        import llguidance.hf
        import llguidance.torch
    except ImportError as exc:
        raise DataError("constrained decoding with the transformers reader needs llguidance; "
                        "pip install .[readers]") from exc
    return llguidance


@lru_cache(maxsize=4)
def _ll_tokenizer(tokenizer: PreTrainedTokenizerBase, n_vocab: int, eos: tuple[int, ...]) -> Any:
    """llguidance's view of a tokenizer (about a second to build, so kept per tokenizer)."""
    return llguidance_module().hf.from_tokenizer(tokenizer, n_vocab=n_vocab, eos_token=list(eos))


class GrammarMask(LogitsProcessor):
    """Masks, at each decoding step, every token the constraint does not allow next. The
    matcher is built on the first step, when the logits' width (the model's vocabulary,
    often wider than the tokenizer's) is known; each later step first feeds it the token
    the step before chose."""

    def __init__(self, tokenizer: PreTrainedTokenizerBase, constraint: Constraint, start: int,
                 eos_token_ids: Sequence[int]) -> None:
        self.tokenizer, self.constraint, self.start = tokenizer, constraint, start
        self.eos = tuple(int(t) for t in eos_token_ids)
        self.matcher: Any = None
        self.mask: torch.Tensor | None = None

    def __call__(self, input_ids: torch.LongTensor, scores: torch.FloatTensor) -> torch.FloatTensor:
        llguidance = llguidance_module()
        if self.matcher is None:
            self.matcher = matcher(self.tokenizer, self.constraint, scores.shape[-1], self.eos)
            self.mask = llguidance.torch.allocate_token_bitmask(1, scores.shape[-1])
        elif input_ids.shape[1] > self.start and not self.matcher.consume_token(int(input_ids[0, -1])):
            raise RuntimeError(f"the grammar refused a token it allowed: {self.matcher.get_error()}")
        llguidance.torch.fill_next_token_bitmask(self.matcher, self.mask)
        llguidance.torch.apply_token_bitmask_inplace(scores, self.mask.to(scores.device))
        return scores


def matcher(tokenizer: PreTrainedTokenizerBase, constraint: Constraint, n_vocab: int, eos: tuple[int, ...]) -> Any:
    """An llguidance matcher of the constraint over this tokenizer; a grammar it cannot
    read is a DataError naming llguidance's complaint."""
    llguidance = llguidance_module()
    text = constraint.grammar
    if constraint.kind == "json_schema":
        schema = json.loads(text)
        text = json.dumps({**schema, "x-guidance": {**schema.get("x-guidance", {}), **COMPACT_JSON}})
    try:
        grammar = llguidance.grammar_from(constraint.kind, text)
    except ValueError as exc:
        raise DataError(f"constraint ({constraint.kind}) is not a grammar llguidance reads: {exc}") from exc
    built = llguidance.LLMatcher(_ll_tokenizer(tokenizer, n_vocab, eos), grammar)
    if built.is_error():
        raise DataError(f"constraint ({constraint.kind}) is not a grammar llguidance reads: {built.get_error()}")
    return built


def llama_grammar(llama_cpp: Any, constraint: Constraint) -> Any:
    """llama.cpp's grammar for the constraint: GBNF as it is, a JSON schema through
    llama.cpp's own converter, its optional space between JSON tokens taken out."""
    text = constraint.grammar
    try:
        if constraint.kind == "json_schema":  # compact, as llguidance is told to write it
            text = llama_cpp.llama_grammar.json_schema_to_gbnf(text).replace(f"space ::= {_LLAMA_SPACE}", 'space ::= ""')
        return llama_cpp.LlamaGrammar.from_string(text, verbose=False)
    except (ValueError, RuntimeError) as exc:
        raise DataError(f"constraint ({constraint.kind}) is not a grammar llama.cpp reads: {exc}") from exc
