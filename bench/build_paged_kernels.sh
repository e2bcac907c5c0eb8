#!/usr/bin/env bash
# Compiles the KV-cache kernels bench/paged.py checks and times (per-sequence
# key lengths, paged K/V) next to the contiguous kernels they are compared
# with, into a folder (default .paged/, git-ignored), with the ptxas report
# of each. Names follow flashmlir._kernel_for, so that
# flashmlir.flash_attn_with_kvcache finds them with kernel_dir=<folder>.
# Usage: bash bench/build_paged_kernels.sh [out-dir]
set -euo pipefail
cd "$(dirname "$0")/.."
OUT=${1:-.paged}
mkdir -p "$OUT"
: > "$OUT/ptxas.txt"
fc() { build/bin/fa-compile --arch sm_90a "$@" >> "$OUT/ptxas.txt"; }
# Decode (split-KV): contiguous, lengths only, and pages of 16 to 256 rows.
fc --head-dim 128 --split-kv auto --out-dir "$OUT"
fc --head-dim 128 --split-kv auto --kv-lengths --out-dir "$OUT"
for p in 16 64 128 256; do
  fc --head-dim 128 --split-kv auto --kv-lengths --page-size "$p" \
    --out-dir "$OUT"
done
# Bottom-right causal (what flash_attn_with_kvcache(causal=True) runs),
# split and not, other head dims and bf16.
fc --head-dim 128 --causal --causal-align bottom-right --kv-lengths \
  --page-size 64 --out-dir "$OUT"
for p in 16 64; do
  fc --head-dim 128 --causal --causal-align bottom-right --split-kv auto \
    --kv-lengths --page-size "$p" \
    --out-dir "$OUT"
done
fc --head-dim 128 --causal --causal-align bottom-right --kv-lengths \
  --page-size 16 --out-dir "$OUT"
fc --head-dim 64 --dtype bf16 --causal --causal-align bottom-right \
  --split-kv auto --kv-lengths --page-size 128 \
  --out-dir "$OUT"
fc --head-dim 256 --split-kv auto --kv-lengths --page-size 128 \
  --out-dir "$OUT"
# Head dim 96 (on D = 128's tiles): paged decode.
fc --head-dim 96 --causal --causal-align bottom-right --split-kv auto \
  --kv-lengths --page-size 64 \
  --out-dir "$OUT"
# flash_attn_with_kvcache's windows and softcap (python/tests/
# test_flash_attn_combinations.py): split decode and unsplit chunks.
for split in "--split-kv auto" ""; do
  fc --head-dim 128 --causal --window 65 --causal-align bottom-right $split \
    --kv-lengths --page-size 64 \
    --out-dir "$OUT"
  fc --head-dim 128 --causal --softcap 5 --causal-align bottom-right $split \
    --kv-lengths --page-size 64 \
    --out-dir "$OUT"
  # window_size (40, 7): separate left and right reaches.
  fc --head-dim 128 --causal --window 48 --diagonal-offset 7 \
    --causal-align bottom-right $split --kv-lengths --page-size 64 \
    --out-dir "$OUT"
done
# Chunked prefill: a paged cache against the contiguous kernel.
fc --head-dim 128 --causal --causal-align bottom-right \
  --out-dir "$OUT"
fc --head-dim 128 --causal --causal-align bottom-right --kv-lengths \
  --page-size 128 --out-dir "$OUT"
# Prefill variants for short pages (spill-free ones only): B_c 64 with a
# four-stage ring, paged and contiguous.
fc --head-dim 128 --causal --causal-align bottom-right --kv-lengths \
  --page-size 16 --block-c 64 --stages 4 \
  -o "$OUT/sm_90a_d128_f16_causal_bralign_kvlens_paged16_bc64_s4"
fc --head-dim 128 --causal --causal-align bottom-right --kv-lengths \
  --page-size 64 --block-c 64 --stages 4 \
  -o "$OUT/sm_90a_d128_f16_causal_bralign_kvlens_paged64_bc64_s4"
fc --head-dim 128 --causal --causal-align bottom-right --block-c 64 \
  --stages 4 -o "$OUT/sm_90a_d128_f16_causal_bralign_bc64_s4"
grep -E "^fa-compile|registers|spill" "$OUT/ptxas.txt"
