// RUN: fa-opt %s --pass-pipeline="builtin.module(func.func(fa-attention-to-buffers,fagpu-tile{target=sm_90a},fa-lower-fa2,fa-map-to-gpu{target=sm_90a},fagpu-pack-query-heads{query-group=4},fagpu-io-report))" -o /dev/null | FileCheck %s
// RUN: fa-opt %s --pass-pipeline="builtin.module(func.func(fa-attention-to-buffers,fagpu-tile{target=sm_90a},fa-lower-fa2,fa-map-to-gpu{target=sm_90a},fagpu-io-report))" -o /dev/null | FileCheck %s --check-prefix=ROWS

// The reads of a packed kernel (query_group = 4) count its tiles' queries:
// the launch [1, Hkv = 8, 128 rows, 128] holds 32 queries of 4 heads each,
// at key positions 4064 .. 4095 (bottom-right), so with a window of 16 the
// tile's first key is 4049, in block 31 of 128 keys: one block. Read as
// 128 queries (rows at 3968 ..), the first key would be 3953, block 30:
// two blocks, twice the K/V bytes.
// CHECK: query tiles per head: 1, K/V blocks visited per head: 1
// CHECK: l2_to_sm_read_bytes: 786432 (q 262144, k 262144, v 262144, tile counter 0)
// ROWS: query tiles per head: 1, K/V blocks visited per head: 2
// ROWS: l2_to_sm_read_bytes: 1310720 (q 262144, k 524288, v 524288, tile counter 0)
func.func @packed(%q: memref<1x8x128x128xf16>, %k: memref<1x8x4096x128xf16>, %o: memref<1x8x128x128xf16>) {
  fa.attention %q, %k, %k outs(%o : memref<1x8x128x128xf16>) {causal, bottom_right, window = 16 : i64}
      : memref<1x8x128x128xf16>, memref<1x8x4096x128xf16>, memref<1x8x4096x128xf16>
  return
}
