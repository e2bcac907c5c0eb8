// RUN: fa-opt %s --split-input-file --fagpu-build-kernels | FileCheck %s

// fagpu-build-kernels writes the backward kernel of each
// fagpu.attention_backward (FlashAttention-2's backward on mma.sync) in
// fagpu ops; backward-to-nvvm.mlir checks the lowering of its own ops.

!t = memref<?x?x?x64xf16>
!r = memref<?x?x?xf32>
// A CTA per (K/V block of 64 keys, K/V head, batch) on x, y, z; K, V, the
// two-stage Q / dO ring (8 KiB tiles) and the dS tile: 56 KiB.
// CHECK-LABEL: func.func @causal
// CHECK: %[[BLOCKS:.*]] = arith.ceildivui %{{.*}}, %c64{{.*}} : index
// CHECK: gpu.launch_func @fa_kernels::@fa2_bwd_sm80_d64_br64_bc64_f16_causal blocks in (%[[BLOCKS]], %{{.*}}, %{{.*}}) threads in (%c128{{.*}}) dynamic_shared_memory_size %c57344_i32
// The preprocess (row_dots = rowsum(dO o O), dq_accum = 0) and dQ's
// conversion, kernels of the same module for the runtimes (the host launch
// above keeps the tile level's nests for them): a CTA per 64 query rows,
// two threads a row.
// CHECK: llvm.func @fa2_bwd_sm80_d64_br64_bc64_f16_causal_convert(
// CHECK-SAME: fagpu.grid = {x = "ceil(Nq / 64)", y = "Hq", z = "B"}
// CHECK-SAME: name = "dq_accum"
// CHECK-SAME: name = "dq"
// CHECK: arith.truncf %{{.*}} : vector<4xf32> to vector<4xf16>
// CHECK: llvm.func @fa2_bwd_sm80_d64_br64_bc64_f16_causal_preprocess(
// CHECK-SAME: fagpu.grid = {x = "ceil(Nq / 64)", y = "Hq", z = "B"}
// CHECK-SAME: name = "o"
// CHECK-SAME: name = "do"
// CHECK-SAME: name = "row_dots"
// CHECK-SAME: name = "dq_accum"
// CHECK: nvvm.shfl.sync  bfly
// CHECK: llvm.func @fa2_bwd_sm80_d64_br64_bc64_f16_causal(
// CHECK-SAME: fagpu.backward, fagpu.backward_convert = "fa2_bwd_sm80_d64_br64_bc64_f16_causal_convert", fagpu.backward_preprocess = "fa2_bwd_sm80_d64_br64_bc64_f16_causal_preprocess", fagpu.grid = {x = "ceil(Nk / block_c)", y = "Hkv", z = "B"}
// CHECK-SAME: name = "row_dots"
// CHECK-SAME: name = "dq_accum"
// Causal: the first query block that sees key k0 is max(k0 - shift, 0) / 64
// (shift 0 top-left); the CTA's steps are the group's heads times the
// blocks from there.
// CHECK: arith.maxsi
// CHECK: %[[K:.*]] = fagpu.shared_tile offset 0 : <64x64xf16, row_major>
// CHECK: %[[V:.*]] = fagpu.shared_tile offset 8192 : <64x64xf16, row_major>
// CHECK: %[[RING:.*]] = fagpu.create_pipeline {barrier_offset = 0 : i64, tile_offset = 16384 : i64} : <stages = 2, buffers = 2, 64x64xf16, row_major>
// CHECK: %[[DS:.*]] = fagpu.shared_tile offset 49152 : <64x64xf16, row_major>
// Prologue: K, V, and step 0's Q and dO where there is a step 0.
// CHECK: fagpu.copy_async %{{.*}} into %[[K]] threads 128
// CHECK: fagpu.copy_async %{{.*}} into %[[V]] threads 128
// CHECK: scf.if
// CHECK: fagpu.copy_async
// CHECK: fagpu.copy_async
// CHECK: fagpu.copy_commit
// CHECK: scf.for {{.*}} -> (!fagpu.fragment<64x64xf32, accumulator>, !fagpu.fragment<64x64xf32, accumulator>)
// CHECK: fagpu.copy_wait pending 0
// CHECK: scf.if
// CHECK: fagpu.copy_commit
// CHECK: %[[Q:.*]] = fagpu.pipeline_tile %[[RING]][%{{.*}}] buffer 0
// CHECK: %[[DO:.*]] = fagpu.pipeline_tile %[[RING]][%{{.*}}] buffer 1
// S^T = K Q^T, P^T with the causal shift, dV += P^T dO, dP^T = V dO^T,
// dS^T, dK += dS^T Q.
// CHECK: %[[S:.*]] = fagpu.mma %[[K]], %[[Q]] : !fagpu.smem_tile<64x64xf16, row_major>, <64x64xf16, row_major> -> !fagpu.fragment<64x64xf32, accumulator>
// CHECK: %[[P:.*]] = fagpu.backward_probs %[[S]] lse %{{.*}} queries(%{{.*}}, %{{.*}}) keys(%{{.*}}, %{{.*}}) scale_log2 %{{.*}} causal_shift %{{.*}}
// CHECK: %[[PA:.*]] = fagpu.to_operand_a %[[P]] : <64x64xf32, accumulator> -> <64x64xf16, operand_a>
// CHECK: fagpu.mma %[[PA]], %[[DO]] acc(%{{.*}}) {mn_major}
// CHECK: %[[DP:.*]] = fagpu.mma %[[V]], %[[DO]] :
// CHECK: %[[GS:.*]] = fagpu.backward_grad_scores %[[P]], %[[DP]] row_dots
// CHECK: %[[GA:.*]] = fagpu.to_operand_a %[[GS]]
// CHECK: fagpu.mma %[[GA]], %[[Q]] acc(%{{.*}}) {mn_major}
// dS through shared memory (its barrier leaves the prefetch in flight),
// dQ = dS K added to the f32 accumulator.
// CHECK: fagpu.store_transposed %[[GS]], %[[DS]]
// CHECK-NEXT: fagpu.copy_wait pending 1
// CHECK-NEXT: %[[GQ:.*]] = fagpu.load_fragment %[[DS]]
// CHECK-NEXT: %[[DQ:.*]] = fagpu.mma %[[GQ]], %[[K]] {mn_major}
// CHECK: fagpu.atomic_add_rows %[[DQ]] rows(%{{.*}}, %{{.*}}) to %{{.*}} scale %arg13
// CHECK: scf.yield
// dK (times the scale) and dV, each row written once.
// CHECK: fagpu.copy_wait pending 0
// CHECK: fagpu.output_rows
// CHECK: %[[SCALE:.*]] = fagpu.splat %arg13 : <64xf32, rows>
// CHECK: fagpu.store_rows %{{.*}}#0, %[[SCALE]]
// CHECK: fagpu.output_rows
// CHECK: fagpu.store_rows %{{.*}}#1
func.func @causal(%q: !t, %k: !t, %v: !t, %lse: !r, %do: !t, %d: !r,
                  %dq: memref<?x?x?x64xf32>, %dk: !t, %dv: !t) {
  fagpu.attention_backward %q, %k, %v, %lse, %do, %d, %dq outs(%dk, %dv)
      {target = #fagpu.target<sm_80>, scale = 0.125 : f32, causal,
       block_r = 64 : i64, block_c = 64 : i64}
    : !t, !t, !t, !r, !t, !r, memref<?x?x?x64xf32>, !t, !t
  return
}

// -----

// Without a mask: every query block, no shift; D = 128 bf16 (104 KiB).
!t = memref<?x?x?x128xbf16>
!r = memref<?x?x?xf32>
// CHECK-LABEL: func.func @plain
// CHECK: gpu.launch_func @fa_kernels::@fa2_bwd_sm80_d128_br64_bc64_bf16 blocks {{.*}} dynamic_shared_memory_size %c106496_i32
// CHECK-NOT: arith.maxsi
// CHECK: fagpu.backward_probs %{{.*}} scale_log2 %{{.*}} : {{.*}}<1> : <64x64xf32, accumulator>
// CHECK: fagpu.mma {{.*}} -> !fagpu.fragment<64x128xf32, accumulator>
func.func @plain(%q: !t, %k: !t, %v: !t, %lse: !r, %do: !t, %d: !r,
                 %dq: memref<?x?x?x128xf32>, %dk: !t, %dv: !t) {
  fagpu.attention_backward %q, %k, %v, %lse, %do, %d, %dq outs(%dk, %dv)
      {target = #fagpu.target<sm_80>, scale = 0.088 : f32,
       block_r = 64 : i64, block_c = 64 : i64}
    : !t, !t, !t, !r, !t, !r, memref<?x?x?x128xf32>, !t, !t
  return
}

// -----

// deterministic: the key block takes its turn at each query block's
// semaphore around dQ's adds, the highest key block first (turn J - j of
// the blocks 0 .. J that reach it), and the CTAs take the key blocks from
// the highest down (j = ceil(Nk / 64) - 1 - x), so a CTA waits only for
// CTAs launched before it; the host launch gives the kernel zeroed turn
// counters (B * Hq * ceil(Nq / 64) of them) and frees them after.
!t = memref<?x?x?x64xf16>
!r = memref<?x?x?xf32>
// CHECK-LABEL: func.func @deterministic
// CHECK: %[[SEM:.*]] = gpu.alloc  (%{{.*}}) : memref<?xi32>
// CHECK: gpu.memset %[[SEM]], %c0_i32 : memref<?xi32>, i32
// CHECK: gpu.launch_func @fa_kernels::@fa2_bwd_sm80_d64_br64_bc64_f16_deterministic
// CHECK: gpu.dealloc %[[SEM]] : memref<?xi32>
// The runtimes' preprocess zeroes the turn counters.
// CHECK: llvm.func @fa2_bwd_sm80_d64_br64_bc64_f16_deterministic_preprocess(
// CHECK-SAME: name = "dq_semaphores"
// CHECK: llvm.func @fa2_bwd_sm80_d64_br64_bc64_f16_deterministic(
// CHECK-SAME: name = "dq_accum"
// CHECK-SAME: name = "dq_semaphores"
// CHECK: %[[X:.*]] = nvvm.read.ptx.sreg.ctaid.x
// CHECK: %[[NK:.*]] = arith.addi %arg13, %c63
// CHECK-NEXT: %c64
// CHECK-NEXT: %[[BLOCKS:.*]] = arith.divui %[[NK]], %c64
// CHECK-NEXT: %c1
// CHECK-NEXT: %[[HIGHEST:.*]] = arith.subi %[[BLOCKS]], %c1
// CHECK-NEXT: %[[J:.*]] = arith.subi %[[HIGHEST]], %[[X]]
// Without a mask every key block reaches every query block: J is the last.
// CHECK: %[[LAST:.*]] = arith.subi %[[BLOCKS]], %c1
// CHECK-NOT: arith.minsi
// CHECK: %[[T:.*]] = arith.subi %[[LAST]], %[[J]]
// CHECK-NEXT: fagpu.semaphore_wait %[[TURN:.*]] equals %[[T]]
// CHECK-NEXT: fagpu.atomic_add_rows
// CHECK-NEXT: fagpu.semaphore_signal %[[TURN]]
func.func @deterministic(%q: !t, %k: !t, %v: !t, %lse: !r, %do: !t, %d: !r,
                         %dq: memref<?x?x?x64xf32>, %dk: !t, %dv: !t) {
  fagpu.attention_backward %q, %k, %v, %lse, %do, %d, %dq outs(%dk, %dv)
      {target = #fagpu.target<sm_80>, scale = 0.125 : f32, deterministic,
       block_r = 64 : i64, block_c = 64 : i64}
    : !t, !t, !t, !r, !t, !r, memref<?x?x?x64xf32>, !t, !t
  return
}

// -----

// deterministic and causal (bottom-right): J = min((q0 + 63 + shift) / 64,
// ceil(Nk / 64) - 1), the last key block that reaches query block q0 / 64.
!t = memref<?x?x?x64xf16>
!r = memref<?x?x?xf32>
// CHECK-LABEL: llvm.func @fa2_bwd_sm80_d64_br64_bc64_f16_causal_bottom_right_deterministic(
// CHECK: %[[X:.*]] = nvvm.read.ptx.sreg.ctaid.x
// CHECK: %[[BLOCKS:.*]] = arith.divui
// CHECK: %[[J:.*]] = arith.subi %{{.*}}, %[[X]]
// CHECK: %[[SHIFT:.*]] = arith.subi %arg13, %arg12
// CHECK: %[[LAST:.*]] = arith.subi %[[BLOCKS]], %c1
// CHECK: %[[END:.*]] = arith.addi %{{.*}}, %[[SHIFT]]
// CHECK-NEXT: %c64
// CHECK-NEXT: %[[REACH:.*]] = arith.divsi %[[END]], %c64
// CHECK-NEXT: %[[LASTSEEN:.*]] = arith.minsi %[[REACH]], %[[LAST]]
// CHECK: %[[T:.*]] = arith.subi %[[LASTSEEN]], %[[J]]
// CHECK-NEXT: fagpu.semaphore_wait %{{.*}} equals %[[T]]
func.func @deterministic_causal(%q: !t, %k: !t, %v: !t, %lse: !r, %do: !t,
                                %d: !r, %dq: memref<?x?x?x64xf32>, %dk: !t,
                                %dv: !t) {
  fagpu.attention_backward %q, %k, %v, %lse, %do, %d, %dq outs(%dk, %dv)
      {target = #fagpu.target<sm_80>, scale = 0.125 : f32, deterministic,
       causal, bottom_right, block_r = 64 : i64, block_c = 64 : i64}
    : !t, !t, !t, !r, !t, !r, memref<?x?x?x64xf32>, !t, !t
  return
}

// -----

// A window (flash-attn's window_size = (100, 37), bottom-right): query i
// at key position i' = i + Nk - Nq + 37 sees keys i' - 100 .. i'; the CTA
// visits the query blocks from floor(max(k0 - (Nk - Nq + 37), 0) / 64) up
// to those of queries k0 + 63 - (Nk - Nq + 37 - 137), and the probabilities
// get both edges.
!t = memref<?x?x?x64xf16>
!r = memref<?x?x?xf32>
// CHECK-LABEL: llvm.func @fa2_bwd_sm80_d64_br64_bc64_f16_causal_w138_bottom_right_do37(
// CHECK: %[[BR:.*]] = arith.subi %arg12, %arg11
// CHECK: %[[BASE:.*]] = arith.addi %[[BR]], %c37
// CHECK: %[[FAR:.*]] = arith.subi %[[BASE]], %c137
// CHECK: arith.subi %{{.*}}, %[[BASE]]
// CHECK: %[[END:.*]] = arith.subi %{{.*}}, %[[FAR]]
// CHECK: arith.maxsi %[[END]], %c0
// CHECK: fagpu.backward_probs {{.*}} causal_shift %[[BASE]] window_shift %[[FAR]]
func.func @window(%q: !t, %k: !t, %v: !t, %lse: !r, %do: !t, %d: !r,
                  %dq: memref<?x?x?x64xf32>, %dk: !t, %dv: !t) {
  fagpu.attention_backward %q, %k, %v, %lse, %do, %d, %dq outs(%dk, %dv)
      {target = #fagpu.target<sm_80>, scale = 0.125 : f32, causal,
       bottom_right, window = 138 : i64, diagonal_offset = 37 : i64,
       block_r = 64 : i64, block_c = 64 : i64}
    : !t, !t, !t, !r, !t, !r, memref<?x?x?x64xf32>, !t, !t
  return
}
