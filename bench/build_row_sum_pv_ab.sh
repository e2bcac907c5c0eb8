#!/usr/bin/env bash
# The A/B of issue 18's row sums in the P V MMA (fagpu-row-sum-mma{mode=pv},
# fa-compile --row-sum-mma pv) against the shipped e4m3 kernels (FADD row
# sums), for bench/fp8.py on the H200:
#   OUT/ab     both forms, D 128, causal or not (fp8.py variants)
#   OUT/check  the pv kernels alone (fp8.py check; compute-sanitizer)
#   OUT/f16    our f16 kernels of the same head dims (the ratio's base)
# with each folder's ptxas report.
# Usage: bash bench/build_row_sum_pv_ab.sh [out-dir]
set -euo pipefail
cd "$(dirname "$0")/.."
OUT=${1:-.p8pv}
mkdir -p "$OUT/ab" "$OUT/check" "$OUT/f16"
for dir in ab check f16; do : > "$OUT/$dir/ptxas.txt"; done
fc() { build/bin/fa-compile --arch sm_90a "$@"; }
# D 128 only: at D 256 the P V MMA is m64n256 already, wgmma's widest.
for d in 128; do
  for causal in "" "--causal"; do
    name="sm_90a_d${d}_e4m3_bf16${causal:+_causal}"
    fc --head-dim "$d" --dtype e4m3 --out-dtype bf16 $causal \
      -o "$OUT/ab/$name" >> "$OUT/ab/ptxas.txt"
    fc --head-dim "$d" --dtype e4m3 --out-dtype bf16 $causal \
      --row-sum-mma pv -o "$OUT/ab/${name}_rspv" >> "$OUT/ab/ptxas.txt"
    fc --head-dim "$d" --dtype e4m3 --out-dtype bf16 $causal \
      --row-sum-mma pv -o "$OUT/check/${name}_rspv" >> "$OUT/check/ptxas.txt"
    fc --head-dim "$d" --dtype f16 $causal \
      -o "$OUT/f16/sm_90a_d${d}_f16${causal:+_causal}" >> "$OUT/f16/ptxas.txt"
  done
done
# f16 O and a window on the pv form too (the check's other paths).
fc --head-dim 128 --dtype e4m3 --out-dtype f16 --row-sum-mma pv \
  -o "$OUT/check/sm_90a_d128_e4m3_f16_rspv" >> "$OUT/check/ptxas.txt"
fc --head-dim 128 --dtype e4m3 --window 17 --causal-align bottom-right \
  --row-sum-mma pv -o "$OUT/check/sm_90a_d128_e4m3_bf16_w17_bralign_rspv" \
  >> "$OUT/check/ptxas.txt"
# Registers and spills of each attention kernel (ptxas -v).
awk '/Compiling entry function .fa3/ { name = $7 }
     /spill stores/ && name { spill = $5 " B spill stores, " $9 " B loads" }
     /Used [0-9]+ registers/ && name { print name, $5, "registers,", spill;
                                       name = "" }' "$OUT"/*/ptxas.txt
