// RUN: fa-opt %s --fagpu-row-sum-mma=mode=on -verify-diagnostics

// A split-KV kernel stores each chunk's partial l from the softmax's rows
// fragment: the row sums stay FADDs there.
func.func @split_kv(%q: memref<1x2x1x128xf8E4M3FN>, %o: memref<1x2x1x128xf16>, %qd: memref<f32>) {
  // expected-error @+1 {{fagpu-row-sum-mma: a split-KV kernel stores each chunk's l; its row sums stay FADDs}}
  fagpu.attention %q, %q, %q descale(%qd, %qd, %qd : memref<f32>, memref<f32>, memref<f32>) outs(%o) {probs_scale = 2.560000e+02 : f32, scale = 0.0625 : f32, schedule = #fagpu.schedule<block_r = 64, block_c = 128, consumers = 1, ctas_per_sm = 2, producer_registers = 24, consumer_registers = 240, stages = 2, ping_pong = false, overlap_softmax = false, scheduler = single, q_buffers = 1, epilogue = registers, q_in_registers = false, kv_splits = 4>, target = #fagpu.target<sm_90a>} : memref<1x2x1x128xf8E4M3FN>, memref<1x2x1x128xf8E4M3FN>, memref<1x2x1x128xf8E4M3FN>, memref<1x2x1x128xf16>
  return
}
