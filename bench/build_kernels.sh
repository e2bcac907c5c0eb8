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
      build/bin/fa-compile --arch "$ARCH" --head-dim "$d" --dtype "$dtype" \
        $causal --out-dir "$OUT" >> "$OUT/ptxas.txt"
    done
  done
done
# The bottom-right and windowed kernels flashmlir.flash_attn_func looks up
# (python/tests/test_gpu.py), named as flashmlir._kernel_for names them.
if [ "$ARCH" = sm_90a ]; then
  fc() { build/bin/fa-compile --arch "$ARCH" --head-dim 128 --dtype f16 "$@" >> "$OUT/ptxas.txt"; }
  fc --causal --causal-align=bottom-right --out-dir "$OUT"
  fc --window 17 --causal-align=bottom-right --out-dir "$OUT"
  fc --causal --window 17 --causal-align=bottom-right --out-dir "$OUT"
  # flash_attn_func's softcap (python/tests/test_flash_attn_combinations.py).
  fc --causal --softcap 5 --causal-align=bottom-right --out-dir "$OUT"
  fc --window 17 --softcap 5 --out-dir "$OUT"
  # Separate left and right window reaches (a diagonal offset): what
  # flash_attn_func looks up for window_size (16, 5), (-1, 7) and (9, 3)
  # (python/tests/test_gpu.py), and the same masks on each schedule
  # (test_diagonal_offset_schedules).
  fc --causal --window 22 --diagonal-offset 5 --causal-align=bottom-right --out-dir "$OUT"
  fc --causal --diagonal-offset 7 --out-dir "$OUT"
  fc --causal --window 13 --diagonal-offset 3 --out-dir "$OUT"
  fc --causal --window 13 --diagonal-offset 3 --persistent=false -o "$OUT/offset_w13_do3_single"
  fc --causal --window 13 --diagonal-offset 3 --sm90-kernel mma-sync -o "$OUT/offset_w13_do3_mmasync"
  fc --causal --window 22 --diagonal-offset 5 --causal-align=bottom-right --sm90-kernel mma-sync -o "$OUT/offset_w22_do5_bralign_mmasync"
  fc --causal --window 22 --diagonal-offset 5 --causal-align=bottom-right --split-kv auto -o "$OUT/offset_w22_do5_bralign_splitkv"
  fc --head-dim 64 --causal --diagonal-offset 7 --causal-align=bottom-right -o "$OUT/offset_do7_bralign_d64"
  # Split-KV (decode), the count picked per launch: what flashmlir.attention
  # and flash_attn_func take where the query blocks leave SMs idle.
  for d in 64 96 128 256; do
    build/bin/fa-compile --arch "$ARCH" --head-dim "$d" --dtype f16 --split-kv auto \
      --out-dir "$OUT" >> "$OUT/ptxas.txt"
  done
  build/bin/fa-compile --arch "$ARCH" --head-dim 128 --dtype bf16 --split-kv auto --out-dir "$OUT" >> "$OUT/ptxas.txt"
  fc --causal --causal-align=bottom-right --split-kv auto --out-dir "$OUT"
  # Head dim 192 (three 64-column blocks), and 32, 96, 160 on the tiles of
  # the next multiple of 64 (sm_90a's wgmma kernel only), for
  # python/tests/test_gpu.py.
  # V and O narrower than Q and K: DeepSeek's 192 / 128.
  fc --head-dim 192 --value-head-dim 128 --out-dir "$OUT"
  fc --head-dim 192 --value-head-dim 128 --causal --out-dir "$OUT"
  fc --head-dim 192 --value-head-dim 128 --causal --causal-align=bottom-right \
    --out-dir "$OUT"
  for d in 32 96 160 192; do
    for dtype in f16 bf16; do
      for causal in "" "--causal"; do
        build/bin/fa-compile --arch "$ARCH" --head-dim "$d" --dtype "$dtype" $causal \
          --out-dir "$OUT" >> "$OUT/ptxas.txt"
      done
    done
  done
fi
grep -E "^fa-compile|registers|spill" "$OUT/ptxas.txt"
