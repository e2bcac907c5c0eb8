// convert-fa-to-sm100 builds the Blackwell kernel with FlashAttention-4's
// structure (compile-verified only: no Blackwell GPU here). The NVVM IR is
// checked step by step: barriers and the TMEM allocation, the softmax
// warps (S from TMEM, FA4 base update and software exp2, O rescaled in
// TMEM under a warp vote, P back to TMEM), the load warp (TMA), the MMA
// warp (tcgen05.mma S = Q K^T from shared memory, O += P V with P from
// TMEM, tcgen05.commit to the mbarriers), then the options.

// RUN: fa-opt %s --fa-sm100-kernel-pipeline | FileCheck %s
// RUN: fa-opt %s --fa-sm100-kernel-pipeline --mlir-print-ir-after=fagpu-tmem-accumulators -o /dev/null 2>&1 | FileCheck %s --check-prefix=FAGPU
// RUN: fa-opt %s --fa-sm100-kernel-pipeline="rescale-threshold=-1 poly-exp2-degree=0 stages=2" --mlir-print-ir-after=fagpu-pipeline-kv -o /dev/null 2>&1 | FileCheck %s --check-prefix=FAGPU-PLAIN
// RUN: fa-opt %s --fa-sm100-kernel-pipeline="rescale-threshold=-1 poly-exp2-degree=0 stages=2" | FileCheck %s --check-prefix=PLAIN

func.func @attention(%q: memref<?x?x?x128xf16>, %k: memref<?x?x?x128xf16>,
                     %v: memref<?x?x?x128xf16>, %o: memref<?x?x?x128xf16>,
                     %lse: memref<?x?x?xf32>) {
  fa.attention %q, %k, %v outs(%o, %lse : memref<?x?x?x128xf16>, memref<?x?x?xf32>)
      {causal} : memref<?x?x?x128xf16>, memref<?x?x?x128xf16>, memref<?x?x?x128xf16>
  return
}

// At the fagpu level, before any NVVM: the kernel the schedule describes.
// FA4's tricks come from the tile ops (conditional rescaling at 8, software
// exp2 of degree 3 for one register in 8, Blackwell's defaults); B_r = 128
// is the tcgen05.mma M (one TMEM lane per row); the ring has 3 stages; no
// warpgroup roles (the tcgen05 kernel's warps have fixed jobs); the
// accumulators in TMEM, two S/P buffers of 128 columns and O's 128 in 512.
// FAGPU: fagpu.attention {{.*}} {causal, exp2_poly_degree = 3 : i64, exp2_poly_period = 8 : i64, rescale_threshold = 8.000000e+00 : f32, scale = 0.0883883461 : f32,
// FAGPU-SAME: schedule = #fagpu.schedule<block_r = 128, block_c = 128, consumers = 0, ctas_per_sm = 1, producer_registers = 0, consumer_registers = 0, stages = 3,
// FAGPU-SAME: tmem_columns = 512>
// FAGPU-SAME: target = #fagpu.target<sm_100a>}
// (Printed in name order: nothing between causal and scale, so neither
// FA4 attribute.)
// FAGPU-PLAIN: fagpu.attention {{.*}} {causal, scale = 0.0883883461 : f32,
// FAGPU-PLAIN-SAME: stages = 2,
// FAGPU-PLAIN-SAME: target = #fagpu.target<sm_100a>}

// Host side: the tensor-map launch of the TMA kernels, 192 threads.
// CHECK-LABEL: func.func @attention
// CHECK-COUNT-3: llvm.call @faEncodeTensorMap
// CHECK: gpu.launch_func @fa_kernels::@fa4_sm100_d128_br128_bc128_s3_f16_causal_cr8_px3p8
// CHECK-SAME: threads in (%c192,

// The kernel and its schedule.
// CHECK: llvm.func @fa4_sm100_d128_br128_bc128_s3_f16_causal_cr8_px3p8(
// CHECK-SAME: %arg0: !llvm.ptr {llvm.align = 64 : i64, llvm.byval = !llvm.array<16 x i64>, nvvm.grid_constant}
// CHECK-SAME: fagpu.schedule = #fagpu.schedule<block_r = 128, block_c = 128,
// CHECK-SAME: stages = 3,
// CHECK-SAME: fagpu.target = #fagpu.target<sm_100a>, fagpu.threads = 192
// CHECK-SAME: nvvm.maxntid = array<i32: 192, 1, 1>

// Barriers: q_full, 3 x (k_full, v_full, k_empty, v_empty), s_full x 2 (one
// arrival each), p_full x 2 (the 128 softmax threads), o_done.
// CHECK-COUNT-15: nvvm.mbarrier.init %{{.*}}, %c1_i32
// CHECK-COUNT-2: nvvm.mbarrier.init %{{.*}}, %c128_i32
// CHECK: nvvm.mbarrier.init %{{.*}}, %c1_i32
// CHECK: nvvm.fence.mbarrier.init
// The MMA warp (warp 5) allocates all 512 TMEM columns; the address goes
// through shared memory to every thread.
// CHECK: %[[IS_MMA:.*]] = arith.cmpi eq, %{{.*}}, %c5_i32
// CHECK: scf.if %[[IS_MMA]] {
// CHECK: nvvm.tcgen05.alloc %{{.*}}, %c512_i32 : !llvm.ptr<3>, i32
// CHECK-NEXT: nvvm.tcgen05.relinquish_alloc_permit
// CHECK: nvvm.tcgen05.fence <before>
// CHECK-NEXT: nvvm.barrier0
// CHECK-NEXT: nvvm.tcgen05.fence <after>
// CHECK-NEXT: %[[TMEM:.*]] = llvm.load %{{.*}} : !llvm.ptr<3> -> i32

// Warps 0-3: the softmax. Unmasked blocks first, carrying (m, l).
// CHECK: %[[IS_SOFTMAX:.*]] = arith.cmpi ult, %{{.*}}, %c4_i32
// CHECK: scf.if %[[IS_SOFTMAX]] {
// CHECK: scf.for %{{.*}} iter_args(%{{.*}} = %cst{{.*}}, %{{.*}} = %cst{{.*}}) -> (f32, f32) : i32 {
// Wait for S_j, then four 32-column loads of this thread's TMEM lane.
// CHECK: nvvm.mbarrier.try_wait.parity
// CHECK-NEXT: nvvm.tcgen05.fence <after>
// CHECK-COUNT-4: nvvm.tcgen05.ld %{{.*}} {shape = #nvvm.tcgen05_ldst_shape<shape_32x32b>} : vector<32xi32>
// CHECK-NEXT: nvvm.tcgen05.wait <load>
// FA4 base update: the base moves only past the threshold.
// CHECK: %[[RISE:.*]] = arith.subf
// CHECK-NEXT: %[[TAU:.*]] = arith.constant 8.000000e+00 : f32
// CHECK-NEXT: %[[MOVED:.*]] = arith.cmpf ogt, %[[RISE]], %[[TAU]]
// Software exp2 on the FMA pipe (floor, polynomial, exponent bits) for one
// column in eight, the MUFU ex2 for the rest. The floor is y + 1.5 * 2^23
// rounded down (no FRND/F2I conversion), its low bits the exponent step.
// CHECK-NOT: math.floor
// CHECK: %[[MAGIC:.*]] = arith.constant 0x4B400000 : f32
// CHECK-NEXT: %[[SHIFTED:.*]] = llvm.call_intrinsic "llvm.nvvm.add.rm.f"(%{{.*}}, %[[MAGIC]]) : (f32, f32) -> f32
// CHECK-NEXT: %[[WHOLE:.*]] = arith.subf %[[SHIFTED]], %[[MAGIC]]
// CHECK-NEXT: %[[BITS:.*]] = arith.bitcast %[[SHIFTED]] : f32 to i32
// CHECK: arith.shli %[[BITS]], %{{.*}} : i32
// CHECK: arith.subf %{{.*}}, %[[WHOLE]]
// CHECK: math.fma
// CHECK: ex2.approx.ftz.f32
// O moves to the new base once P_{j-1} V_{j-1} landed, only if a row of the
// warp moved its base: ld, scale, st of O, 32 columns at a time.
// CHECK: nvvm.mbarrier.try_wait.parity
// CHECK-NEXT: nvvm.tcgen05.fence <after>
// CHECK: %[[ANY:.*]] = nvvm.vote.sync any %c-1_i32, %[[MOVED]] -> i1
// CHECK-NEXT: scf.if %[[ANY]] {
// CHECK: nvvm.tcgen05.ld
// CHECK: arith.mulf
// CHECK: nvvm.tcgen05.st
// CHECK: nvvm.tcgen05.wait <store>
// P_j as f16 pairs over its S buffer (64 columns), then p_full.
// CHECK: llvm.fptrunc %{{.*}} : vector<2xf32> to vector<2xf16>
// CHECK: nvvm.tcgen05.st
// CHECK: nvvm.tcgen05.st
// CHECK-NEXT: nvvm.tcgen05.wait <store>
// CHECK-NEXT: nvvm.tcgen05.fence <before>
// CHECK: nvvm.mbarrier.arrive %{{.*}} : !llvm.ptr<3>
// Then the masked blocks (causal diagonal, ragged end): column c of the
// row is visible iff c < min(Nk, row + 1) - kStart ...
// CHECK: scf.for
// CHECK: arith.minui
// CHECK: arith.cmpi slt
// ... and the epilogue: wait for the last O, read it from TMEM, O / l.
// CHECK: nvvm.tcgen05.ld
// CHECK: arith.divf
// CHECK: llvm.store %{{.*}} {alignment = 16 : i64} : vector<4xi32>, !llvm.ptr<1>

// Warp 4, lane 0: the TMA loads, as on Hopper.
// CHECK: nvvm.mbarrier.arrive.expect_tx %{{.*}}, %c32768_i32
// CHECK: nvvm.cp.async.bulk.tensor.shared.cluster.global %{{.*}}, %arg0
// CHECK: scf.for
// CHECK: nvvm.mbarrier.try_wait.parity
// CHECK: nvvm.cp.async.bulk.tensor.shared.cluster.global %{{.*}}, %arg1
// CHECK: nvvm.mbarrier.try_wait.parity
// CHECK: nvvm.cp.async.bulk.tensor.shared.cluster.global %{{.*}}, %arg2

// Warp 5, lane 0: the MMAs. S_0 = Q K_0^T: 8 k-steps, both operands by
// shared-memory descriptor, instruction descriptor 0x08200010 (f32 D, f16
// A/B, N = 128, M = 128), the first step overwriting the accumulator.
// CHECK: nvvm.mbarrier.try_wait.parity %{{.*}}, %c0_i32
// CHECK: nvvm.tcgen05.mma %{{.*}}, %{{.*}}, %{{.*}}, %c136314896_i32, %false {ctaGroup = #nvvm.cta_group<cta_1>, kind = #nvvm.tcgen05_mma_kind<f16>} : (!llvm.ptr<6>, i64, i64, i32, i1)
// CHECK-COUNT-7: nvvm.tcgen05.mma %{{.*}}, %{{.*}}, %{{.*}}, %c136314896_i32, %true
// K_0 released and S_0 announced when the MMAs complete.
// CHECK: nvvm.tcgen05.commit
// CHECK: nvvm.tcgen05.commit
// The loop: S_{j+1} after O += P_{j-1} V_{j-1} completed ...
// CHECK: scf.for
// CHECK: nvvm.mbarrier.try_wait.parity
// CHECK-NEXT: nvvm.tcgen05.fence <after>
// CHECK-COUNT-8: nvvm.tcgen05.mma %{{.*}} : (!llvm.ptr<6>, i64, i64, i32, i1)
// ... then, once P_j is in TMEM, O += P_j V_j: A from tensor memory (a
// !llvm.ptr<6>), instruction descriptor 0x08210010 (as for S, N = D = 128,
// plus bit 16: B = V is MN-major).
// CHECK: nvvm.mbarrier.try_wait.parity
// CHECK-NEXT: nvvm.tcgen05.fence <after>
// CHECK: nvvm.mbarrier.try_wait.parity
// CHECK-COUNT-8: nvvm.tcgen05.mma %{{.*}}, %{{.*}}, %{{.*}}, %c136380432_i32, %{{.*}} : (!llvm.ptr<6>, !llvm.ptr<6>, i64, i32, i1)
// CHECK: nvvm.tcgen05.commit
// CHECK: nvvm.tcgen05.commit
// All roles done: the MMA warp frees TMEM.
// CHECK: nvvm.barrier0
// CHECK: nvvm.bar.warp.sync
// CHECK: nvvm.tcgen05.dealloc %{{.*}}, %c512_i32 : !llvm.ptr<6>, i32

// Without the FA4 tricks: no vote (O always rescaled), no software exp2.
// Smaller tiles allocate only the TMEM they use (256 columns at B_c = 64).
// PLAIN: llvm.func @fa4_sm100_d128_br128_bc128_s2_f16_causal(
// PLAIN-NOT: nvvm.vote.sync
// PLAIN-NOT: math.floor
// PLAIN: nvvm.tcgen05.dealloc
