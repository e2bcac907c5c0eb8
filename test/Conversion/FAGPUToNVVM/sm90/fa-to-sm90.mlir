// fa-sm90-kernel-pipeline (tile level, fa-map-to-gpu, the fagpu-* passes,
// convert-fagpu-to-nvvm) builds the FlashAttention-3 kernel. Each step of the
// schedule is checked in the NVVM IR: the TMA + mbarrier ring, wgmma, warp
// specialisation, ping-pong, then the ablation options. The walk-through
// is of the kernel with one tile per CTA; the default for this causal
// D = 128 attention is persistent with a dynamic tile scheduler, checked in
// persistent.mlir.

// RUN: fa-opt %s --fa-sm90-kernel-pipeline=persistent=off | FileCheck %s
// RUN: fa-opt %s --fa-sm90-kernel-pipeline=ping-pong=false | FileCheck %s --check-prefix=NOPP
// RUN: fa-opt %s --fa-sm90-kernel-pipeline="intra-overlap=false stages=2" | FileCheck %s --check-prefix=NOOVL
// RUN: fa-opt %s --fa-sm90-kernel-pipeline=persistent=on | FileCheck %s --check-prefix=PERSIST
// RUN: fa-opt %s --fa-sm90-kernel-pipeline=rescale-threshold=8 | FileCheck %s --check-prefix=FA4

func.func @attention(%q: memref<?x?x?x128xf16>, %k: memref<?x?x?x128xf16>,
                     %v: memref<?x?x?x128xf16>, %o: memref<?x?x?x128xf16>,
                     %lse: memref<?x?x?xf32>) {
  fa.attention %q, %k, %v outs(%o, %lse : memref<?x?x?x128xf16>, memref<?x?x?xf32>)
      {causal} : memref<?x?x?x128xf16>, memref<?x?x?x128xf16>, memref<?x?x?x128xf16>
  return
}

// Host side: three rank-4 tensor maps (the memrefs' strides) encoded by
// the runtime and passed by value, one CTA of 384 threads per (query block,
// head) tile.
// CHECK-LABEL: func.func @attention
// CHECK-COUNT-3: llvm.call @faEncodeStridedTensorMap
// CHECK: gpu.launch_func @fa_kernels::@fa3_sm90_d128_br128_bc128_s3_f16_causal
// CHECK-SAME: threads in (%c384,
// CHECK-SAME: dynamic_shared_memory_size %c230512_i32
// CHECK-SAME: args(%{{.*}} : !llvm.array<16 x i64>, %{{.*}} : !llvm.array<16 x i64>, %{{.*}} : !llvm.array<16 x i64>

// The kernel: tensor maps as __grid_constant__ byval parameters, the
// schedule as an attribute.
// CHECK: llvm.mlir.global external @fa_smem() {addr_space = 3 : i32, alignment = 1024 : i64}
// CHECK: llvm.func @fa3_sm90_d128_br128_bc128_s3_f16_causal(
// CHECK-SAME: %arg0: !llvm.ptr {llvm.align = 64 : i64, llvm.byval = !llvm.array<16 x i64>, nvvm.grid_constant}
// CHECK-SAME: fagpu.schedule = #fagpu.schedule<block_r = 128, block_c = 128, consumers = 2, ctas_per_sm = 1, producer_registers = 24, consumer_registers = 240, stages = 3, ping_pong = true, overlap_softmax = true, scheduler = single, q_buffers = 1, epilogue = tma_store_in_q, q_in_registers = false>
// CHECK-SAME: fagpu.threads = 384
// CHECK-SAME: nvvm.maxntid = array<i32: 384, 1, 1>

// Step 1, TMA + mbarrier: q_full, q_empty and 3 stages x (k_full, v_full,
// k_empty, v_empty), made visible to the TMA before anyone waits.
// CHECK-COUNT-14: nvvm.mbarrier.init
// CHECK: nvvm.fence.mbarrier.init
// CHECK: nvvm.barrier0

// Step 3, warp specialisation: warpgroup 0 gives registers away ...
// CHECK: %[[IS_PRODUCER:.*]] = arith.cmpi eq
// CHECK-NEXT: scf.if %[[IS_PRODUCER]] {
// CHECK-NEXT: nvvm.setmaxregister  decrease 24
// ... and one of its threads issues the loads: Q, then per K/V block wait
// for the stage to be empty, expect its bytes, load D / 64 boxes of 64
// columns into the swizzled column blocks.
// CHECK: nvvm.mbarrier.try_wait.parity
// CHECK: nvvm.mbarrier.arrive.expect_tx %{{.*}}, %c32768_i32
// CHECK: nvvm.cp.async.bulk.tensor.shared.cluster.global %{{.*}}, %arg0, %{{.*}}, box[%c0_i32
// CHECK: nvvm.cp.async.bulk.tensor.shared.cluster.global %{{.*}}, %arg0, %{{.*}}, box[%c64_i32
// CHECK: nvvm.mbarrier.try_wait.parity
// CHECK: nvvm.mbarrier.arrive.expect_tx
// CHECK: nvvm.cp.async.bulk.tensor.shared.cluster.global %{{.*}}, %arg1
// CHECK: nvvm.mbarrier.try_wait.parity
// CHECK: nvvm.mbarrier.arrive.expect_tx
// CHECK: nvvm.cp.async.bulk.tensor.shared.cluster.global %{{.*}}, %arg2
// The consumers take registers.
// CHECK: nvvm.setmaxregister  increase 240

// Step 4, ping-pong: consumer 0 pre-arrives on its own named barrier; each
// consumer waits for its turn (bar.sync, 256 threads) before its GEMMs and
// hands the turn over (bar.arrive) after issuing them.
// CHECK: nvvm.barrier.arrive id = %{{.*}} number_of_threads = %c256_i32
// CHECK: nvvm.mbarrier.try_wait.parity
// CHECK: nvvm.barrier id = %{{.*}} number_of_threads = %c256_i32

// Step 2, wgmma: S = Q K^T, 8 k-steps of m64n128k16 with both operands as
// shared-memory descriptors (the first ignores the accumulator).
// CHECK: nvvm.wgmma.fence.aligned
// CHECK: nvvm.wgmma.mma_async {{.*}} <m = 64, n = 128, k = 16>, D[<f32>, <zero>], A[<f16>, <one>, <row>], B[<f16>, <one>, <col>]
// CHECK-COUNT-7: nvvm.wgmma.mma_async {{.*}} D[<f32>, <one>]
// CHECK: nvvm.wgmma.commit.group.sync.aligned
// CHECK: nvvm.barrier.arrive
// CHECK: nvvm.wgmma.wait.group.sync.aligned 0
// The K stage is released by lane 0 of each consumer warp.
// CHECK: nvvm.mbarrier.arrive
// Row max across the quad.
// CHECK: nvvm.shfl.sync bfly

// The main loop: S_j issued, then O += P_{j-1} V_{j-1} with P from
// registers (8 k-steps of m64n128k16, V transposed), then the softmax of
// S_j while that runs (wait_group 1), then wait_group 0.
// CHECK: scf.for
// CHECK: nvvm.barrier id
// CHECK-COUNT-8: nvvm.wgmma.mma_async
// CHECK: nvvm.wgmma.commit.group.sync.aligned
// CHECK: nvvm.wgmma.fence.aligned
// CHECK: llvm.inline_asm has_side_effects {{.*}}wgmma.mma_async.sync.aligned.m64n128k16.f32.f16.f16 {{.*}}p, 1, 1, 1;
// CHECK: nvvm.wgmma.commit.group.sync.aligned
// CHECK: nvvm.barrier.arrive
// CHECK: nvvm.wgmma.wait.group.sync.aligned 1
// CHECK: nvvm.wgmma.wait.group.sync.aligned 0

// Without ping-pong no named barrier joins the two consumers (the
// epilogue's barriers join the four warps of one: 128 threads).
// NOPP: ping_pong = false
// NOPP-NOT: number_of_threads = %c256_i32
// NOPP-NOT: nvvm.barrier.arrive

// Without the intra-warpgroup overlap the softmax waits for both GEMMs.
// NOOVL: stages = 2, ping_pong = true, overlap_softmax = false
// NOOVL-NOT: nvvm.wgmma.wait.group.sync.aligned 1

// Persistent CTAs take the causal tiles from a counter (persistent.mlir).
// PERSIST: scheduler = dynamic, q_buffers = 2
// PERSIST: scf.while
// PERSIST: llvm.atomicrmw add

// FA4 conditional rescaling: O is rescaled only under a warp vote.
// FA4: llvm.func @fa3_{{.*}}_cr8(
// FA4: nvvm.vote.sync any
