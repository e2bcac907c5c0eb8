// B_r = 64 (on request): one consumer warpgroup, no
// ping-pong partner, and two CTAs per SM. nvvm.minctasm = 2 makes ptxas
// cap each of the 256 threads at 128 registers; the producer's setmaxnreg
// gives 104 of them to the consumer (232); the K/V ring and Q fit in half
// of the SM's shared memory. The second resident CTA's GEMMs fill the
// tensor cores while this one loads its first tiles or stores O.
// RUN: fa-opt %s --split-input-file --fa-sm90-kernel-pipeline | FileCheck %s

func.func @d64_causal(%q: memref<?x?x?x64xf16>, %k: memref<?x?x?x64xf16>,
                      %v: memref<?x?x?x64xf16>, %o: memref<?x?x?x64xf16>,
                      %lse: memref<?x?x?xf32>) {
  fa.attention %q, %k, %v outs(%o, %lse : memref<?x?x?x64xf16>, memref<?x?x?xf32>)
      {block_r = 64 : i64, causal}
      : memref<?x?x?x64xf16>, memref<?x?x?x64xf16>, memref<?x?x?x64xf16>
  return
}
// CHECK-LABEL: func.func @d64_causal
// Q tensor map boxes of 64 rows, 256 threads, 107,632 bytes of shared
// memory (Q 8 KiB + 3 stages of 32 KiB + barriers + alignment slack).
// CHECK: llvm.call @faEncodeStridedTensorMapL2(%{{.*}}, %{{.*}}, %{{.*}}, %{{.*}}, %{{.*}}, %c64_i64, %{{.*}}, %{{.*}}, %{{.*}}, %c64_i32,
// CHECK: gpu.launch_func @fa_kernels::@fa3_sm90_d64_br64_bc128_s3_f16_causal
// CHECK-SAME: threads in (%c256,
// CHECK-SAME: dynamic_shared_memory_size %c107632_i32
// CHECK: llvm.func @fa3_sm90_d64_br64_bc128_s3_f16_causal
// CHECK-SAME: consumers = 1, ctas_per_sm = 2, producer_registers = 24, consumer_registers = 232
// CHECK-SAME: ping_pong = false
// CHECK-SAME: nvvm.maxntid = array<i32: 256, 1, 1>
// CHECK-SAME: nvvm.minctasm = 2
// The "empty" barriers wait for the 4 warps of the one consumer.
// CHECK: nvvm.mbarrier.init %{{.*}}, %c4_i32
// CHECK: nvvm.setmaxregister  decrease 24
// CHECK: nvvm.setmaxregister  increase 232
// No named-barrier turn-taking without a partner warpgroup.
// CHECK-NOT: nvvm.barrier id
// CHECK-NOT: nvvm.barrier.arrive
// CHECK: nvvm.wgmma.mma_async
// CHECK-NOT: nvvm.barrier id
// CHECK-NOT: nvvm.barrier.arrive
// CHECK: llvm.return

// -----

// D = 128 with B_r = 64: B_c defaults to 64 and the ring to two stages,
// so that the CTA stays under 113 KiB with the 16 KiB O staging tile of
// the TMA-store epilogue (99,408 bytes).
func.func @d128(%q: memref<?x?x?x128xbf16>, %k: memref<?x?x?x128xbf16>,
                %v: memref<?x?x?x128xbf16>, %o: memref<?x?x?x128xbf16>,
                %lse: memref<?x?x?xf32>) {
  fa.attention %q, %k, %v outs(%o, %lse : memref<?x?x?x128xbf16>, memref<?x?x?xf32>)
      {block_r = 64 : i64}
      : memref<?x?x?x128xbf16>, memref<?x?x?x128xbf16>, memref<?x?x?x128xbf16>
  return
}
// CHECK-LABEL: func.func @d128
// CHECK: gpu.launch_func @fa_kernels::@fa3_sm90_d128_br64_bc64_s2_bf16
// CHECK-SAME: threads in (%c256,
// CHECK-SAME: dynamic_shared_memory_size %c99408_i32
// CHECK: nvvm.minctasm = 2
