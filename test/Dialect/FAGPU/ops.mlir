// RUN: fa-opt %s | fa-opt | FileCheck %s

// Round trip of fagpu.attention and its typed schedule.

// CHECK-LABEL: func @sm90
// CHECK: fagpu.attention %{{.*}}, %{{.*}}, %{{.*}} outs(%{{.*}}, %{{.*}}) {causal, rescale_threshold = 8.000000e+00 : f32, scale = 1.250000e-01 : f32,
// CHECK-SAME: schedule = #fagpu.schedule<block_r = 128, block_c = 128, consumers = 2, ctas_per_sm = 1, producer_registers = 24, consumer_registers = 240, stages = 2, ping_pong = true, overlap_softmax = true, scheduler = dynamic, q_buffers = 2, epilogue = tma_store, q_in_registers = false>
// CHECK-SAME: target = #fagpu.target<sm_90a>}
func.func @sm90(%q: memref<?x?x?x64xf16>, %k: memref<?x?x?x64xf16>, %v: memref<?x?x?x64xf16>,
                %o: memref<?x?x?x64xf16>, %lse: memref<?x?x?xf32>) {
  fagpu.attention %q, %k, %v outs(%o, %lse) {
      target = #fagpu.target<sm_90a>, scale = 0.125 : f32, causal, rescale_threshold = 8.0 : f32,
      schedule = #fagpu.schedule<block_r = 128, block_c = 128, consumers = 2, ctas_per_sm = 1,
                                 producer_registers = 24, consumer_registers = 240, stages = 2,
                                 ping_pong = true, overlap_softmax = true, scheduler = dynamic,
                                 q_buffers = 2, epilogue = tma_store, q_in_registers = false>}
    : memref<?x?x?x64xf16>, memref<?x?x?x64xf16>, memref<?x?x?x64xf16>, memref<?x?x?x64xf16>, memref<?x?x?xf32>
  return
}

// Without LSE, on sm_80, with a window, softcap and software exp2.
// CHECK-LABEL: func @sm80
// CHECK: fagpu.attention %{{.*}}, %{{.*}}, %{{.*}} outs(%{{.*}}) {exp2_poly_degree = 3 : i64, exp2_poly_period = 8 : i64, scale = 1.000000e+00 : f32,
// CHECK-SAME: scheduler = single
// CHECK-SAME: softcap = 3.000000e+01 : f32, target = #fagpu.target<sm_80>, window = 16 : i64}
// CHECK-SAME: : memref<1x2x100x128xbf16>, memref<1x2x100x128xbf16>, memref<1x2x100x128xbf16>, memref<1x2x100x128xbf16>
func.func @sm80(%q: memref<1x2x100x128xbf16>, %o: memref<1x2x100x128xbf16>) {
  fagpu.attention %q, %q, %q outs(%o) {
      target = #fagpu.target<sm_80>, scale = 1.0 : f32, window = 16, softcap = 30.0 : f32,
      exp2_poly_degree = 3, exp2_poly_period = 8,
      schedule = #fagpu.schedule<block_r = 128, block_c = 64, consumers = 0, ctas_per_sm = 1,
                                 producer_registers = 0, consumer_registers = 0, stages = 2,
                                 ping_pong = false, overlap_softmax = false, scheduler = single,
                                 q_buffers = 1, epilogue = registers, q_in_registers = true>}
    : memref<1x2x100x128xbf16>, memref<1x2x100x128xbf16>, memref<1x2x100x128xbf16>, memref<1x2x100x128xbf16>
  return
}

// FP8: e4m3 Q/K/V with per-tensor descales, a bf16 O, P scaled by 2^8
// before its e4m3 cast.
// CHECK-LABEL: func.func @fp8
// CHECK: fagpu.attention %{{.*}}, %{{.*}}, %{{.*}} descale(%{{.*}}, %{{.*}}, %{{.*}} : memref<f32>, memref<f32>, memref<f32>) outs(%{{.*}}) {probs_scale = 2.560000e+02 : f32,
// CHECK-SAME: : memref<1x2x100x128xf8E4M3FN>, memref<1x2x100x128xf8E4M3FN>, memref<1x2x100x128xf8E4M3FN>, memref<1x2x100x128xbf16>
func.func @fp8(%q: memref<1x2x100x128xf8E4M3FN>, %o: memref<1x2x100x128xbf16>, %d: memref<f32>) {
  fagpu.attention %q, %q, %q descale(%d, %d, %d : memref<f32>, memref<f32>, memref<f32>) outs(%o) {
      target = #fagpu.target<sm_90a>, scale = 1.0 : f32, probs_scale = 256.0 : f32,
      schedule = #fagpu.schedule<block_r = 128, block_c = 128, consumers = 2, ctas_per_sm = 1,
                                 producer_registers = 0, consumer_registers = 0, stages = 0,
                                 ping_pong = false, overlap_softmax = false, scheduler = single,
                                 q_buffers = 1, epilogue = registers, q_in_registers = false>}
    : memref<1x2x100x128xf8E4M3FN>, memref<1x2x100x128xf8E4M3FN>, memref<1x2x100x128xf8E4M3FN>, memref<1x2x100x128xbf16>
  return
}
