#!/usr/bin/env bash
# Compiles the sm_90a kernels of head dims other than 64/128/256 that
# bench/head_dims.py checks and times, into a folder (default .headdims/,
# git-ignored), with the ptxas report of each:
# * D = 96 (on D = 128's tiles, columns 96-127 zero-filled by the TMA): the
#   table's kernel (persistent, TMA store), and O from registers;
# * D = 192 (three 64-column blocks, B_c 64): the table's kernel, and one
#   tile per CTA;
# * D = 192 with V and O of 128 columns (DeepSeek's), on D = 192's tiles;
# * D = 128's table kernels, the speed class D = 96 is compared with.
# Usage: bash bench/build_head_dim_kernels.sh [out-dir]
set -euo pipefail
cd "$(dirname "$0")/.."
OUT=${1:-.headdims}
mkdir -p "$OUT"
: > "$OUT/ptxas.txt"
fc() { build/bin/fa-compile --arch sm_90a "$@" >> "$OUT/ptxas.txt"; }
for mask in "" "--causal"; do
  tag=${mask:+_causal}
  fc --head-dim 96 $mask -o "$OUT/sm_90a_d96_f16${tag}"
  fc --head-dim 96 $mask --epilogue direct -o "$OUT/sm_90a_d96_f16${tag}_direct"
  fc --head-dim 192 $mask -o "$OUT/sm_90a_d192_f16${tag}"
  fc --head-dim 192 $mask --persistent=false \
    -o "$OUT/sm_90a_d192_f16${tag}_single"
  fc --head-dim 192 --value-head-dim 128 $mask \
    -o "$OUT/sm_90a_d192_dv128_f16${tag}"
  fc --head-dim 128 $mask -o "$OUT/sm_90a_d128_f16${tag}"
done
grep -E "^fa-compile|registers|spill" "$OUT/ptxas.txt"
