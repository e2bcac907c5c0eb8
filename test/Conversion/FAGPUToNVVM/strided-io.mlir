// RUN: fa-opt %s --convert-fagpu-to-nvvm --cse | FileCheck %s

// Strided [B, H, N, D] tensors (the sm_90a kernels' layout): rank-4 tensor
// maps take (column, row, head, batch); O from registers starts row r of
// matrix (batch, head) = (matrix / heads, matrix % heads) at
// batch * stride_b + head * stride_h + r * stride_n.

// CHECK-LABEL: llvm.func @load(
// CHECK: nvvm.cp.async.bulk.tensor.shared.cluster.global %{{.*}}, %arg0, %{{.*}}, box[%c0_i32, %arg1, %arg2, %arg3]

// CHECK-LABEL: llvm.func @registers(
// CHECK: %[[B:.*]] = arith.divui %arg1, %arg3 : i32
// CHECK: %[[BI:.*]] = arith.extui %[[B]] : i32 to i64
// CHECK: %[[H:.*]] = arith.remui %arg1, %arg3 : i32
// CHECK: %[[HI:.*]] = arith.extui %[[H]] : i32 to i64
// CHECK: %[[BOFF:.*]] = arith.muli %[[BI]], %arg4 : i64
// CHECK: %[[HOFF:.*]] = arith.muli %[[HI]], %arg5 : i64
// CHECK: %[[FIRST:.*]] = arith.addi %[[BOFF]], %[[HOFF]] : i64
// CHECK: %[[BASE:.*]] = llvm.getelementptr %arg7[%[[FIRST]]] : (!llvm.ptr<1>, i64) -> !llvm.ptr<1>, f16
// CHECK: scf.if
// CHECK: arith.muli %{{.*}}, %arg6 : i64
// CHECK-COUNT-2: llvm.getelementptr %[[BASE]]
// CHECK-NEXT: llvm.store %{{.*}}, %{{.*}} {alignment = 16 : i64} : vector<4xi32>, !llvm.ptr<1>

// A TMA store through a rank-4 map: the matrix split into (head, batch).
// CHECK-LABEL: llvm.func @tma(
// CHECK: %[[TH:.*]] = arith.remui %arg1, %arg3 : i32
// CHECK: %[[TB:.*]] = arith.divui %arg1, %arg3 : i32
// CHECK: nvvm.cp.async.bulk.tensor.global.shared.cta %arg4, %{{.*}}, box[%c0_i32, %arg0, %[[TH]], %[[TB]]]

// The split-KV merge writes O at the same strided rows (the partials stay
// contiguous).
// CHECK-LABEL: llvm.func @merge(
// CHECK: arith.divui %arg1, %arg5 : i32
// CHECK: arith.remui %arg1, %arg5 : i32
// CHECK: arith.muli %{{.*}}, %arg6 : i64
// CHECK: arith.muli %{{.*}}, %arg7 : i64
// CHECK: arith.muli %{{.*}}, %arg8 : i64
// CHECK: llvm.fptrunc

!kv = !fagpu.pipeline<stages = 2, buffers = 2, 64x64xf16>
!o = !fagpu.fragment<64x64xf32, accumulator>
!rows = !fagpu.fragment<64xf32, rows>
module attributes {gpu.container_module} {
gpu.module @fa_kernels {
  llvm.mlir.global external @fa_smem() {addr_space = 3 : i32, alignment = 1024 : i64} : !llvm.array<0 x i8>
  llvm.func @load(%map: !llvm.ptr, %row: i32, %head: i32, %batch: i32, %stage: i32) {
    %kv = fagpu.create_pipeline {barrier_offset = 65552 : i64, tile_offset = 16384 : i64} : !kv
    fagpu.tma_load %map[%row, %head, %batch] into %kv[%stage] buffer 0 : !llvm.ptr, !kv
    llvm.return
  }
  llvm.func @registers(%row: i32, %matrix: i32, %nq: i32, %heads: i32, %sb: i64, %sh: i64, %sn: i64, %out: !llvm.ptr<1>, %lse: !llvm.ptr<1>) {
    %zero = arith.constant 0.0 : f32
    %o = fagpu.splat %zero : !o
    %m = fagpu.splat %zero : !rows
    %t, %f = fagpu.row_totals %m : !rows
    %orows1, %ostride1 = fagpu.output_rows %out[%matrix] rows %nq : !llvm.ptr<1> as f16 strided(%heads, %sb, %sh, %sn) {columns = 64 : i64}
    fagpu.store_rows %o, %f rows(%row, %nq) to %orows1 stride %ostride1 : !llvm.ptr<1> as f16 : !o, !rows
    %lse_rows1 = fagpu.lse_rows %lse[%matrix] rows %nq : !llvm.ptr<1>
    fagpu.store_lse %m, %t rows(%row, %nq) to %lse_rows1 : !llvm.ptr<1> : !rows
    llvm.return
  }
  llvm.func @tma(%row: i32, %matrix: i32, %nq: i32, %heads: i32, %map: !llvm.ptr, %lse: !llvm.ptr<1>, %sync: i32) {
    %zero = arith.constant 0.0 : f32
    %o = fagpu.splat %zero : !o
    %m = fagpu.splat %zero : !rows
    %st = fagpu.shared_tile offset 49152 : !fagpu.smem_tile<64x64xf16>
    %t, %f = fagpu.row_totals %m : !rows
    fagpu.stage_output %o, %f into %st sync %sync : !o, !rows, !fagpu.smem_tile<64x64xf16>
    fagpu.tma_store_staged %st rows(%row, %matrix) to %map : !llvm.ptr strided(%heads) sync %sync : !fagpu.smem_tile<64x64xf16>
    %lse_rows2 = fagpu.lse_rows %lse[%matrix] rows %nq : !llvm.ptr<1>
    fagpu.store_lse %m, %t rows(%row, %nq) to %lse_rows2 : !llvm.ptr<1> : !rows
    llvm.return
  }
  llvm.func @merge(%row: i32, %matrix: i32, %nq: i32, %splits: i32, %bh: i32, %heads: i32, %sb: i64, %sh: i64, %sn: i64, %p: !llvm.ptr<1>, %out: !llvm.ptr<1>) {
    fagpu.merge_splits rows(%row, %matrix, %nq) of %splits x %bh arrivals %p partials(%p, %p) to %out as f16 strided(%heads, %sb, %sh, %sn) {head_dim = 64 : i64} : !llvm.ptr<1>, !llvm.ptr<1>, !llvm.ptr<1>, !llvm.ptr<1>
    llvm.return
  }
}
}
