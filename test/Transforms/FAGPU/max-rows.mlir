// fagpu-max-rows sets `max_rows = 8` on sm_90a kernels whose launches give
// each tile at most 8 real rows (decode on an e4m3 cache): each consumer
// thread then steps only its first row's softmax. It leaves the schedules
// alone at max-rows=0 and refuses what has no such form.
// RUN: fa-opt %s --split-input-file --fagpu-max-rows=max-rows=8 --verify-diagnostics | FileCheck %s
// RUN: fa-opt %s --split-input-file --fagpu-max-rows | FileCheck %s --check-prefix=OFF
// RUN: not fa-opt %s --split-input-file --fagpu-max-rows=max-rows=4 2>&1 | FileCheck %s --check-prefix=FOUR

#s = #fagpu.schedule<block_r = 64, block_c = 128, consumers = 1, ctas_per_sm = 1, producer_registers = 40, consumer_registers = 232, stages = 2, ping_pong = false, overlap_softmax = true, scheduler = single, q_buffers = 1, epilogue = registers, q_in_registers = false>

// CHECK-LABEL: func.func @decode
// CHECK: q_in_registers = false, max_rows = 8>
// OFF-LABEL: func.func @decode
// OFF-NOT: max_rows
// FOUR: fagpu-max-rows: expected max_rows 0 (tiles of any rows) or 8 (each thread's first row only), got 4
func.func @decode(%q: memref<?x?x?x128xf16>, %k: memref<?x?x?x128xf8E4M3FN>, %o: memref<?x?x?x128xf16>, %lens: memref<?xi32>, %kd: memref<f32>, %vd: memref<f32>) {
  fagpu.attention %q, %k, %k kv_lengths(%lens : memref<?xi32>) descale(%kd, %vd : memref<f32>, memref<f32>) outs(%o) {scale = 0.0883883461 : f32, schedule = #s, target = #fagpu.target<sm_90a>} : memref<?x?x?x128xf16>, memref<?x?x?x128xf8E4M3FN>, memref<?x?x?x128xf8E4M3FN>, memref<?x?x?x128xf16>
  return
}

// -----

#s = #fagpu.schedule<block_r = 128, block_c = 128, consumers = 2, ctas_per_sm = 1, producer_registers = 24, consumer_registers = 240, stages = 0, ping_pong = false, overlap_softmax = false, scheduler = single, q_buffers = 1, epilogue = registers, q_in_registers = false>

// A varlen batch's tiles hold any rows.
func.func @varlen(%q: memref<1x?x?x128xf16>, %o: memref<1x?x?x128xf16>, %cu: memref<?xi32>) {
  // expected-error @+1 {{fagpu-max-rows: a varlen batch's tiles hold any rows: it has no max_rows form}}
  fagpu.attention %q, %q, %q varlen(%cu, %cu : memref<?xi32>, memref<?xi32>) outs(%o) {scale = 0.0883883461 : f32, schedule = #s, target = #fagpu.target<sm_90a>} : memref<1x?x?x128xf16>, memref<1x?x?x128xf16>, memref<1x?x?x128xf16>, memref<1x?x?x128xf16>
  return
}

// -----

#m = #fagpu.schedule<block_r = 128, block_c = 64, consumers = 0, ctas_per_sm = 1, producer_registers = 0, consumer_registers = 0, stages = 0, ping_pong = false, overlap_softmax = false, scheduler = single, q_buffers = 1, epilogue = registers, q_in_registers = true>

// Only the sm_90a kernel steps one row a thread.
func.func @sm80(%q: memref<1x2x64x64xf16>, %o: memref<1x2x64x64xf16>) {
  // expected-error @+1 {{fagpu-max-rows: only the sm_90a kernel steps one row a thread, not sm_80}}
  fagpu.attention %q, %q, %q outs(%o) {scale = 0.125 : f32, schedule = #m, target = #fagpu.target<sm_80>} : memref<1x2x64x64xf16>, memref<1x2x64x64xf16>, memref<1x2x64x64xf16>, memref<1x2x64x64xf16>
  return
}
