// RUN: fa-opt %s --split-input-file --fagpu-build-kernels | FileCheck %s

// fagpu-build-kernels writes the kernel of each sm_80 fagpu.attention
// (FlashAttention-2 on mma.sync) in fagpu ops; convert-fagpu-to-nvvm lowers
// them (warpgroup-to-nvvm.mlir checks each lowering, fa-to-sm80.mlir the
// NVVM of whole kernels).

// D = 64, B_r = 128: four warps of two m16 row tiles, so every fragment
// has 128 rows. Q and the two-stage K/V ring are row-major tiles filled by
// cp.async: the prologue puts Q and block `first` (stage first mod 2) in
// one group; Q goes to registers once it has landed.
// CHECK-LABEL: func.func @d64
// CHECK: gpu.launch_func @fa_kernels::@fa2_sm80_d64_br128_bc64_f16 {{.*}} threads in (%c128{{.*}}) dynamic_shared_memory_size %c49152_i32
// CHECK: llvm.mlir.global external @fa_smem() {addr_space = 3 : i32, alignment = 16 : i64}
// CHECK: llvm.func @fa2_sm80_d64_br128_bc64_f16(
// A CTA per (query block, head, batch) on x, y, z (fagpu::launchGrid).
// CHECK-SAME: fagpu.grid = {x = "ceil(Nq / block_r)", y = "Hq", z = "B"}
// CHECK: %[[QT:.*]] = fagpu.shared_tile offset 0 : <128x64xf16, row_major>
// CHECK: %[[KV:.*]] = fagpu.create_pipeline {barrier_offset = 0 : i64, tile_offset = 16384 : i64} : <stages = 2, buffers = 2, 64x64xf16, row_major>
// CHECK: fagpu.copy_async %{{.*}}[%{{.*}}] bound %arg5 into %[[QT]] threads 128
// CHECK: %[[K0:.*]] = fagpu.pipeline_tile %[[KV]][%[[S0:.*]]] buffer 0
// CHECK: fagpu.copy_async %{{.*}}[%{{.*}}] bound %arg6 into %[[K0]] threads 128
// CHECK: %[[V0:.*]] = fagpu.pipeline_tile %[[KV]][%[[S0]]] buffer 1
// CHECK: fagpu.copy_async %{{.*}}[%{{.*}}] bound %arg6 into %[[V0]] threads 128
// CHECK-NEXT: fagpu.copy_commit
// CHECK-NEXT: fagpu.copy_wait pending 0
// CHECK-NEXT: %[[QF:.*]] = fagpu.load_fragment %[[QT]] : <128x64xf16, row_major> -> <128x64xf16, operand_a>
// The unmasked blocks: wait for block j (and for every warp to be done
// with the stage the prefetch overwrites), prefetch block j + 1 into the
// other stage, S = Q K^T, the softmax step (without conditional rescaling
// it also returns O *= alpha), O += P V; no mma_wait: mma.sync is
// synchronous.
// CHECK: scf.for {{.*}} -> (!fagpu.fragment<128x64xf32, accumulator>, !fagpu.fragment<128xf32, rows>, !fagpu.fragment<128xf32, rows>)
// CHECK: arith.andi
// CHECK-NEXT: fagpu.copy_wait pending 0
// CHECK: scf.if
// CHECK: fagpu.copy_async
// CHECK: fagpu.copy_async
// CHECK: }
// CHECK-NEXT: fagpu.copy_commit
// CHECK: %[[KT:.*]] = fagpu.pipeline_tile %[[KV]][%{{.*}}] buffer 0
// CHECK: %[[VT:.*]] = fagpu.pipeline_tile %[[KV]][%{{.*}}] buffer 1
// CHECK: %[[S:.*]] = fagpu.mma %[[QF]], %[[KT]] : !fagpu.fragment<128x64xf16, operand_a>, <64x64xf16, row_major> -> !fagpu.fragment<128x64xf32, accumulator>
// CHECK: %[[P:[^,]*]], %{{[^,]*}}, %{{[^,]*}}, %{{[^,]*}}, %[[OR:[^ ]*]] = fagpu.softmax_step %[[S]], %{{.*}}, %{{.*}} rescale(%{{.*}} : !fagpu.fragment<128x64xf32, accumulator> -> !fagpu.fragment<128x64xf32, accumulator>) keys({{.*}} scale %arg9 {tree_row_max} : <128x64xf32, accumulator>, <128xf32, rows> -> <128x64xf16, operand_a>
// CHECK-NEXT: fagpu.mma %[[P]], %[[VT]] acc(%[[OR]]) {mn_major}
// CHECK-NOT: fagpu.mma_wait
// CHECK: } {fa.kv_loop = "unmasked"}
// CHECK: fagpu.softmax_step {{.*}} {masked, tree_row_max}
// CHECK: } {fa.kv_loop = "masked"}
// The epilogue stores rows of matrix 0 from the (batch, head)'s O and LSE
// bases, computed with the K/V bases, one 64-row tile (a warp's 16 rows of
// each m16 tile) at a time: rows row0 and row0 + 16.
// CHECK: %[[LSEROWS:.*]] = fagpu.lse_rows %{{.*}}[%c0_i32{{.*}}] rows %arg5
// CHECK: %[[OROWS:.*]], %[[OSTRIDE:.*]] = fagpu.output_rows %{{.*}}[%c0_i32{{.*}}] rows %arg5 : <1> as f16 {columns = 64 : i64}
// CHECK: %[[O0:.*]] = fagpu.row_tile %[[O:.*]][0] : <128x64xf32, accumulator> -> <64x64xf32, accumulator>
// CHECK: %[[M0:.*]] = fagpu.row_tile %[[M:.*]][0] : <128xf32, rows> -> <64xf32, rows>
// CHECK: %[[L0:.*]] = fagpu.row_tile %[[L:.*]][0] : <128xf32, rows> -> <64xf32, rows>
// CHECK: %[[T0:.*]], %[[F0:.*]] = fagpu.row_totals %[[L0]] : <64xf32, rows>
// CHECK: fagpu.store_rows %[[O0]], %[[F0]] rows(%[[ROW0:.*]], %arg5) to %[[OROWS]] stride %[[OSTRIDE]] : <1> as f16 : <64x64xf32, accumulator>, <64xf32, rows>
// CHECK: fagpu.store_lse %[[M0]], %[[T0]] rows(%[[ROW0]], %arg5) to %[[LSEROWS]] : <1> : <64xf32, rows>
// CHECK: fagpu.row_tile %[[O]][1]
// CHECK: %[[ROW1:.*]] = arith.addi %[[ROW0]], %c16_i32
// CHECK: fagpu.store_rows {{.*}} rows(%[[ROW1]],
// CHECK: fagpu.store_lse {{.*}} rows(%[[ROW1]],
func.func @d64(%q: memref<?x?x?x64xf16>, %k: memref<?x?x?x64xf16>, %v: memref<?x?x?x64xf16>,
    %o: memref<?x?x?x64xf16>, %lse: memref<?x?x?xf32>) {
  fagpu.attention %q, %k, %v outs(%o, %lse) {target = #fagpu.target<sm_80>, scale = 0.125 : f32,
      schedule = #fagpu.schedule<block_r = 128, block_c = 64, consumers = 0, ctas_per_sm = 1, producer_registers = 0, consumer_registers = 0, stages = 2, ping_pong = false, overlap_softmax = false, scheduler = single, q_buffers = 1, epilogue = registers, q_in_registers = true>}
    : memref<?x?x?x64xf16>, memref<?x?x?x64xf16>, memref<?x?x?x64xf16>, memref<?x?x?x64xf16>, memref<?x?x?xf32>
  return
}

// -----

// D = 256, bf16, causal, B_r = 64 (one row tile per warp): 64-row
// fragments; with FA4's conditional rescaling the softmax step returns the
// moved flag and the rescale runs under a warp vote.
// CHECK-LABEL: func.func @d256_causal
// CHECK: llvm.func @fa2_sm80_d256_br64_bc32_bf16_causal_cr8(
// CHECK: fagpu.load_fragment %{{.*}} : <64x256xbf16, row_major> -> <64x256xbf16, operand_a>
// CHECK: fagpu.mma {{.*}} -> !fagpu.fragment<64x32xf32, accumulator>
// CHECK: %[[P:.*]], %{{.*}}, %{{.*}}, %[[ALPHA:.*]], %[[MOVED:.*]] = fagpu.softmax_step {{.*}} {causal, rescale_threshold = 8.000000e+00 : f32, tree_row_max} : <64x32xf32, accumulator>, <64xf32, rows> -> <64x32xbf16, operand_a>, i1
// CHECK-NEXT: fagpu.rescale %{{.*}}, %[[ALPHA]] if %[[MOVED]]
// CHECK: } {fa.kv_loop = "unmasked"}
// CHECK: fagpu.softmax_step {{.*}} {causal, masked, rescale_threshold = 8.000000e+00 : f32, tree_row_max}
func.func @d256_causal(%q: memref<?x?x?x256xbf16>, %k: memref<?x?x?x256xbf16>, %v: memref<?x?x?x256xbf16>,
    %o: memref<?x?x?x256xbf16>, %lse: memref<?x?x?xf32>) {
  fagpu.attention %q, %k, %v outs(%o, %lse) {target = #fagpu.target<sm_80>, scale = 0.0625 : f32, causal, rescale_threshold = 8.0 : f32,
      schedule = #fagpu.schedule<block_r = 64, block_c = 32, consumers = 0, ctas_per_sm = 1, producer_registers = 0, consumer_registers = 0, stages = 2, ping_pong = false, overlap_softmax = false, scheduler = single, q_buffers = 1, epilogue = registers, q_in_registers = true>}
    : memref<?x?x?x256xbf16>, memref<?x?x?x256xbf16>, memref<?x?x?x256xbf16>, memref<?x?x?x256xbf16>, memref<?x?x?xf32>
  return
}

// -----

// Q re-read from shared memory by every S = Q K^T (q_in_registers off):
// the MMA's A is the Q tile; bottom-right masks pass Nk - Nq to the masked
// softmax step.
// CHECK-LABEL: func.func @q_in_smem
// CHECK: llvm.func @fa2_sm80_d128_br128_bc64_f16_causal_bralign(
// CHECK: %[[SHIFT:.*]] = arith.subi %arg6, %arg5 : i32
// CHECK-NOT: fagpu.load_fragment
// CHECK: fagpu.mma %{{.*}}, %{{.*}} : !fagpu.smem_tile<128x128xf16, row_major>, <64x128xf16, row_major> -> !fagpu.fragment<128x64xf32, accumulator>
// CHECK: } {fa.kv_loop = "unmasked"}
// CHECK: fagpu.softmax_step {{.*}} row %{{.*}} shift %[[SHIFT]] scale
func.func @q_in_smem(%q: memref<?x?x?x128xf16>, %k: memref<?x?x?x128xf16>, %v: memref<?x?x?x128xf16>,
    %o: memref<?x?x?x128xf16>, %lse: memref<?x?x?xf32>) {
  fagpu.attention %q, %k, %v outs(%o, %lse) {target = #fagpu.target<sm_80>, scale = 0.088 : f32, causal, bottom_right,
      schedule = #fagpu.schedule<block_r = 128, block_c = 64, consumers = 0, ctas_per_sm = 1, producer_registers = 0, consumer_registers = 0, stages = 2, ping_pong = false, overlap_softmax = false, scheduler = single, q_buffers = 1, epilogue = registers, q_in_registers = false>}
    : memref<?x?x?x128xf16>, memref<?x?x?x128xf16>, memref<?x?x?x128xf16>, memref<?x?x?x128xf16>, memref<?x?x?xf32>
  return
}
