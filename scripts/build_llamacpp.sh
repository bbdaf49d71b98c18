#!/usr/bin/env bash
# Build llama-cpp-python for this CPU's instruction set, once per set, and install it.
#
# PyPI has no CPU wheel, so pip compiles llama.cpp (0.3.36: ~7 min of CPU on 2 cores). The
# kernels are chosen from /proc/cpuinfo, never assumed: AVX2 everywhere, AVX-512 (with VNNI
# and BF16 where listed) on CPUs that have it. Never -march=native or AMX: on this project's
# VMs AMX tile kernels crashed (SIGSEGV at ldtilecfg). The wheel is kept under a folder named
# by the version and the exact CMake flags, so a machine with another CPU never reuses a
# wheel built for this one (pip's own cache ignores CMAKE_ARGS).
#   usage: scripts/build_llamacpp.sh PYTHON VERSION
set -euo pipefail
python=$1 version=$2
flags=" $(grep -m1 -E '^(flags|Features)' /proc/cpuinfo 2>/dev/null | cut -d: -f2) "
has() { [[ $flags == *" $1 "* ]]; }
args="-DGGML_NATIVE=OFF -DGGML_AVX=ON -DGGML_AVX2=ON -DGGML_FMA=ON -DGGML_F16C=ON -DGGML_BMI2=ON"
if has avx512f && has avx512bw && has avx512vl && has avx512dq && has avx512cd; then
  args+=" -DGGML_AVX512=ON"
  has avx512_vnni && args+=" -DGGML_AVX512_VNNI=ON"
  has avx512_bf16 && args+=" -DGGML_AVX512_BF16=ON"
  has avx512vbmi && args+=" -DGGML_AVX512_VBMI=ON"
fi
args+=" -DGGML_AMX_TILE=OFF -DGGML_AMX_INT8=OFF -DGGML_AMX_BF16=OFF"
key=$(printf '%s' "$args" | sha256sum | cut -c1-12)
cache="${CMC_WHEEL_CACHE:-$HOME/.cache/cmc-harness/wheels}/llama_cpp_python-$version-$key"
if ! compgen -G "$cache/*.whl" > /dev/null; then
  echo "building llama-cpp-python $version with: $args" >&2
  rm -rf "$cache.tmp" && mkdir -p "$cache.tmp"
  CMAKE_ARGS="$args" CMAKE_BUILD_PARALLEL_LEVEL="$(nproc 2>/dev/null || echo 2)" \
    "$python" -m pip wheel -q --no-deps --no-cache-dir "llama-cpp-python==$version" -w "$cache.tmp"
  printf '%s\n' "$args" > "$cache.tmp/CMAKE_ARGS"
  rm -rf "$cache" && mv "$cache.tmp" "$cache"
fi
"$python" -m pip install -q --no-deps --force-reinstall "$cache"/*.whl
