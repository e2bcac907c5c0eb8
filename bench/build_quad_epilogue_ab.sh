#!/usr/bin/env bash
# The kernels whose O leaves from registers (D <= 64, e4m3, the mma.sync
# kernel, varlen D 64), for the A/B of the quad-transposed register
# epilogue (issue 20): run once with an older fa-compile (side "old") and
# once with this tree's ("new"); bench/ab_interleaved.py times the f16/bf16
# pairs of OUT, `bench/fp8.py variants OUT/fp8` the e4m3 ones.
# Usage: bash bench/build_quad_epilogue_ab.sh FA_COMPILE old|new [OUT]
set -euo pipefail
cd "$(dirname "$0")/.."
FC=${1:?usage: build_quad_epilogue_ab.sh FA_COMPILE old|new [OUT]}
SIDE=${2:?old or new}
OUT=${3:-.ab_quad}
mkdir -p "$OUT/fp8"
log="$OUT/ptxas-$SIDE.txt"
: > "$log"
fc() { name=$1; shift; echo "== $name" >> "$log"
       "$FC" --arch sm_90a "$@" -o "$OUT/$name" >> "$log" 2>&1; }
for dtype in f16 bf16; do
  for causal in "" "--causal"; do
    fc "sm_90a_d64_${dtype}${causal:+_causal}__$SIDE" --head-dim 64 --dtype "$dtype" $causal
  done
done
fc "sm_90a_d32_f16__$SIDE" --head-dim 32 --dtype f16
for d in 64 128; do
  for causal in "" "--causal"; do
    fc "mma-sync_d${d}_f16${causal:+_causal}__$SIDE" --sm90-kernel mma-sync --head-dim "$d" --dtype f16 $causal
  done
done
for d in 128 256; do
  fc "fp8/e4m3_d${d}_$SIDE" --head-dim "$d" --dtype e4m3
done
grep -E "^==|registers|spill" "$log" | grep -v "0 bytes spill" || true
