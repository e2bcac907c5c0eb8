#!/usr/bin/env bash
# Compiles the backward kernels (fa-compile --backward: mma.sync, issue 48)
# and the forward kernels a differentiable flash_attn_func pairs them with
# into a folder (default .bwd/, git-ignored), named by fa-compile --out-dir
# (fa::kernelFileName; the backward's end in _bwd), with the ptxas report of
# each: f16 and bf16, D 64 and 128, no mask, causal top-left and
# bottom-right, sliding windows (flash-attn's window_size (96, 0) in both
# alignments -- flash_attn_func takes the top-left kernels where Nq == Nk --
# and (100, 37), a symmetric |i - j| < 80), the backward also
# --deterministic, for the GPU's arch (sm_90a by default).
# bench/backward_check.py and the gpu tests of python/tests/test_backward.py
# launch them (FLASHMLIR_KERNEL_DIR=<folder>).
# Usage: bash bench/build_backward_kernels.sh [out-dir] [arch]
set -euo pipefail
cd "$(dirname "$0")/.."
OUT=${1:-.bwd}
ARCH=${2:-sm_90a}
mkdir -p "$OUT"
: > "$OUT/ptxas.txt"
: > "$OUT/forward-ptxas.txt"
for dtype in f16 bf16; do
  for d in 64 128; do
    for mask in "" "--causal" "--causal --causal-align bottom-right" \
        "--causal --window 97" \
        "--causal --window 97 --causal-align bottom-right" \
        "--causal --window 138 --diagonal-offset 37 --causal-align bottom-right" \
        "--window 80"; do
      # shellcheck disable=SC2086
      build/bin/fa-compile --backward --arch "$ARCH" --dtype "$dtype" \
        --head-dim "$d" $mask --out-dir "$OUT" >> "$OUT/ptxas.txt" 2>&1
      # shellcheck disable=SC2086
      build/bin/fa-compile --backward --deterministic --arch "$ARCH" \
        --dtype "$dtype" --head-dim "$d" $mask --out-dir "$OUT" \
        >> "$OUT/ptxas.txt" 2>&1
      if [ "${FORWARD:-1}" = 1 ]; then
        # shellcheck disable=SC2086
        build/bin/fa-compile --arch "$ARCH" --dtype "$dtype" --head-dim "$d" \
          $mask --out-dir "$OUT" >> "$OUT/forward-ptxas.txt" 2>&1
      fi
    done
  done
done
rm -f "$OUT"/*.ptx
grep -E "Compiling entry|registers|spill" "$OUT/ptxas.txt" || true
