#!/usr/bin/env bash
# Compiles tile-size variants of the f16 kernels for bench/sweep.py.
# Usage: bash bench/build_variants.sh [out-dir] [arch]
set -euo pipefail
cd "$(dirname "$0")/.."
OUT=${1:-.variants}
ARCH=${2:-sm_90a}
mkdir -p "$OUT"
: > "$OUT/ptxas.txt"
build() { # d br bc causal [qreg]
  local name="${ARCH}_d$1_f16${4:+_causal}__br$2_bc$3${5:+_$5}"
  build/bin/fa-compile --arch "$ARCH" --head-dim "$1" --dtype f16 \
    --block-r "$2" --block-c "$3" $4 ${5:+--q-in-registers=false} \
    -o "$OUT/$name" >> "$OUT/ptxas.txt"
}
for causal in "" "--causal"; do
  build 128 128 64 "$causal"
  build 128 64 64 "$causal"
  build 256 64 32 "$causal"
  build 256 64 32 "$causal" qsmem
  build 256 64 64 "$causal"
  build 256 64 64 "$causal" qsmem
done
grep -E "^fa-compile|registers|spill" "$OUT/ptxas.txt"
