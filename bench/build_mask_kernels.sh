#!/usr/bin/env bash
# Windowed / softcapped / bottom-right aligned kernels for bench/masks.py.
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
# Bottom-right masks (a KV cache): each TMA kernel family, a window, and
# the mma.sync kernel.
b --head-dim 64 --causal --causal-align=bottom-right -o "$OUT/d64_f16_causal_br"
b --head-dim 128 --causal --causal-align=bottom-right -o "$OUT/d128_f16_causal_br"
b --head-dim 128 --dtype bf16 --causal --causal-align=bottom-right --persistent=false -o "$OUT/d128_bf16_causal_br_single"
b --head-dim 256 --causal --causal-align=bottom-right -o "$OUT/d256_f16_causal_br"
b --head-dim 128 --window 100 --causal-align=bottom-right -o "$OUT/d128_f16_w100_br"
b --head-dim 128 --causal --causal-align=bottom-right --sm90-kernel mma-sync -o "$OUT/mma_d128_f16_causal_br"
grep -cE "^fa-compile" "$OUT/ptxas.txt"
