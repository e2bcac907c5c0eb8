#!/usr/bin/env bash
# FA4 algorithm variants of the sm_80 kernel for bench/sweep.py: each of
# conditional rescaling (tau = 8) and software exp2 (degree 3, one register
# in 8, or in 4) on and off, D = 64 and 128, causal and not, f16.
# Usage: bash bench/build_fa4_variants.sh [out-dir] [arch]
set -euo pipefail
cd "$(dirname "$0")/.."
OUT=${1:-.fa4}
ARCH=${2:-sm_90a}
mkdir -p "$OUT"
: > "$OUT/ptxas.txt"
for d in ${FA4_HEAD_DIMS:-64 128}; do
  for causal in "" "--causal"; do
    base="${ARCH}_d${d}_f16${causal:+_causal}"
    while read -r tag flags; do
      build/bin/fa-compile --arch "$ARCH" --head-dim "$d" $causal $flags \
        -o "$OUT/${base}__${tag}" >> "$OUT/ptxas.txt"
    done <<'VARIANTS'
base --rescale-threshold off
cr8 --rescale-threshold 8
px3p8 --rescale-threshold off --poly-exp2-degree 3 --poly-exp2-period 8
px3p4 --rescale-threshold off --poly-exp2-degree 3 --poly-exp2-period 4
cr8-px3p8 --rescale-threshold 8 --poly-exp2-degree 3 --poly-exp2-period 8
VARIANTS
  done
done
grep -E "^fa-compile|registers|spill" "$OUT/ptxas.txt"
