"""`cmc-harness bench-readers` (`make bench-readers`): every CPU engine of one reader side by
side, on the same requests.

Three requests built by the harness from real data: a CMC-size question (~300 input tokens),
a fact-BM25-size one (~1,900) and an LLM-frontend extraction batch (20 statements, ~400
output tokens). Each engine runs in its own process (so peak RSS is its own), prefix cache
off (every prefill is cold): load time, prefill tok/s (time to the first new token), decode
tok/s (the rest), seconds per question at the 64-token cap, peak RSS. The physical decode
limit is printed beside them: measured memory bandwidth / bytes of weights read per token.
Ratios are against fp32, measured in the same run; absolute times are context only.

    cmc-harness bench-readers [--reader qwen25_coder_15b] [--engines fp32,bf16,llamacpp]
"""
from __future__ import annotations

import argparse
import dataclasses
import json
import math
import resource
import subprocess
import sys
import tempfile
import time
from pathlib import Path
from typing import Any

from common.errors import DataError
from common.io import atomic_write_text
from harness.config import compose
from readers.compute import auto_dtype, cpu_summary

MIN_DECODE_TOKENS = 32  # a short answer's decode time is lost in the noise of two prefills
ENGINES = {  # name -> reader overrides (the llama.cpp reader config is <reader>_llamacpp)
    "fp32": ["reader.dtype=float32", "reader.prefix_cache=false"],
    "bf16": ["reader.dtype=bfloat16", "reader.prefix_cache=false"],
    "llamacpp": ["reader.prefix_cache=false"],
}


def build_requests(reader: Any, overrides: list[str], extraction_tokens: int) -> dict[str, Any]:
    """The three requests, prepared by this engine's reader from the same texts: the first
    multi-hop question of the 6K history with its CMC and its fact-BM25 evidence, and the
    extraction batch of that history's first 20 records."""
    from cmc.evidence import rebuild_text
    from cmc.frontends.llm import LLMFrontend
    from harness.runs import Run

    def run_of(arm: str) -> Run:
        return Run(compose(*overrides, f"arm={arm}", "population=quick", "population.per_cell=1"))

    run = run_of("cmc")
    question = next(q for q in run.questions if q.hop == "mh")
    history = run.dataset.histories[question.history_id]
    requests = {}
    for arm in ("cmc", "fact_bm25"):
        packet = next(p for p in run_of(arm).packets() if p["question_id"] == question.qid)
        requests[arm] = reader.prepare(run.prompt, rebuild_text(history, packet), question.text)
    with tempfile.TemporaryDirectory() as tmp:
        batch = LLMFrontend(reader, cache_dir=tmp, extractions_dir=tmp).batch_request(list(history.records[:20]), {}, {})
    requests["extraction"] = dataclasses.replace(
        batch, generation={**batch.generation, "max_new_tokens": extraction_tokens})
    return requests


def load_weights(reader: Any) -> None:
    """Load the engine's weights now, so the load is timed apart from the first request."""
    if hasattr(reader, "llama"):
        reader.llama(4096)
    else:
        reader.model  # noqa: B018  (a cached property: loads the weights)


def timed_generate(reader: Any, request: Any, new_tokens: int | None = None) -> tuple[float, Any]:
    """Seconds and prediction of one request, optionally at another generation cap."""
    if new_tokens is not None:
        request = dataclasses.replace(request, generation={**request.generation, "max_new_tokens": new_tokens})
    start = time.perf_counter()
    prediction = reader.generate(request)
    return time.perf_counter() - start, prediction


def child(engine: str, reader_name: str, extraction_tokens: int) -> dict:
    """One engine in this process: load, then each request cold, prefill then full."""
    from common.configurable import instantiate_known

    name = f"{reader_name}_llamacpp" if engine == "llamacpp" else reader_name
    overrides = [f"reader={name}", *ENGINES[engine]]
    reader = instantiate_known(compose(*overrides).reader)
    start = time.perf_counter()
    load_weights(reader)
    result = {"engine": engine, "reader": name, "load_s": round(time.perf_counter() - start, 2),
              "dtype": getattr(reader, "dtype", "gguf")}
    requests = build_requests(reader, overrides, extraction_tokens)
    timed_generate(reader, requests["cmc"], 2)  # warm-up
    for kind, request in requests.items():
        first_s, _ = timed_generate(reader, request, 1)
        total_s, prediction = timed_generate(reader, request)
        new = prediction.usage["completion_tokens"]
        result[kind] = {"input_tokens": len(request.input_ids), "new_tokens": new, "seconds": round(total_s, 2),
                        "prefill_tok_s": round(len(request.input_ids) / first_s, 1),
                        # from the difference of two runs: meaningful only over many new tokens
                        "decode_tok_s": round((new - 1) / (total_s - first_s), 2) if new >= MIN_DECODE_TOKENS else None}
    result["peak_rss_mib"] = round(resource.getrusage(resource.RUSAGE_SELF).ru_maxrss / 1024)
    return result


def memory_bandwidth_gbs(mib: int = 512, repeats: int = 5) -> float:
    """Best of a few large copies on all usable CPUs (torch copies in parallel, as decoding
    reads weights on all threads): bytes read + written per second."""
    import torch

    torch.set_num_threads(cpu_summary()["usable_cpus"])
    src = torch.ones(mib * 2**20 // 4)
    dst = torch.empty_like(src)
    best = min(_copy_seconds(src, dst) for _ in range(repeats))
    return round(2 * src.numel() * 4 / best / 1e9, 2)


def _copy_seconds(src, dst) -> float:
    start = time.perf_counter()
    dst.copy_(src)
    return time.perf_counter() - start


def weight_bytes(reader_name: str) -> dict[str, int]:
    """Bytes of weights read per decoded token, per engine: every parameter once (fp32 4 B,
    bf16 2 B), or the GGUF file (llama.cpp reads its quantized blocks as they are)."""
    from safetensors import safe_open

    from common.configurable import instantiate_known

    source = instantiate_known(compose(f"reader={reader_name}").reader).source
    with safe_open(str(source.resolve() / "model.safetensors"), "pt") as weights:
        params = sum(math.prod(weights.get_slice(key).get_shape()) for key in weights.keys())
    return {"fp32": 4 * params, "bf16": 2 * params, "llamacpp": source.gguf_path().stat().st_size}


def compare(results: list[dict], bandwidth: float, weights: dict[str, int]) -> list[dict]:
    """One row per engine: the measurements, the decode bound, and ratios against fp32."""
    base = next((r for r in results if r["engine"] == "fp32"), None)
    rows = []
    for r in results:
        row = {"engine": r["engine"], "dtype": r["dtype"], "load_s": r["load_s"], "peak_rss_mib": r["peak_rss_mib"],
               "decode_bound_tok_s": round(bandwidth * 1e9 / weights[r["engine"]], 1)}
        for kind in ("cmc", "fact_bm25", "extraction"):
            m = r[kind]
            row.update({f"{kind}_s": m["seconds"], f"{kind}_prefill_tok_s": m["prefill_tok_s"],
                        f"{kind}_decode_tok_s": m["decode_tok_s"]})
            if base:
                row[f"{kind}_speedup"] = round(base[kind]["seconds"] / m["seconds"], 2)
        rows.append(row)
    return rows


def markdown(rows: list[dict], header: dict) -> str:
    """The comparison table, headed by the machine it was measured on."""
    cols = ["engine", "dtype", "load_s", "cmc_s", "cmc_speedup", "fact_bm25_s", "fact_bm25_speedup",
            "cmc_prefill_tok_s", "fact_bm25_prefill_tok_s", "extraction_decode_tok_s", "extraction_speedup",
            "decode_bound_tok_s", "peak_rss_mib"]
    lines = [f"Reader {header['reader']}; CPU flags {', '.join(header['cpu']['cpu_flags'])}; "
             f"{header['cpu']['usable_cpus']} usable CPUs; memory bandwidth {header['bandwidth_gbs']} GB/s; "
             f"`dtype: auto` picks {header['auto_dtype']} here. Speedups: fp32 seconds / engine seconds, same run.",
             "", "| " + " | ".join(cols) + " |", "|" + "---|" * len(cols)]
    lines += ["| " + " | ".join(str(row.get(c, "")) for c in cols) + " |" for row in rows]
    return "\n".join(lines) + "\n"


def bench_readers_arguments(parser: argparse.ArgumentParser) -> None:
    parser.add_argument("--reader", default="qwen25_coder_15b")
    parser.add_argument("--engines", default="fp32,bf16,llamacpp")
    parser.add_argument("--extraction-tokens", type=int, default=400)
    parser.add_argument("--out", type=Path, default=Path("results/bench"))
    parser.add_argument("--child", help=argparse.SUPPRESS)


def bench_readers_main(args: argparse.Namespace) -> int:
    """Each engine in a child process of this command (its own peak RSS), then the table."""
    if args.child:
        print(json.dumps(child(args.child, args.reader, args.extraction_tokens)))
        return 0
    if unknown := [e for e in args.engines.split(",") if e not in ENGINES]:
        raise DataError(f"--engines: unknown {', '.join(unknown)} (known: {', '.join(ENGINES)})")
    results = []
    for engine in args.engines.split(","):
        done = subprocess.run([sys.executable, "-m", "harness.cli", "bench-readers", "--child", engine,
                               "--reader", args.reader, "--extraction-tokens", str(args.extraction_tokens)],
                              capture_output=True, text=True)
        if done.returncode != 0:
            print(f"engine {engine} failed:\n{done.stderr[-3000:]}", file=sys.stderr)
            return 1
        results.append(json.loads(done.stdout.strip().splitlines()[-1]))
        print(f"{engine}: {results[-1]}", flush=True)
    header = {"reader": args.reader, "cpu": cpu_summary(), "auto_dtype": auto_dtype("cpu"),
              "bandwidth_gbs": memory_bandwidth_gbs()}
    rows = compare(results, header["bandwidth_gbs"], weight_bytes(args.reader))
    args.out.mkdir(parents=True, exist_ok=True)
    stem = args.out / f"readers_{args.reader}"
    atomic_write_text(stem.with_suffix(".json"), json.dumps({**header, "engines": results, "rows": rows}, indent=1) + "\n")
    atomic_write_text(stem.with_suffix(".md"), markdown(rows, header))
    print(markdown(rows, header))
    return 0

