// RUN: fa-opt %s --split-input-file --fagpu-build-kernels --verify-diagnostics

// What the sm_90a e4m3 kernel does not take yet, refused with the reason
// and the pass that would set the missing piece.

func.func @block_c_80(%q: memref<1x2x64x256xf8E4M3FN>, %k: memref<1x2x64x256xf8E4M3FN>, %v: memref<1x2x64x256xf8E4M3FN>, %o: memref<1x2x64x256xbf16>, %qd: memref<f32>, %kd: memref<f32>, %vd: memref<f32>) {
  // expected-error @+1 {{cannot be lowered to sm_90a wgmma: e4m3 kernels take D of 128 or 256 (the Q and K tiles are whole 128-byte rows of e4m3) and block_c a multiple of 32 from 64 to 256 (P's k-steps of 32 keys), got D = 256, block_c = 80}}
  fagpu.attention %q, %k, %v descale(%qd, %kd, %vd : memref<f32>, memref<f32>, memref<f32>) outs(%o) {probs_scale = 2.560000e+02 : f32, rescale_threshold = 0.000000e+00 : f32, scale = 0.0625 : f32, schedule = #fagpu.schedule<block_r = 128, block_c = 80, consumers = 2, ctas_per_sm = 1, producer_registers = 24, consumer_registers = 240, stages = 2, ping_pong = true, overlap_softmax = true, scheduler = single, q_buffers = 1, epilogue = registers, q_in_registers = false>, target = #fagpu.target<sm_90a>} : memref<1x2x64x256xf8E4M3FN>, memref<1x2x64x256xf8E4M3FN>, memref<1x2x64x256xf8E4M3FN>, memref<1x2x64x256xbf16>
  return
}

// -----

func.func @tma_store(%q: memref<1x2x64x128xf8E4M3FN>, %k: memref<1x2x64x128xf8E4M3FN>, %v: memref<1x2x64x128xf8E4M3FN>, %o: memref<1x2x64x128xbf16>, %qd: memref<f32>, %kd: memref<f32>, %vd: memref<f32>) {
  // expected-error @+1 {{cannot be lowered to sm_90a wgmma: e4m3 kernels store O from registers: run fagpu-tma-store-epilogue}}
  fagpu.attention %q, %k, %v descale(%qd, %kd, %vd : memref<f32>, memref<f32>, memref<f32>) outs(%o) {probs_scale = 2.560000e+02 : f32, rescale_threshold = 0.000000e+00 : f32, scale = 0.0883883461 : f32, schedule = #fagpu.schedule<block_r = 128, block_c = 128, consumers = 2, ctas_per_sm = 1, producer_registers = 24, consumer_registers = 240, stages = 2, ping_pong = true, overlap_softmax = true, scheduler = single, q_buffers = 1, epilogue = tma_store, q_in_registers = false>, target = #fagpu.target<sm_90a>} : memref<1x2x64x128xf8E4M3FN>, memref<1x2x64x128xf8E4M3FN>, memref<1x2x64x128xf8E4M3FN>, memref<1x2x64x128xbf16>
  return
}

// -----

// The row-sum tile is e4m3 ones against an e4m3 P: a 16-bit kernel has none.
func.func @row_sums_f16(%q: memref<1x2x64x128xf16>) {
  // expected-error @+1 {{cannot be lowered to sm_90a wgmma: row sums by MMA are for e4m3 kernels without split-KV (an e4m3 P against an e4m3 ones column)}}
  fagpu.attention %q, %q, %q outs(%q) {scale = 0.0883883461 : f32, schedule = #fagpu.schedule<block_r = 128, block_c = 128, consumers = 2, ctas_per_sm = 1, producer_registers = 24, consumer_registers = 240, stages = 2, ping_pong = true, overlap_softmax = true, scheduler = single, q_buffers = 1, epilogue = registers, q_in_registers = false, row_sum_mma = true>, target = #fagpu.target<sm_90a>} : memref<1x2x64x128xf16>, memref<1x2x64x128xf16>, memref<1x2x64x128xf16>, memref<1x2x64x128xf16>
  return
}

// -----

// Row sums by MMA add up the e4m3-rounded P, whose log-sum-exp is not the
// attention's: a schedule asking for them on an attention that writes an
// LSE is refused where the kernel is built too (not only by the pass).
func.func @row_sums_with_lse(%q: memref<1x2x300x128xf8E4M3FN>, %o: memref<1x2x300x128xbf16>, %lse: memref<1x2x300xf32>, %qd: memref<f32>) {
  // expected-error @+1 {{cannot be lowered to sm_90a wgmma: row sums by MMA add up the e4m3-rounded P: their log-sum-exp is off the attention's by up to 6e-2, so they are for attentions without an LSE}}
  fagpu.attention %q, %q, %q descale(%qd, %qd, %qd : memref<f32>, memref<f32>, memref<f32>) outs(%o, %lse) {probs_scale = 2.560000e+02 : f32, rescale_threshold = 0.000000e+00 : f32, scale = 0.0883883461 : f32, schedule = #fagpu.schedule<block_r = 128, block_c = 224, consumers = 2, ctas_per_sm = 1, producer_registers = 24, consumer_registers = 240, stages = 2, ping_pong = true, overlap_softmax = true, scheduler = static, q_buffers = 2, epilogue = registers, q_in_registers = false, row_sum_mma = true>, target = #fagpu.target<sm_90a>} : memref<1x2x300x128xf8E4M3FN>, memref<1x2x300x128xf8E4M3FN>, memref<1x2x300x128xf8E4M3FN>, memref<1x2x300x128xbf16>, memref<1x2x300xf32>
  return
}
