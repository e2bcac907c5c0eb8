#!/usr/bin/env bash
# Compiles the varlen kernels bench/varlen.py checks and times, next to the
# contiguous kernels they are compared with, into a folder (default
# .varlen/, git-ignored), with the ptxas report of each. Names follow
# flashmlir._kernel_for (flash_attn_varlen_func finds them there).
# Usage: bash bench/build_varlen_kernels.sh [out-dir]
set -euo pipefail
cd "$(dirname "$0")/.."
OUT=${1:-.varlen}
mkdir -p "$OUT"
: > "$OUT/ptxas.txt"
fc() { build/bin/fa-compile --arch sm_90a "$@" >> "$OUT/ptxas.txt"; }
fc --head-dim 128 --varlen --out-dir "$OUT"
fc --head-dim 128 --causal --causal-align bottom-right --varlen \
  --out-dir "$OUT"
fc --head-dim 64 --dtype bf16 --causal --causal-align bottom-right --varlen \
  --out-dir "$OUT"
fc --head-dim 256 --varlen --out-dir "$OUT"
# Head dim 96 (on D = 128's tiles).
fc --head-dim 96 --varlen --out-dir "$OUT"
fc --head-dim 96 --causal --causal-align bottom-right --varlen \
  --out-dir "$OUT"
# flash_attn_varlen_func's windows and softcap (python/tests/
# test_flash_attn_combinations.py): a symmetric and a causal window, softcap.
fc --head-dim 128 --window 17 --causal-align bottom-right --varlen \
  --out-dir "$OUT"
fc --head-dim 128 --causal --window 17 --causal-align bottom-right --varlen \
  --out-dir "$OUT"
# window_size (16, 5): separate left and right reaches.
fc --head-dim 128 --causal --window 22 --diagonal-offset 5 \
  --causal-align bottom-right --varlen \
  --out-dir "$OUT"
fc --head-dim 128 --causal --softcap 5 --causal-align bottom-right --varlen \
  --out-dir "$OUT"
# The varlen kernels with the persistent scheduler (on request: not the
# default, see docs/gpu-kernels.md#varlen-batches).
# One tile per CTA, beside the default (persistent at D 128: real tiles).
fc --head-dim 128 --varlen --persistent=false \
  -o "$OUT/sm_90a_d128_f16_varlen_single"
fc --head-dim 128 --causal --causal-align bottom-right --varlen \
  --persistent=false -o "$OUT/sm_90a_d128_f16_causal_bralign_varlen_single"
# The contiguous kernels: as shipped, and with the varlen kernels' schedule
# (one tile per CTA, O from registers).
fc --head-dim 128 --out-dir "$OUT"
fc --head-dim 128 --causal --out-dir "$OUT"
fc --head-dim 128 --persistent=false --epilogue direct \
  -o "$OUT/sm_90a_d128_f16_single_direct"
fc --head-dim 128 --causal --persistent=false --epilogue direct \
  -o "$OUT/sm_90a_d128_f16_causal_single_direct"
grep -E "^fa-compile|registers|spill" "$OUT/ptxas.txt"
