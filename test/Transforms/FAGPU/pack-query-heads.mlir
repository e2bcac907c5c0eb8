// fagpu-pack-query-heads sets `query_group` on sm_90a kernels: the G query
// heads of a K/V head packed query by query into a tile's rows. It leaves
// the schedules alone at query-group=0 and refuses what has no packed form.
// RUN: fa-opt %s --split-input-file --fagpu-pack-query-heads=query-group=4 --verify-diagnostics | FileCheck %s
// RUN: fa-opt %s --split-input-file --fagpu-pack-query-heads | FileCheck %s --check-prefix=OFF
// RUN: not fa-opt %s --split-input-file --fagpu-pack-query-heads=query-group=3 2>&1 | FileCheck %s --check-prefix=THREE
// RUN: not fa-opt %s --split-input-file --fagpu-pack-query-heads=query-group=256 2>&1 | FileCheck %s --check-prefix=LARGE

#s = #fagpu.schedule<block_r = 128, block_c = 128, consumers = 2, ctas_per_sm = 1, producer_registers = 24, consumer_registers = 240, stages = 0, ping_pong = false, overlap_softmax = false, scheduler = single, q_buffers = 1, epilogue = registers, q_in_registers = false>

// CHECK-LABEL: func.func @decode
// CHECK: q_in_registers = false, query_group = 4>
// OFF-LABEL: func.func @decode
// OFF-NOT: query_group
// THREE: fagpu-pack-query-heads: expected query_group 0 (no packing) or a power of two in [2, 64] that divides block_r (128), got 3
// LARGE: fagpu-pack-query-heads: expected query_group 0 (no packing) or a power of two in [2, 64] that divides block_r (128), got 256
func.func @decode(%q: memref<?x?x?x128xf16>, %k: memref<?x?x?x128xf16>, %o: memref<?x?x?x128xf16>, %lens: memref<?xi32>) {
  fagpu.attention %q, %k, %k kv_lengths(%lens : memref<?xi32>) outs(%o) {bottom_right, causal, scale = 0.0883883461 : f32, schedule = #s, target = #fagpu.target<sm_90a>} : memref<?x?x?x128xf16>, memref<?x?x?x128xf16>, memref<?x?x?x128xf16>, memref<?x?x?x128xf16>
  return
}

// -----

#s = #fagpu.schedule<block_r = 128, block_c = 128, consumers = 2, ctas_per_sm = 1, producer_registers = 24, consumer_registers = 240, stages = 0, ping_pong = false, overlap_softmax = false, scheduler = single, q_buffers = 1, epilogue = registers, q_in_registers = false>

// A varlen batch's prefix sums count queries.
func.func @varlen(%q: memref<1x?x?x128xf16>, %o: memref<1x?x?x128xf16>, %cu: memref<?xi32>) {
  // expected-error @+1 {{fagpu-pack-query-heads: a varlen batch's prefix sums count queries, not packed rows: it has no packed form}}
  fagpu.attention %q, %q, %q varlen(%cu, %cu : memref<?xi32>, memref<?xi32>) outs(%o) {scale = 0.0883883461 : f32, schedule = #s, target = #fagpu.target<sm_90a>} : memref<1x?x?x128xf16>, memref<1x?x?x128xf16>, memref<1x?x?x128xf16>, memref<1x?x?x128xf16>
  return
}

// -----

#m = #fagpu.schedule<block_r = 128, block_c = 64, consumers = 0, ctas_per_sm = 1, producer_registers = 0, consumer_registers = 0, stages = 0, ping_pong = false, overlap_softmax = false, scheduler = single, q_buffers = 1, epilogue = registers, q_in_registers = true>

// Only the sm_90a kernel reads packed rows.
func.func @sm80(%q: memref<1x2x64x64xf16>, %o: memref<1x2x64x64xf16>) {
  // expected-error @+1 {{fagpu-pack-query-heads: only the sm_90a kernel takes packed query heads, not sm_80}}
  fagpu.attention %q, %q, %q outs(%o) {scale = 0.125 : f32, schedule = #m, target = #fagpu.target<sm_80>} : memref<1x2x64x64xf16>, memref<1x2x64x64xf16>, memref<1x2x64x64xf16>, memref<1x2x64x64xf16>
  return
}
