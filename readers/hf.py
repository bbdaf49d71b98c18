"""Local transformers reader: a frozen causal LM at a pinned revision, greedy, batch size 1.

`prepare` fixes the exact token ids (chat template, thinking off, evidence left-truncated to
the input cap) so the request id covers everything the model sees; `generate` feeds those
ids as they are and never re-tokenizes. Optional prefix caching reuses the KV cache of the
long prefix that the questions of one history share; the cache appends in place and a
question's prefill over it skips sdpa's key/value copies (long_prefix.py: same logits).
"""
from __future__ import annotations

import copy
from collections import OrderedDict
from functools import cached_property
from typing import Any, Literal, Sequence

import torch
import transformers
from transformers import (AutoModelForCausalLM, AutoTokenizer, GenerationConfig, LogitsProcessorList, PreTrainedModel,
                          PreTrainedTokenizerBase, StoppingCriteria, StoppingCriteriaList)

from common.calls import Constraint, Prediction, Request, check_greedy, cut_at_stop, strip_think
from common.configurable import configurable
from common.errors import DataError
from common.io import canonical_json, sha256_text
from common.prompt import Prompt
from readers.compute import DTYPES, cpu_summary, resolve_dtype
from readers.constrained import GrammarMask
from readers.input_cap import evidence_cut, kept_evidence
from readers.long_prefix import new_cache, use_prefill_gqa
from readers.models import ModelSource

IDENTITY_SCHEME = 2  # what a request id covers; see HFReader.pin


def common_prefix_len(a: tuple[int, ...], b: tuple[int, ...]) -> int:
    return next((i for i, (x, y) in enumerate(zip(a, b)) if x != y), min(len(a), len(b)))


def answer_text(tokenizer: PreTrainedTokenizerBase, request: Request, new: Sequence[int],
                eos_token_ids: Sequence[int]) -> tuple[str, str]:
    """The answer text and finish reason of a request's new tokens: a chat answer without
    its reasoning block, a completion cut after its first stop string. Both engines use it."""
    text = tokenizer.decode(new, skip_special_tokens=True, clean_up_tokenization_spaces=False)
    eos = bool(new) and new[-1] in set(eos_token_ids)
    if request.completion is None:
        return strip_think(text), "stop" if eos else "length"
    text, stopped = cut_at_stop(text, request.stop)
    return text, "stop" if stopped or eos else "length"


class StopInContinuation(StoppingCriteria):
    """Stop once the decoded new tokens hold a stop string (`cut_at_stop`, as llama.cpp's
    loop checks). transformers' own `stop_strings` also match a stop string that begins in
    the prompt, which stopped a continuation the cut then found no stop string in."""

    def __init__(self, tokenizer: PreTrainedTokenizerBase, start: int, stops: Sequence[str]) -> None:
        self.tokenizer, self.start, self.stops = tokenizer, start, list(stops)

    def __call__(self, input_ids: torch.LongTensor, scores: Any, **kwargs: Any) -> torch.BoolTensor:
        text = self.tokenizer.decode(input_ids[0, self.start:], skip_special_tokens=True,
                                     clean_up_tokenization_spaces=False)
        return torch.full((input_ids.shape[0],), cut_at_stop(text, self.stops)[1], device=input_ids.device)


@configurable
class HFReader:
    """transformers AutoModelForCausalLM reader. Weights and tokenizer load lazily, so
    building a reader from config (and checking its model pin) costs nothing."""

    concurrency = 1  # one in-process model generates one request at a time

    PREFIX_CACHE_ENTRIES = 2  # a history's head and the one before it; KV caches are large
    MIN_PREFIX_TOKENS = 64  # a shorter head is not worth a cache copy (or an eviction)

    def __init__(
        self,
        name: str,
        model: ModelSource,
        dtype: Literal["auto", "float32", "bfloat16", "float16"] = "float16",
        attn_implementation: str = "sdpa",
        max_new_tokens: int = 64,
        max_input_tokens: int | None = None,
        enable_thinking: bool = False,
        prefix_cache: bool = False,
        device: str = "auto",
        chat_template_kwargs: dict[str, Any] | None = None,
    ) -> None:
        self.name, self.source = name, model
        self.attn_implementation, self.max_new_tokens = attn_implementation, max_new_tokens
        self.max_input_tokens, self.enable_thinking, self.prefix_cache = max_input_tokens, enable_thinking, prefix_cache
        self.device = ("cuda" if torch.cuda.is_available() else "cpu") if device == "auto" else device
        self.dtype_setting = dtype
        self.dtype = resolve_dtype(dtype, self.device)  # `auto`: from this machine, until a manifest freezes it
        self._legacy_transformers: str | None = None  # set by freeze() for runs made under identity scheme 1
        # Extra template variables that must be fixed for reproducibility, e.g. Llama 3.1's
        # `date_string`, which otherwise defaults to today's date.
        self.chat_template_kwargs = dict(chat_template_kwargs or {})
        self.prefill_tokens_total = 0  # prompt tokens of every generated request
        self.prefill_tokens_saved = 0  # of those, tokens whose KV came from the prefix cache
        self._prefixes: OrderedDict[tuple[int, ...], Any] = OrderedDict()
        self._shared_head: dict[tuple[int, ...], int] = {}  # prepared ids -> question-independent prefix length
        self._questionless: tuple[tuple[str, str], tuple[int, ...]] | None = None

    @cached_property
    def tokenizer(self) -> PreTrainedTokenizerBase:
        tokenizer = AutoTokenizer.from_pretrained(self.source.resolve())
        if not tokenizer.chat_template:
            raise DataError(f"{self.source.pin}: tokenizer has no chat template; an instruct model is required")
        return tokenizer

    @cached_property
    def model(self) -> PreTrainedModel:
        model = AutoModelForCausalLM.from_pretrained(
            self.source.resolve(), dtype=getattr(torch, self.dtype), attn_implementation=self.attn_implementation)
        eos = model.generation_config.eos_token_id
        if eos is None:
            eos = self.tokenizer.eos_token_id
        eos = [eos] if isinstance(eos, int) else list(eos)
        pad = self.tokenizer.pad_token_id
        # A fresh config drops the checkpoint's sampling defaults (temperature, top_p,
        # repetition_penalty...): the protocol is plain greedy whatever the model ships.
        model.generation_config = GenerationConfig(eos_token_id=eos, pad_token_id=eos[0] if pad is None else pad)
        if self.attn_implementation == "sdpa" and self.device == "cpu":
            use_prefill_gqa(model)  # sdpa's numbers, without copies over a long prefix (long_prefix.py)
        return model.to(self.device).eval()

    @cached_property
    def chat_template_sha256(self) -> str:
        template = self.tokenizer.chat_template  # a dict when a model ships several named templates
        return sha256_text(template if isinstance(template, str) else canonical_json(template))

    @property
    def pin(self) -> dict[str, Any]:
        """What fixes this reader's output, and so enters every request id (a fresh dict each
        time: requests hold it). Identity scheme 2 holds the weights' content pin, chat
        template, dtype, attention kernel and engine; library versions and CPU features are
        recorded in the manifest and each prediction's `runtime`, not here, so upgrading
        transformers does not orphan every stored answer. Runs sealed under scheme 1 (no
        `identity_scheme` key, the transformers version inside) keep their ids: see freeze()."""
        pin = {**self.source.pin, "chat_template_sha256": self.chat_template_sha256,
               "dtype": self.dtype, "attn_implementation": self.attn_implementation, "backend": "transformers"}
        if self._legacy_transformers is not None:
            return {**pin, "transformers": self._legacy_transformers}
        return {**pin, "identity_scheme": IDENTITY_SCHEME}

    def freeze(self, frozen_pin: dict[str, Any]) -> None:
        """Adopt what a run's frozen manifest fixed, instead of re-resolving it on this
        machine: the dtype `auto` chose when the run started (a resumed run on another CPU
        keeps it), and the identity scheme its request ids were made under."""
        dtype = frozen_pin.get("dtype")
        if self.dtype_setting == "auto" and dtype in DTYPES and dtype != self.dtype:
            if "model" in self.__dict__:
                raise RuntimeError(f"{self.name}: freeze() after the weights loaded in {self.dtype}")
            self.dtype = dtype
        if "identity_scheme" not in frozen_pin and "transformers" in frozen_pin:
            self._legacy_transformers = str(frozen_pin["transformers"])

    def preflight(self) -> None:
        """An in-process model has nothing to reach; loading errors surface on first use."""

    def counters(self) -> dict[str, int]:
        """Prefix-cache totals: prompt tokens generated over, and those whose KV was reused."""
        return {"prefill_tokens_total": self.prefill_tokens_total, "prefill_tokens_saved": self.prefill_tokens_saved}

    @property
    def runtime(self) -> dict[str, Any]:
        """Recorded with each prediction: where it ran (not identity, see pin)."""
        return {"engine": "transformers", "transformers": transformers.__version__, "torch": torch.__version__,
                "device": self.device, **cpu_summary()}

    @property
    def model_id(self) -> str:
        pin = self.source.pin
        return f"{pin['repo']}@{pin['revision']}" if "repo" in pin and "revision" in pin else canonical_json(pin)

    def _render(self, prompt: Prompt, evidence: str, question: str) -> tuple[list[dict[str, str]], list[int]]:
        messages = prompt.messages(evidence, question)
        text = self.tokenizer.apply_chat_template(
            messages, tokenize=False, add_generation_prompt=True, enable_thinking=self.enable_thinking,
            **self.chat_template_kwargs)
        # The template writes any BOS itself; adding special tokens again would double it.
        return messages, self.tokenizer(text, add_special_tokens=False)["input_ids"]

    def prepare(self, prompt: Prompt, evidence: str, question: str) -> Request:
        """Tokenize the chat; over the input cap, drop the evidence's oldest tokens (its own
        tokenization), one cut per evidence (readers/input_cap.py). The messages keep the
        cut evidence, so re-rendering them reproduces the input ids exactly."""
        messages, ids = self._render(prompt, evidence, question)
        cut, kept = 0, evidence
        cap = self.max_input_tokens
        if cap is not None and len(ids) > cap:
            starts = [s for s, _ in self.tokenizer(
                evidence, add_special_tokens=False, return_offsets_mapping=True)["offset_mapping"]]
            fitted = evidence_cut(lambda e, q: self._render(prompt, e, q), starts, evidence, question, cap)
            if fitted is None:
                raise DataError(f"{self.name}: input cap {cap} cannot hold the prompt without evidence "
                                f"({len(self._render(prompt, '', question)[1])} tokens)")
            cut, (messages, ids) = fitted
            kept = kept_evidence(evidence, starts, cut)
        if self.prefix_cache:
            # The question-independent head (system, evidence, query text before the
            # question): tokens shared with the same rendering without a question.
            self._shared_head[tuple(ids)] = common_prefix_len(tuple(ids), self._questionless_ids(prompt, kept))
        return Request(
            reader=self.name, pin=self.pin, prompt_version=prompt.version, messages=tuple(messages),
            generation={"max_new_tokens": self.max_new_tokens, "do_sample": False},
            input_ids=tuple(ids), evidence_truncated_tokens=cut)

    def prepare_completion(self, text: str, prompt_version: str, max_new_tokens: int, stop: Sequence[str] = (),
                           temperature: float = 0.0) -> Request:
        """Raw text tokenized as the released methods tokenize it (the tokenizer's default
        special tokens, no chat template). Over the input cap is an error: a method's prompt
        has no evidence block to cut."""
        check_greedy(self.name, temperature)
        ids = self.tokenizer(text)["input_ids"]
        if self.max_input_tokens is not None and len(ids) > self.max_input_tokens:
            raise DataError(f"{self.name}: completion of {len(ids)} tokens exceeds the input cap {self.max_input_tokens}")
        return Request(reader=self.name, pin=self.pin, prompt_version=prompt_version, messages=(),
                       generation={"max_new_tokens": int(max_new_tokens), "do_sample": False, "stop": list(stop)},
                       input_ids=tuple(ids), completion=text)

    @torch.inference_mode()
    def generate(self, request: Request) -> Prediction:
        """Greedy decoding of exactly request.input_ids. Only an out-of-memory error becomes
        a failed prediction; anything else is a bug and raises."""
        if request.input_ids is None:
            raise ValueError(f"request {request.id} has no input ids; prepare it with this reader")
        if request.reader != self.name or request.pin != self.pin:
            raise ValueError(f"request {request.id} was prepared for {request.reader} {request.pin}, "
                             f"not {self.name} {self.pin}")
        if self._legacy_transformers not in (None, transformers.__version__):
            raise DataError(f"request {request.id[:12]} belongs to a run made under identity scheme 1 with "
                            f"transformers {self._legacy_transformers}; this is {transformers.__version__}, and a new "
                            f"answer would carry the wrong version in its id. Finish that run with transformers "
                            f"{self._legacy_transformers}, or move its work folder away and start it again")
        try:
            new = self._generate_ids(request.input_ids, request.generation, request.constraint)
        except torch.OutOfMemoryError as exc:
            if self.device.startswith("cuda"):
                torch.cuda.empty_cache()
            return Prediction(request.id, None, model=self.model_id, error=f"OutOfMemoryError: {exc}")
        raw, finish_reason = answer_text(self.tokenizer, request, new, self.model.generation_config.eos_token_id)
        return Prediction(request_id=request.id, raw=raw, finish_reason=finish_reason,
                          usage={"prompt_tokens": len(request.input_ids), "completion_tokens": len(new)},
                          model=self.model_id, runtime=self.runtime)

    def _generate_ids(self, ids: tuple[int, ...], generation: dict[str, Any], constraint: Constraint | None = None
                      ) -> list[int]:
        inputs = torch.tensor([ids], device=self.device)
        self.prefill_tokens_total += len(ids)
        cache, reused = self._cached_prefix(ids) if self.prefix_cache else (None, 0)
        self.prefill_tokens_saved += reused
        if cache is None:
            cache = self._fresh_cache()
        generation = dict(generation)
        if stop := generation.pop("stop", None):  # a completion's stop strings, in the continuation only
            generation["stopping_criteria"] = StoppingCriteriaList([StopInContinuation(self.tokenizer, len(ids), stop)])
        if constraint is not None:  # readers/constrained.py: tokens outside the grammar masked at every step
            eos = self.model.generation_config.eos_token_id
            generation["logits_processor"] = LogitsProcessorList([GrammarMask(self.tokenizer, constraint, len(ids), eos)])
        out = self.model.generate(inputs, attention_mask=torch.ones_like(inputs), cache=cache, **generation)
        return out[0, len(ids):].tolist()

    def _questionless_ids(self, prompt: Prompt, evidence: str) -> tuple[int, ...]:
        """The rendering without a question, kept for the last evidence: the questions of one
        history share it, and rendering a 32K-token evidence again for each is the cost."""
        key = (prompt.version, evidence)
        if self._questionless is None or self._questionless[0] != key:
            self._questionless = (key, tuple(self._render(prompt, evidence, "")[1]))
        return self._questionless[1]

    def _fresh_cache(self) -> Any:
        """On a CPU, a cache that appends in place (generate's own copies itself at every step);
        elsewhere None, so generate builds its own: the fast path is checked bitwise on CPU only."""
        return new_cache(self.model) if self.device == "cpu" else None

    def _cached_prefix(self, ids: tuple[int, ...]) -> tuple[Any, int]:
        """A private copy of the KV cache of this request's question-independent head (known
        from `prepare`), and how many of its tokens came from storage. The head is prefilled
        alone, in one pass from the first token, and generation prefills the rest: where a
        prompt is cut into passes depends on the prompt only, never on the requests before it
        or where a sitting stopped (in bf16 another cut can change an answer). One full
        prefill per evidence block. Snapshots are never cropped, which keeps this exact for
        caches that cannot be cut back (linear-attention layers); the copy keeps stored caches
        clean, since generation appends to the cache it is given."""
        # At least one token must stay uncached: generation needs logits for the last one.
        head = ids[:min(self._shared_head.get(ids, 0), len(ids) - 1)]
        if len(head) < self.MIN_PREFIX_TOKENS:
            return None, 0
        reused = len(head) if head in self._prefixes else 0
        if not reused:
            step = torch.tensor([head], device=self.device)
            self._prefixes[head] = self.model(input_ids=step, cache=self._fresh_cache(), use_cache=True,
                                              logits_to_keep=1).cache
            while len(self._prefixes) > self.PREFIX_CACHE_ENTRIES:
                self._prefixes.popitem(last=False)
        self._prefixes.move_to_end(head)
        return copy.deepcopy(self._prefixes[head]), reused
