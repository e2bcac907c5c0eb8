#!/usr/bin/env bash
# Compiles the split-KV (flash-decoding) kernels bench/decode.py checks and
# times, next to the unsplit kernel they are compared with, into a folder
# (default .split/, git-ignored), with the ptxas report of each.
# Usage: bash bench/build_split_kernels.sh [out-dir]
set -euo pipefail
cd "$(dirname "$0")/.."
OUT=${1:-.split}
mkdir -p "$OUT"
: > "$OUT/ptxas.txt"
fc() { build/bin/fa-compile --arch sm_90a "$@" >> "$OUT/ptxas.txt"; }
for dtype in f16 bf16; do
  for d in 64 128 256; do
    fc --head-dim "$d" --dtype "$dtype" --split-kv auto -o "$OUT/split_d${d}_${dtype}"
  done
done
# The split kernels' B_r at D 128 is 64 (one consumer warpgroup, two CTAs
# per SM: half the MMA work on padding rows); B_r 128 (two consumers,
# ping-pong) with three and two stages for comparison.
fc --head-dim 128 --block-r 128 --split-kv auto -o "$OUT/split_d128_f16_br128"
fc --head-dim 128 --block-r 128 --stages 2 --split-kv auto -o "$OUT/split_d128_f16_br128_s2"
# KV-cache masks (bottom-right causal, a window) and O without LSE.
fc --head-dim 128 --causal --causal-align=bottom-right --split-kv auto \
  -o "$OUT/split_d128_f16_causal_bralign"
fc --head-dim 128 --window 300 --causal --causal-align=bottom-right \
  --split-kv auto -o "$OUT/split_d128_f16_causal_w300_bralign"
fc --head-dim 128 --split-kv 4 --no-lse -o "$OUT/split_d128_f16_s4_nolse"
# The unsplit kernels decode ran on before.
fc --head-dim 128 -o "$OUT/base_d128_f16"
fc --head-dim 128 --block-r 64 -o "$OUT/base_d128_f16_br64"
grep -E "^fa-compile|registers|spill" "$OUT/ptxas.txt"
