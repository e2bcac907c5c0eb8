#!/usr/bin/env bash
# The kernel pairs of a refactor's A/B (bench/ab_interleaved.py, bench/ab.sh):
# every grid kernel (f16 and bf16, D 64/128/256, causal or not) of the
# sm_90a FlashAttention-3 kernel and of the mma.sync kernel (the sm_80
# kernel, built for sm_90a with --sm90-kernel mma-sync so that the H200 can
# load it: an sm_80 cubin has no sm_90 code), compiled once by an
# older fa-compile (<name>__old) and once by this tree's (<name>__new).
# Build the older compiler with clang-22, as this tree is: a g++ build of
# the same commit emits different PTX (argument evaluation order).
# Usage: bash bench/build_ab_kernels.sh OLD_FA_COMPILE [out-dir]
set -euo pipefail
cd "$(dirname "$0")/.."
OLD=${1:?usage: build_ab_kernels.sh OLD_FA_COMPILE [out-dir]}
OUT=${2:-.ab}
mkdir -p "$OUT"
: > "$OUT/ptxas.txt"
for kernel in wgmma mma-sync; do
  for dtype in f16 bf16; do
    for d in 64 128 256; do
      for causal in "" "--causal"; do
        name="${kernel/wgmma/sm_90a}_d${d}_${dtype}${causal:+_causal}"
        for side in old new; do
          compiler=build/bin/fa-compile
          [ "$side" = old ] && compiler=$OLD
          echo "== ${name}__$side" >> "$OUT/ptxas.txt"
          "$compiler" --arch sm_90a --sm90-kernel "$kernel" --head-dim "$d" \
            --dtype "$dtype" $causal \
            -o "$OUT/${name}__$side" >> "$OUT/ptxas.txt" 2>&1
        done
      done
    done
  done
done
# Registers and spills of both sides, pair by pair.
grep -E "^==|registers|spill" "$OUT/ptxas.txt" | grep -v "0 bytes spill" || true
