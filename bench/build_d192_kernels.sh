#!/usr/bin/env bash
# Compiles the D = 192 sm_90a kernels bench/d192.py checks and times: B_r 128,
# B_c 64 (B_c 128 does not fit shared memory at D = 192), one tile per CTA or
# persistent, O by TMA store or from registers, causal and not, into a
# folder (default .d192/, git-ignored), with the ptxas report of each.
# Usage: bash bench/build_d192_kernels.sh [out-dir]
set -euo pipefail
cd "$(dirname "$0")/.."
OUT=${1:-.d192}
mkdir -p "$OUT"
: > "$OUT/ptxas.txt"
fc() { build/bin/fa-compile --arch sm_90a "$@" >> "$OUT/ptxas.txt"; }
for mask in "" "--causal"; do
  tag=${mask:+_causal}
  for p in false true; do
    for e in tma direct; do
      fc --head-dim 192 --block-r 128 --block-c 64 $mask --persistent=$p \
        --epilogue $e -o "$OUT/sm_90a_d192_f16${tag}_p${p}_${e}"
    done
  done
done
grep -E "^fa-compile|registers|spill" "$OUT/ptxas.txt"
