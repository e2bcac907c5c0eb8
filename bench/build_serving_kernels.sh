#!/usr/bin/env bash
# Compiles the kernels of the serving decode path (issue 45) into a folder
# (default .serving/, git-ignored), named as flashmlir's kernel lookup
# expects them (fa-compile --out-dir: fa::kernelFileName, the rule
# flashmlir.kernel_file_name spells), with the ptxas report of each: what
# bench/serving.py and the gpu tests of python/tests/test_pack_gqa.py,
# test_device_asserts.py, test_fp8_kv_cache.py and test_torch_ops.py launch
# through flash_attn_with_kvcache and flash_attn_func (D 128 f16; pack-GQA
# reuses these kernels on [B, Hkv, G, D] views). Point FLASHMLIR_KERNEL_DIR
# and FLASHMLIR_PAGED_KERNEL_DIR at the folder.
# Usage: bash bench/build_serving_kernels.sh [out-dir]
set -euo pipefail
cd "$(dirname "$0")/.."
OUT=${1:-.serving}
mkdir -p "$OUT"
: > "$OUT/ptxas.txt"
fc() {
  build/bin/fa-compile --arch sm_90a --out-dir "$OUT" "$@" >> "$OUT/ptxas.txt"
}
# cache_kernels MASK GROUP [KV]: the KV-cache kernels of one mask, split-KV
# or not (the auto rule decides per shape), contiguous or pages of 16 and
# 64; with GROUP > 0 the query heads packed (--query-group); KV e4m3: an
# e4m3 cache (--kv-dtype).
cache_kernels() {
  local mask=$1 group=$2 kv=${3:-} flags gflags=() kflags=()
  case $mask in
    plain) flags=() ;;
    causal) flags=(--causal --causal-align bottom-right) ;;
    causal_w64) flags=(--causal --window 64 --causal-align bottom-right) ;;
  esac
  if [ "$group" != 0 ]; then gflags=(--query-group "$group"); fi
  if [ -n "$kv" ]; then kflags=(--kv-dtype "$kv"); fi
  for split in "" "--split-kv auto"; do
    for page in 0 16 64; do
      pflags=()
      if [ "$page" != 0 ]; then pflags=(--page-size "$page"); fi
      fc --head-dim 128 "${flags[@]}" $split --kv-lengths "${pflags[@]}" \
        "${gflags[@]}" "${kflags[@]}"
    done
  done
}
# Decode and chunked prefill on a cache: one query a sequence drops the
# causal mask (plain), several keep it bottom-right aligned, and a
# flash-attention window (63, 0) is a causal window of 64.
for mask in plain causal causal_w64; do
  cache_kernels $mask 0
done
# Pack-GQA beyond one query (fa-compile --query-group G: the query heads of
# a K/V head packed query by query into the rows): speculative decoding's
# 2-16 queries (causal, bottom-right) and a window at any query count, for
# Llama-3's groups (32/8: 4, 64/8: 8).
for group in 4 8; do
  for mask in causal causal_w64; do
    cache_kernels $mask $group
  done
done
# An e4m3 KV cache beside an f16 Q (--kv-dtype e4m3): decode (plain, and
# pack-GQA's views of it), chunked prefill (causal) and windows, a few
# queries packed (--query-group) as on a 16-bit cache.
for mask in plain causal causal_w64; do
  cache_kernels $mask 0 e4m3
done
for group in 4 8; do
  for mask in causal causal_w64; do
    cache_kernels $mask $group e4m3
  done
done
# ... beside a bf16 Q (decode; its widening goes through f32).
for split in "" "--split-kv auto"; do
  for page in 0 64; do
    pflags=()
    if [ "$page" != 0 ]; then pflags=(--page-size "$page"); fi
    fc --head-dim 128 --dtype bf16 $split --kv-lengths "${pflags[@]}" \
      --kv-dtype e4m3
  done
done
# Decode on an e4m3 cache, tiles of at most 8 packed query rows
# (--max-rows 8: each consumer thread steps only its first row's softmax;
# flash_attn_with_kvcache takes these where the rows fit).
for split in "" "--split-kv auto"; do
  for page in 0 16 64; do
    pflags=()
    if [ "$page" != 0 ]; then pflags=(--page-size "$page"); fi
    fc --head-dim 128 $split --kv-lengths "${pflags[@]}" --kv-dtype e4m3 \
      --max-rows 8
  done
  for page in 0 64; do
    pflags=()
    if [ "$page" != 0 ]; then pflags=(--page-size "$page"); fi
    fc --head-dim 128 --dtype bf16 $split --kv-lengths "${pflags[@]}" \
      --kv-dtype e4m3 --max-rows 8
  done
done
# flash_attn_func at decode shapes (no lengths) and the tiny causal call of
# bench/serving.py's host-cost rows.
for split in "" "--split-kv auto"; do
  fc --head-dim 128 $split
  fc --head-dim 128 --causal --causal-align bottom-right $split
done
# flash_attn_varlen_func (test_device_asserts.py's bad prefix sums).
fc --head-dim 128 --varlen
fc --head-dim 64 --causal
fc --head-dim 64 --causal --causal-align bottom-right
grep -E "^fa-compile|registers|spill" "$OUT/ptxas.txt" | sort | uniq -c | sort -rn | head -20
