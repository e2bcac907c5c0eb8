#!/usr/bin/env bash
# Windowed / softcapped kernels for bench/masks.py.
set -euo pipefail
cd "$(dirname "$0")/.."
OUT=${1:-.masks}
mkdir -p "$OUT"
: > "$OUT/ptxas.txt"
b() { build/bin/fa-compile --arch sm_90a "$@" >> "$OUT/ptxas.txt"; }
b --head-dim 64 --window 37 -o "$OUT/d64_f16_w37"
b --head-dim 128 --causal --window 16 -o "$OUT/d128_f16_causal_w16"
b --head-dim 64 --dtype bf16 --softcap 20 -o "$OUT/d64_bf16_sc20"
b --head-dim 128 --causal --softcap 30 --window 64 -o "$OUT/d128_f16_causal_sc30_w64"
b --head-dim 256 --dtype bf16 --causal --window 100 -o "$OUT/d256_bf16_causal_w100"
grep -cE "^fa-compile" "$OUT/ptxas.txt"
