// RUN: fa-opt %s --fagpu-row-sum-mma=mode=on -verify-diagnostics

// A split-KV kernel stores each chunk's partial l from the softmax's rows
// fragment: the row sums stay FADDs there.
func.func @split_kv(%q: memref<1x2x1x128xf8E4M3FN>, %o: memref<1x2x1x128xf16>, %qd: memref<f32>) {
  // expected-error @+1 {{fagpu-row-sum-mma: a split-KV kernel stores each chunk's l; its row sums stay FADDs}}
  fagpu.attention %q, %q, %q descale(%qd, %qd, %qd : memref<f32>, memref<f32>, memref<f32>) outs(%o) {probs_scale = 2.560000e+02 : f32, scale = 0.0625 : f32, schedule = #fagpu.schedule<block_r = 64, block_c = 128, consumers = 1, ctas_per_sm = 2, producer_registers = 24, consumer_registers = 232, stages = 2, ping_pong = false, overlap_softmax = false, scheduler = single, q_buffers = 1, epilogue = registers, q_in_registers = false, kv_splits = 4>, target = #fagpu.target<sm_90a>} : memref<1x2x1x128xf8E4M3FN>, memref<1x2x1x128xf8E4M3FN>, memref<1x2x1x128xf8E4M3FN>, memref<1x2x1x128xf16>
  return
}

// The MMA sums the e4m3-rounded P: O / l is consistent, but m + log l is
// not the attention's log-sum-exp (up to 6e-2 off on the H200), so an
// attention that writes an LSE keeps its FADD sums.
func.func @writes_lse(%q: memref<1x2x300x128xf8E4M3FN>, %o: memref<1x2x300x128xbf16>, %lse: memref<1x2x300xf32>, %qd: memref<f32>) {
  // expected-error @+1 {{fagpu-row-sum-mma: row sums by MMA add up the e4m3-rounded P: their log-sum-exp is off the attention's by up to 6e-2, so they are for attentions without an LSE}}
  fagpu.attention %q, %q, %q descale(%qd, %qd, %qd : memref<f32>, memref<f32>, memref<f32>) outs(%o, %lse) {probs_scale = 2.560000e+02 : f32, scale = 0.0883883461 : f32, schedule = #fagpu.schedule<block_r = 128, block_c = 224, consumers = 2, ctas_per_sm = 1, producer_registers = 24, consumer_registers = 240, stages = 0, ping_pong = false, overlap_softmax = false, scheduler = single, q_buffers = 1, epilogue = registers, q_in_registers = false>, target = #fagpu.target<sm_90a>} : memref<1x2x300x128xf8E4M3FN>, memref<1x2x300x128xf8E4M3FN>, memref<1x2x300x128xf8E4M3FN>, memref<1x2x300x128xbf16>, memref<1x2x300xf32>
  return
}
