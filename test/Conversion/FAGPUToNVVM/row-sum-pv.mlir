// RUN: fa-opt %s --split-input-file --convert-fagpu-to-nvvm | FileCheck %s

// The e4m3 row sums in the P V MMA (fagpu-row-sum-mma{mode=pv}), op by op:
// each stage's V^T tile is [D + 8, B_c] = [136, 224], its column blocks of
// 32 keys 136 * 32 = 4352 bytes apart; the TMA fills rows 0 .. 127 of each
// block, the CTA writes rows 128 .. 135 once (row 128 ones), and O's
// m64n136 accumulator carries P's row sums in column 128.

!kv = !fagpu.pipeline<stages = 2, buffers = 2, 224x128xf8E4M3FN, 136x224xf8E4M3FN, swizzle = 32>
!vt = !fagpu.smem_tile<136x224xf8E4M3FN, swizzle = 32>
!under = !fagpu.smem_tile<8x224xf8E4M3FN, block_rows = 136, swizzle = 32>

// Stage 1's V^T tile starts after stage 0's K (28672 bytes) and V^T (30464
// bytes), rounded up to 1 KiB: 59392. Its boxes land 4352 bytes apart, and
// the full barrier expects the 128 rows they carry (28672 bytes), not the
// tile's 136.
// CHECK-LABEL: llvm.func @value_tile(
// CHECK-SAME: %[[STAGE:arg1]]: i32
// CHECK: nvvm.mbarrier.arrive.expect_tx %{{.*}}, %c28672_i32
// CHECK: arith.muli %[[STAGE]], %c59392_i32
// CHECK: arith.addi %{{.*}}, %c0_i32
// CHECK: nvvm.cp.async.bulk.tensor.shared.cluster.global
// CHECK: arith.addi %{{.*}}, %c4352_i32
// CHECK: nvvm.cp.async.bulk.tensor.shared.cluster.global
// CHECK: arith.addi %{{.*}}, %c26112_i32
// CHECK: nvvm.cp.async.bulk.tensor.shared.cluster.global
// CHECK-NOT: nvvm.cp.async.bulk.tensor
gpu.module @fa_kernels {
  llvm.mlir.global external @fa_smem() {addr_space = 3 : i32, alignment = 1024 : i64} : !llvm.array<0 x i8>
  llvm.func @value_tile(%vmap: !llvm.ptr, %stage: i32, %d: i32, %head: i32, %batch: i32, %key: i32) {
    %kv = fagpu.create_pipeline {barrier_offset = 131072 : i64, tile_offset = 0 : i64} : !kv
    fagpu.tma_load %vmap[%d, %head, %batch] column %key into %kv[%stage] buffer 1 {rows = 128 : i64} : !llvm.ptr, !kv
    llvm.return
  }
}

// -----

!kv = !fagpu.pipeline<stages = 2, buffers = 2, 224x128xf8E4M3FN, 136x224xf8E4M3FN, swizzle = 32>
!vt = !fagpu.smem_tile<136x224xf8E4M3FN, swizzle = 32>
!under = !fagpu.smem_tile<8x224xf8E4M3FN, block_rows = 136, swizzle = 32>

// Rows 128 .. 135 of a stage's V^T tile (16 groups of 8 rows, 4096 bytes
// into each column block): the whole CTA writes its 7 x 16 pieces, thread
// tid.x pieces tid.x, tid.x + ntid.x, ..., each block 4352 bytes on, the
// first two pieces of a block (row 128) e4m3 ones; fenced for the async
// proxy, with no named barrier (init_pipelines' CTA barrier follows).
// CHECK-LABEL: llvm.func @ones_under_values
// CHECK: arith.muli %c16_i32, %c256_i32
// CHECK: %[[TID:.*]] = nvvm.read.ptx.sreg.tid.x
// CHECK: %[[THREADS:.*]] = nvvm.read.ptx.sreg.ntid.x
// CHECK: scf.for %[[PIECE:.*]] = %[[TID]] to %c112_i32 step %[[THREADS]]
// CHECK: %[[CHUNK:.*]] = arith.remui %[[PIECE]], %c16_i32
// CHECK: %[[BLOCK:.*]] = arith.divui %[[PIECE]], %c16_i32
// CHECK: arith.muli %[[BLOCK]], %c4352_i32
// CHECK: %[[ONES:.*]] = arith.cmpi ult, %[[CHUNK]], %c2_i32
// CHECK: arith.select %[[ONES]], %c943208504_i32, %c0_i32
// CHECK: llvm.store {{.*}} {alignment = 16 : i64} : vector<4xi32>, !llvm.ptr<3>
// CHECK: nvvm.fence.proxy {kind = #nvvm.proxy_kind<async.shared>, space = #nvvm.shared_space<cta>}
// CHECK-NOT: nvvm.barrier
// CHECK: nvvm.barrier0
gpu.module @fa_kernels {
  llvm.mlir.global external @fa_smem() {addr_space = 3 : i32, alignment = 1024 : i64} : !llvm.array<0 x i8>
  llvm.func @ones_under_values(%stage: i32) {
    %c16 = arith.constant 16 : i32
    %kv = fagpu.create_pipeline {barrier_offset = 131072 : i64, tile_offset = 0 : i64} : !kv
    %vt = fagpu.pipeline_tile %kv[%stage] buffer 1 : !kv -> !vt
    %under = fagpu.tile_rows %vt[%c16] : !vt -> !under
    fagpu.init_row_sum_tile %under : !under
    fagpu.init_pipelines %kv consumer_arrivals 8 : !kv
    llvm.return
  }
}

// -----

!p = !fagpu.fragment<64x224xf8E4M3FN, operand_a>
!acc = !fagpu.fragment<64x136xf32, accumulator>
!vt = !fagpu.smem_tile<136x224xf8E4M3FN, swizzle = 32>

// O += P V^T with the ones row: seven m64n136k32 (68 accumulator
// registers), k-step kk's descriptor 4352 * kk bytes into the tile.
// CHECK-LABEL: llvm.func @values_and_sums
// CHECK: nvvm.wgmma.fence.aligned
// CHECK: wgmma.mma_async.sync.aligned.m64n136k32.f32.e4m3.e4m3 {$0, {{.*}}, $67}, {$68, $69, $70, $71}, $72, p, 1, 1;
// CHECK: arith.addi %{{.*}}, %c4352_i32
// CHECK: wgmma.mma_async.sync.aligned.m64n136k32
// CHECK: arith.addi %{{.*}}, %c26112_i32
// CHECK: wgmma.mma_async.sync.aligned.m64n136k32
// CHECK-NOT: wgmma.mma_async.sync
// CHECK: nvvm.wgmma.commit.group.sync.aligned
gpu.module @fa_kernels {
  llvm.mlir.global external @fa_smem() {addr_space = 3 : i32, alignment = 1024 : i64} : !llvm.array<0 x i8>
  llvm.func @values_and_sums(%scale: f32) {
    %zero = arith.constant 0.0 : f32
    %o = fagpu.splat %zero : !acc
    %p8 = fagpu.splat %zero : !fagpu.fragment<64x224xf32, accumulator>
    %vt = fagpu.shared_tile offset 0 : !vt
    %c = arith.constant 0 : i32
    %pf = builtin.unrealized_conversion_cast %c, %c, %c, %c, %c, %c, %c, %c, %c, %c, %c, %c, %c, %c, %c, %c, %c, %c, %c, %c, %c, %c, %c, %c, %c, %c, %c, %c : i32, i32, i32, i32, i32, i32, i32, i32, i32, i32, i32, i32, i32, i32, i32, i32, i32, i32, i32, i32, i32, i32, i32, i32, i32, i32, i32, i32 to !p
    %r = fagpu.mma %pf, %vt acc(%o) : !p, !vt, !acc -> !acc
    fagpu.mma_wait pending 0
    %pinned = fagpu.pin %r : !acc
    llvm.return
  }
}

// -----

!acc = !fagpu.fragment<64x136xf32, accumulator>

// O is registers 0 .. 63 of the m64n136 accumulator, the row sums' n8 tile
// registers 64 .. 67; row_partials of those is l (64 + 65 for row g,
// 66 + 67 for row g + 8).
// CHECK-LABEL: llvm.func @split
// CHECK: arith.addf %arg64, %arg65 : f32
// CHECK: arith.addf %arg66, %arg67 : f32
// O's last n8 tile (columns 120 .. 127) is registers 60 .. 63.
// CHECK: arith.addf %arg60, %arg61 : f32
// CHECK: arith.addf %arg62, %arg63 : f32
gpu.module @fa_kernels {
  llvm.func @split(%r0: f32, %r1: f32, %r2: f32, %r3: f32, %r4: f32, %r5: f32, %r6: f32, %r7: f32, %r8: f32, %r9: f32, %r10: f32, %r11: f32, %r12: f32, %r13: f32, %r14: f32, %r15: f32, %r16: f32, %r17: f32, %r18: f32, %r19: f32, %r20: f32, %r21: f32, %r22: f32, %r23: f32, %r24: f32, %r25: f32, %r26: f32, %r27: f32, %r28: f32, %r29: f32, %r30: f32, %r31: f32, %r32: f32, %r33: f32, %r34: f32, %r35: f32, %r36: f32, %r37: f32, %r38: f32, %r39: f32, %r40: f32, %r41: f32, %r42: f32, %r43: f32, %r44: f32, %r45: f32, %r46: f32, %r47: f32, %r48: f32, %r49: f32, %r50: f32, %r51: f32, %r52: f32, %r53: f32, %r54: f32, %r55: f32, %r56: f32, %r57: f32, %r58: f32, %r59: f32, %r60: f32, %r61: f32, %r62: f32, %r63: f32, %r64: f32, %r65: f32, %r66: f32, %r67: f32) {
    %acc = builtin.unrealized_conversion_cast %r0, %r1, %r2, %r3, %r4, %r5, %r6, %r7, %r8, %r9, %r10, %r11, %r12, %r13, %r14, %r15, %r16, %r17, %r18, %r19, %r20, %r21, %r22, %r23, %r24, %r25, %r26, %r27, %r28, %r29, %r30, %r31, %r32, %r33, %r34, %r35, %r36, %r37, %r38, %r39, %r40, %r41, %r42, %r43, %r44, %r45, %r46, %r47, %r48, %r49, %r50, %r51, %r52, %r53, %r54, %r55, %r56, %r57, %r58, %r59, %r60, %r61, %r62, %r63, %r64, %r65, %r66, %r67 : f32, f32, f32, f32, f32, f32, f32, f32, f32, f32, f32, f32, f32, f32, f32, f32, f32, f32, f32, f32, f32, f32, f32, f32, f32, f32, f32, f32, f32, f32, f32, f32, f32, f32, f32, f32, f32, f32, f32, f32, f32, f32, f32, f32, f32, f32, f32, f32, f32, f32, f32, f32, f32, f32, f32, f32, f32, f32, f32, f32, f32, f32, f32, f32, f32, f32, f32, f32 to !acc
    %o = fagpu.fragment_columns %acc[0] : !acc -> !fagpu.fragment<64x128xf32, accumulator>
    %sums = fagpu.fragment_columns %acc[128] : !acc -> !fagpu.fragment<64x8xf32, accumulator>
    %l = fagpu.row_partials %sums : !fagpu.fragment<64x8xf32, accumulator> -> !fagpu.fragment<64xf32, rows>
    %last = fagpu.fragment_columns %o[120] : !fagpu.fragment<64x128xf32, accumulator> -> !fagpu.fragment<64x8xf32, accumulator>
    %lastl = fagpu.row_partials %last : !fagpu.fragment<64x8xf32, accumulator> -> !fagpu.fragment<64xf32, rows>
    llvm.return
  }
}
