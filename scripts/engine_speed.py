"""Prefill and decode speed of the two CPU engines on the same requests: llama.cpp on the
Q4_K_M GGUF (reader=qwen25_coder_05b_llamacpp) vs transformers on the de-quantized copy in
the config's compute dtype (reader=qwen25_coder_05b, fp32). A one-off measurement, not a test.

    python scripts/engine_speed.py [--size 05b] [--decode 32] [--threads N] [--llama-cpp-only]

Both engines get identical token ids (a ~300- and a ~1,900-token FactConsolidation request
over the 6K history's first facts), start cold, and decode a fixed number of greedy tokens
(EOS ignored) so the decode rates cover the same work. Times are wall clock, 1 run each.
"""
from __future__ import annotations

import argparse
import sys
import time
from pathlib import Path
from typing import Callable

ROOT = Path(__file__).resolve().parent.parent
sys.path.insert(0, str(ROOT))

from tests.conftest import compose_config  # noqa: E402
from tests.readers.test_llamacpp import compose_prompt, evidence, question  # noqa: E402
from cmc.targets import instantiate_known  # noqa: E402

TARGETS = (300, 1900)  # prompt tokens


def llama_cpp_timer(reader) -> Callable[[tuple[int, ...], int], tuple[float, float]]:
    def run(ids: tuple[int, ...], decode: int) -> tuple[float, float]:
        llm = reader.llama(len(ids) + decode)
        llm.reset()
        start = time.perf_counter()
        llm.eval(list(ids))
        prefill = time.perf_counter() - start
        start = time.perf_counter()
        for _ in range(decode):
            llm.eval([llm.sample(temp=0.0, top_k=1, top_p=1.0, min_p=0.0, repeat_penalty=1.0)])
        return prefill, time.perf_counter() - start
    return run


def transformers_timer(reader) -> Callable[[tuple[int, ...], int], tuple[float, float]]:
    import torch

    model = reader.model

    @torch.inference_mode()
    def run(ids: tuple[int, ...], decode: int) -> tuple[float, float]:
        start = time.perf_counter()
        out = model(input_ids=torch.tensor([ids]), use_cache=True, logits_to_keep=1)
        prefill = time.perf_counter() - start
        start = time.perf_counter()
        for _ in range(decode):
            token = out.logits[:, -1].argmax(-1, keepdim=True)
            out = model(input_ids=token, past_key_values=out.past_key_values, use_cache=True)
        return prefill, time.perf_counter() - start
    return run


def requests(reader) -> list[tuple[int, ...]]:
    """The first request over n facts whose length reaches each target."""
    prompt, found, facts = compose_prompt(), [], 1
    for target in TARGETS:
        while len(ids := reader.prepare(prompt, evidence(facts), question(0)).input_ids) < target:
            facts += 1
        found.append(ids)
    return found


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--size", default="05b", choices=["05b", "15b"])
    parser.add_argument("--decode", type=int, default=32)
    parser.add_argument("--threads", type=int, help="llama.cpp threads (default: the usable CPUs)")
    parser.add_argument("--llama-cpp-only", action="store_true")
    args = parser.parse_args()
    threads = [f"reader.n_threads={args.threads}"] if args.threads else []
    cpp = instantiate_known(compose_config(f"reader=qwen25_coder_{args.size}_llamacpp", *threads).reader)
    hf = instantiate_known(compose_config(f"reader=qwen25_coder_{args.size}").reader)
    engines = [(f"llama.cpp {cpp.runtime['llama_cpp']} Q4_K_M, {cpp.n_threads} threads", llama_cpp_timer(cpp))]
    if not args.llama_cpp_only:
        engines.append((f"transformers {hf.dtype}", transformers_timer(hf)))
    batch = requests(cpp)
    print(f"llama.cpp system info: {cpp.runtime['system_info']}")
    print(f"| engine | prompt tokens | prefill s | prefill tok/s | decode tok/s ({args.decode} tokens) |")
    print("|---|---:|---:|---:|---:|")
    for engine, timer in engines:
        timer(batch[0][:32], 2)  # warm-up: load weights, allocate
        for ids in batch:
            prefill, decode = timer(ids, args.decode)
            print(f"| {engine} | {len(ids)} | {prefill:.2f} | {len(ids) / prefill:.0f} | {args.decode / decode:.1f} |",
                  flush=True)


if __name__ == "__main__":
    main()
