// RUN: fa-opt %s --split-input-file --fagpu-build-kernels --verify-diagnostics

// The epilogues a varlen kernel cannot take, refused with the reason: a
// TMA box of O would write into the next sequence's rows, and rows copied
// from the Q buffer need a one-tile CTA (a persistent producer refills the
// buffer with TMA loads after the threads' reads).

func.func @tma_store(%q: memref<1x?x?x128xf16>, %o: memref<1x?x?x128xf16>, %cu: memref<?xi32>) {
  // expected-error @+1 {{cannot be lowered to sm_90a wgmma: a varlen kernel stores O from registers or through a staging tile (staged_copy: whole blocks by TMA, a sequence's last block by copied rows), not by TMA boxes alone, and has no split-KV}}
  fagpu.attention %q, %q, %q varlen(%cu, %cu : memref<?xi32>, memref<?xi32>) outs(%o) {scale = 0.125 : f32, schedule = #fagpu.schedule<block_r = 128, block_c = 128, consumers = 2, ctas_per_sm = 1, producer_registers = 24, consumer_registers = 240, stages = 2, ping_pong = true, overlap_softmax = true, scheduler = static, q_buffers = 2, epilogue = tma_store, q_in_registers = false>, target = #fagpu.target<sm_90a>} : memref<1x?x?x128xf16>, memref<1x?x?x128xf16>, memref<1x?x?x128xf16>, memref<1x?x?x128xf16>
  return
}

// -----

func.func @copy_in_q_persistent(%q: memref<1x?x?x128xf16>, %o: memref<1x?x?x128xf16>, %cu: memref<?xi32>) {
  // expected-error @+1 {{cannot be lowered to sm_90a wgmma: rows copied from the Q buffer need a one-tile CTA (a persistent producer refills the buffer)}}
  fagpu.attention %q, %q, %q varlen(%cu, %cu : memref<?xi32>, memref<?xi32>) outs(%o) {scale = 0.125 : f32, schedule = #fagpu.schedule<block_r = 128, block_c = 128, consumers = 2, ctas_per_sm = 1, producer_registers = 24, consumer_registers = 240, stages = 2, ping_pong = true, overlap_softmax = true, scheduler = static, q_buffers = 2, epilogue = staged_copy_in_q, q_in_registers = false>, target = #fagpu.target<sm_90a>} : memref<1x?x?x128xf16>, memref<1x?x?x128xf16>, memref<1x?x?x128xf16>, memref<1x?x?x128xf16>
  return
}
