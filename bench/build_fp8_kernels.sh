#!/usr/bin/env bash
# Compiles the sm_90a FP8 (e4m3) kernels the H200 script bench/fp8.py and
# python/tests/test_fp8_gpu.py run: D = 128 and 256, O in bf16 or f16,
# causal or not, into a folder (default .fp8/, git-ignored), with the
# ptxas resource report of each.
# Usage: bash bench/build_fp8_kernels.sh [out-dir]
set -euo pipefail
cd "$(dirname "$0")/.."
OUT=${1:-.fp8}
mkdir -p "$OUT"
: > "$OUT/ptxas.txt"
for d in 128 256; do
  for out in bf16 f16; do
    for causal in "" "--causal"; do
      build/bin/fa-compile --arch sm_90a --head-dim "$d" --dtype e4m3 \
        --out-dtype "$out" $causal \
        -o "$OUT/sm_90a_d${d}_e4m3_${out}${causal:+_causal}" >> "$OUT/ptxas.txt"
    done
  done
done
