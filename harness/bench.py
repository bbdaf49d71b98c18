"""`cmc-harness bench` (`make bench`): compile cost per history and CMC read latency at 262K,
next to a naive reference that scans every subject per question, measured side by side in
one run. Absolute times are context only (2 shared cores); the ratio is the result.

    cmc-harness bench [--histories factconsolidation_6k,...] [--read-history factconsolidation_262k]
                      [--questions N] [--repeats N]

The options shrink the measurement (fewer histories, questions and repeats) so a smoke test
runs the same code in seconds; the defaults are the full benchmark.
"""
from __future__ import annotations

import argparse
import statistics
import time
from typing import Any, Callable

from cmc.anchor import scan_anchors
from cmc.graph import Memory, compile_memory
from cmc.read import CMCArm
from cmc.records import Question
from common.configurable import instantiate_known
from common.errors import DataError
from harness.config import compose
from harness.runs import build_frontend

READ_HISTORY = "factconsolidation_262k"


class NaiveScanCMC(CMCArm):
    """CMC with the anchor index replaced by a scan of every graph subject."""

    def select(self, question: Question, memory: Memory) -> Any:
        memory.anchors.anchors = lambda text: scan_anchors(memory.current.out, text)  # type: ignore[method-assign]
        return super().select(question, memory)


def timed(fn: Callable[[], Any], repeats: int) -> list[float]:
    """Wall time of each call; the result is released only after the clock stops, so the
    next call's timing does not include freeing this one's objects."""
    out = []
    for _ in range(repeats):
        start = time.perf_counter()
        result = fn()
        out.append(time.perf_counter() - start)
        del result
    return out


def p95(values: list[float]) -> float:
    """The 95th percentile (inclusive); a single value is its own."""
    return statistics.quantiles(values, n=20, method="inclusive")[-1] if len(values) > 1 else values[0]


def bench_arguments(parser: argparse.ArgumentParser) -> None:
    parser.add_argument("--histories", help="comma-separated history ids to compile (default: all)")
    parser.add_argument("--read-history", default=READ_HISTORY, help=f"history of the read benchmark ({READ_HISTORY})")
    parser.add_argument("--questions", type=int, help="read only the first N questions of that history (default: all)")
    parser.add_argument("--repeats", type=int, default=20, help="timed reads per question (naive scan: a sixth, >= 1)")
    parser.add_argument("--override", action="append", default=[], metavar="KEY=VALUE", help="a config override")


def compile_times(dataset: Any, frontend: Any, histories: list[str], repeats: int) -> dict[str, Memory]:
    """Print parse and compile medians per history; return the compiled memories."""
    print("| history | records | parse median ms | compile median ms |")
    print("|---|---:|---:|---:|")
    memories = {}
    for hid in histories:
        history = dataset.histories[hid]
        extraction = frontend.extract(history)
        parse = timed(lambda: frontend.extract(history), repeats)
        build = timed(lambda: compile_memory(history, extraction), repeats)
        memories[hid] = compile_memory(history, extraction)
        print(f"| {hid} | {len(history)} | {statistics.median(parse) * 1e3:.1f} | {statistics.median(build) * 1e3:.1f} |")
    return memories


def bench_main(args: argparse.Namespace) -> int:
    """Compile every asked history, then time CMC's read against the naive scan, interleaved
    so both paths see the same machine state; their selections must agree."""
    cfg = compose(*args.override)
    dataset = instantiate_known(cfg.dataset).load()
    frontend = build_frontend(cfg.frontend)
    histories = args.histories.split(",") if args.histories else list(dataset.histories)
    hid = args.read_history
    if unknown := [h for h in {*histories, hid} if h not in dataset.histories]:
        raise DataError(f"--histories/--read-history: {', '.join(sorted(unknown))} not in {dataset.name} "
                        f"(it has {', '.join(dataset.histories)})")
    memories = compile_times(dataset, frontend, histories, max(1, args.repeats // 4))
    questions = dataset.questions_of(hid)[:args.questions]
    fast, naive = CMCArm(), NaiveScanCMC()
    read_s, naive_s, anchor_s = [], [], []
    fast_memory = memories.get(hid) or compile_memory(dataset.histories[hid], frontend.extract(dataset.histories[hid]))
    naive_memory = compile_memory(dataset.histories[hid], frontend.extract(dataset.histories[hid]))
    for question in questions:
        if fast.select(question, fast_memory).positions != naive.select(question, naive_memory).positions:
            raise AssertionError(f"{question.qid}: the indexed and the naive read selected different records")
        read_s += timed(lambda: fast.select(question, fast_memory), args.repeats)
        naive_s += timed(lambda: naive.select(question, naive_memory), max(1, args.repeats // 6))
        anchor_s += timed(lambda: fast_memory.anchors.anchors(question.text), args.repeats)
    (f_med, f_p95), (n_med, n_p95), (a_med, a_p95) = ((statistics.median(xs) * 1e6, p95(xs) * 1e6)
                                                      for xs in (read_s, naive_s, anchor_s))
    print(f"\nCMC read at {hid} over {len(questions)} questions (anchor + traverse + render):")
    print("| path | median us | p95 us |")
    print("|---|---:|---:|")
    print(f"| indexed anchors (CMC) | {f_med:.1f} | {f_p95:.1f} |")
    print(f"| naive subject scan | {n_med:.1f} | {n_p95:.1f} |")
    print(f"| anchor lookup alone | {a_med:.1f} | {a_p95:.1f} |")
    print(f"\nspeed-up of the indexed read over the naive scan: {n_med / f_med:.1f}x median, {n_p95 / f_p95:.1f}x p95")
    return 0
