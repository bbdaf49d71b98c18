"""`make bench`: compile cost per history and CMC read latency at 262K, next to a naive
reference that scans every subject per question, measured side by side in one run.

Absolute times are context only (2 shared cores); the ratio is the result.
"""
from __future__ import annotations

import os
import statistics
import sys
import time
from pathlib import Path

from harness.config import compose

ROOT = Path(__file__).resolve().parent.parent
sys.path.insert(0, str(ROOT))

from arms.cmc import CMCArm  # noqa: E402
from cmc.anchor import scan_anchors  # noqa: E402
from cmc.graph import compile_memory  # noqa: E402
from cmc.targets import instantiate_known  # noqa: E402


class NaiveScanCMC(CMCArm):
    """CMC with the anchor index replaced by a scan of every graph subject."""

    def select(self, question, memory):
        memory.anchors.anchors = lambda text: scan_anchors(memory.current.out, text)  # type: ignore[method-assign]
        return super().select(question, memory)


def timed(fn, repeats: int) -> list[float]:
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
    return statistics.quantiles(values, n=20, method="inclusive")[-1]


def main() -> None:
    os.environ.setdefault("CMC_DATA_DIR", str(ROOT.parent / "shared" / "data"))
    cfg = compose()
    dataset = instantiate_known(cfg.dataset).load()
    frontend = instantiate_known(cfg.frontend)

    print("| history | records | parse median ms | compile median ms |")
    print("|---|---:|---:|---:|")
    memories = {}
    for hid, history in dataset.histories.items():
        extraction = frontend.extract(history)
        parse = timed(lambda: frontend.extract(history), 5)
        build = timed(lambda: compile_memory(history, extraction), 5)
        memories[hid] = compile_memory(history, extraction)
        print(f"| {hid} | {len(history)} | {statistics.median(parse) * 1e3:.1f} | {statistics.median(build) * 1e3:.1f} |")

    hid = "factconsolidation_262k"
    questions = dataset.questions_of(hid)
    fast, naive = CMCArm(), NaiveScanCMC()
    read_ms, naive_ms, anchor_us = [], [], []
    fast_memory = memories[hid]
    naive_memory = compile_memory(dataset.histories[hid], frontend.extract(dataset.histories[hid]))
    for question in questions:  # interleaved: both paths see the same machine state
        assert fast.select(question, fast_memory).positions == naive.select(question, naive_memory).positions
        read_ms += timed(lambda: fast.select(question, fast_memory), 20)
        naive_ms += timed(lambda: naive.select(question, naive_memory), 3)
        anchor_us += timed(lambda: fast_memory.anchors.anchors(question.text), 20)
    us = lambda xs: (statistics.median(xs) * 1e6, p95(xs) * 1e6)  # noqa: E731
    (f_med, f_p95), (n_med, n_p95), (a_med, a_p95) = us(read_ms), us(naive_ms), us(anchor_us)
    print(f"\nCMC read at 262K over {len(questions)} questions (anchor + traverse + render):")
    print("| path | median us | p95 us |")
    print("|---|---:|---:|")
    print(f"| indexed anchors (CMC) | {f_med:.1f} | {f_p95:.1f} |")
    print(f"| naive subject scan | {n_med:.1f} | {n_p95:.1f} |")
    print(f"| anchor lookup alone | {a_med:.1f} | {a_p95:.1f} |")
    print(f"\nspeed-up of the indexed read over the naive scan: {n_med / f_med:.1f}x median, {n_p95 / f_p95:.1f}x p95")


if __name__ == "__main__":
    main()
