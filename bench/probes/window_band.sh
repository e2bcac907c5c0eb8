#!/usr/bin/env bash
# The kernels of bench/probes/window_band.py: D 128 f16 sm_90a, each band
# as the kernel flash_attn_func picks for its window_size (left, right).
# Usage: bash bench/probes/window_band.sh DIR
set -euo pipefail
cd "$(dirname "$0")/../.."
OUT=${1:?usage: window_band.sh DIR}
mkdir -p "$OUT"
: > "$OUT/ptxas.txt"
fc() { name=$1; shift; echo "== $name" >> "$OUT/ptxas.txt"
  build/bin/fa-compile --arch sm_90a --head-dim 128 --dtype f16 "$@" -o "$OUT/$name" >> "$OUT/ptxas.txt"; }
fc sym_256 --window 257
fc causal_512 --causal --window 513
fc asym_384_128 --causal --window 513 --diagonal-offset 128
fc asym_128_384 --causal --window 513 --diagonal-offset 384
fc sym_1024 --window 1025
fc causal_2048 --causal --window 2049
fc asym_1536_512 --causal --window 2049 --diagonal-offset 512
