#!/usr/bin/env bash
# Compiles every kernel the H200 harness needs into a folder (default
# .cubins/, git-ignored) with fa-compile: PTX, cubin and JSON per variant,
# plus the ptxas resource report of each.
# Usage: bash bench/build_kernels.sh [out-dir] [arch]
set -euo pipefail
cd "$(dirname "$0")/.."
OUT=${1:-.cubins}
ARCH=${2:-sm_90a}
mkdir -p "$OUT"
: > "$OUT/ptxas.txt"
for dtype in f16 bf16; do
  for d in 64 128 256; do
    for causal in "" "--causal"; do
      name="${ARCH}_d${d}_${dtype}${causal:+_causal}"
      build/bin/fa-compile --arch "$ARCH" --head-dim "$d" --dtype "$dtype" \
        $causal -o "$OUT/$name" >> "$OUT/ptxas.txt"
    done
  done
done
grep -E "^fa-compile|registers|spill" "$OUT/ptxas.txt"
