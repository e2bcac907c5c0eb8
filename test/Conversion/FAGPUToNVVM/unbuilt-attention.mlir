// RUN: fa-opt %s --convert-fagpu-to-nvvm --verify-diagnostics
// RUN: sed /expected-error/d %s | fa-opt --fagpu-build-kernels --convert-fagpu-to-nvvm | FileCheck %s

// convert-fagpu-to-nvvm only converts: a fagpu.attention whose kernel
// fagpu-build-kernels has not written is refused, not built here.
// CHECK-LABEL: func.func @d64
// CHECK: gpu.launch_func @fa_kernels::@
// CHECK-NOT: fagpu.attention
func.func @d64(%q: memref<?x?x?x64xf16>, %k: memref<?x?x?x64xf16>, %v: memref<?x?x?x64xf16>,
    %o: memref<?x?x?x64xf16>, %lse: memref<?x?x?xf32>) {
  // expected-error @+1 {{has no kernel yet: run fagpu-build-kernels before convert-fagpu-to-nvvm}}
  fagpu.attention %q, %k, %v outs(%o, %lse) {target = #fagpu.target<sm_80>, scale = 0.125 : f32,
      schedule = #fagpu.schedule<block_r = 128, block_c = 64, consumers = 0, ctas_per_sm = 1, producer_registers = 0, consumer_registers = 0, stages = 2, ping_pong = false, overlap_softmax = false, scheduler = single, q_buffers = 1, epilogue = registers, q_in_registers = true>}
    : memref<?x?x?x64xf16>, memref<?x?x?x64xf16>, memref<?x?x?x64xf16>, memref<?x?x?x64xf16>, memref<?x?x?xf32>
  return
}
