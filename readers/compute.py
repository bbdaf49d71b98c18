"""Which compute dtype a local reader uses, chosen from what the machine can do.

On a CPU, bf16 matrix work is fast only where the CPU has bf16 instructions (avx512_bf16
or AMX): measured on one 2-core avx512_bf16 machine, bf16 prefilled 2.4x faster than fp32,
while on an AVX2-only machine bf16 ran ~4x *slower* than fp32. So `auto` reads the CPU's
flags and never assumes them. On CUDA, bf16 where the GPU supports it, else fp16.

`auto` is resolved once, when a run's manifest is frozen; a resumed run reuses the frozen
dtype (see HFReader.freeze), so moving a run to another CPU never changes its numbers.
"""
from __future__ import annotations

from functools import lru_cache
from pathlib import Path

DTYPES = ("float32", "bfloat16", "float16")
BF16_CPU_FLAGS = frozenset({"avx512_bf16", "amx_bf16"})
RECORDED_CPU_FLAGS = ("avx2", "avx512f", "avx512_bf16", "avx512_vnni", "amx_bf16", "amx_int8", "fma", "f16c")


@lru_cache(maxsize=1)
def cpu_flags() -> frozenset[str]:
    """The CPU's feature flags (Linux /proc/cpuinfo; empty elsewhere, which means fp32)."""
    try:
        text = Path("/proc/cpuinfo").read_text(encoding="utf-8", errors="replace")
    except OSError:
        return frozenset()
    for line in text.splitlines():
        key, _, value = line.partition(":")
        if key.strip() in ("flags", "Features"):
            return frozenset(value.split())
    return frozenset()


def auto_dtype(device: str, flags: frozenset[str] | None = None) -> str:
    """The dtype `auto` means on this device: see the module docstring for why."""
    if device.startswith("cuda"):
        return "float16"
    return "bfloat16" if BF16_CPU_FLAGS & (cpu_flags() if flags is None else flags) else "float32"


def resolve_dtype(setting: str, device: str) -> str:
    if setting == "auto":
        return auto_dtype(device)
    if setting not in DTYPES:
        raise ValueError(f"dtype {setting!r} is not one of auto, {', '.join(DTYPES)}")
    return setting


def cpu_summary() -> dict[str, object]:
    """What a timing or a prediction records of the CPU it ran on."""
    import os

    flags = cpu_flags()
    return {"cpu_flags": [f for f in RECORDED_CPU_FLAGS if f in flags], "usable_cpus": len(os.sched_getaffinity(0))}
