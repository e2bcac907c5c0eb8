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
# Bottom-right masks (flash_attn_func's causal with Nq != Nk, a KV cache's
# chunked prefill) and a window, named as flashmlir._kernel_for names them.
fc() { build/bin/fa-compile --arch sm_90a --head-dim 128 --dtype e4m3 "$@" >> "$OUT/ptxas.txt"; }
fc --causal --causal-align bottom-right -o "$OUT/sm_90a_d128_e4m3_bf16_causal_bralign"
fc --window 17 --causal-align bottom-right -o "$OUT/sm_90a_d128_e4m3_bf16_w17_bralign"
# The D = 128 kernels above take B_c = 224 (V^T's rows in 32-byte swizzled
# column blocks, fagpu::valueTileSwizzle); these keep the 64- and 128-byte
# swizzles of B_c = 192 and 128 under the checks.
fc --block-c 192 -o "$OUT/sm_90a_d128_e4m3_bf16_bc192"
fc --block-c 128 -o "$OUT/sm_90a_d128_e4m3_bf16_bc128"
