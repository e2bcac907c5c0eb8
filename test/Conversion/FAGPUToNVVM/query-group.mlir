// RUN: fa-opt %s --split-input-file --convert-fagpu-to-nvvm | FileCheck %s

// fagpu.softmax_step with `query_group = G` (pack-GQA beyond one query): the
// rows are G a query, so the mask compares keys with the thread's two rows'
// queries, row / G (a shift: G is a power of two), moved by the shift
// (Nk - Nq of the queries). Without it the rows themselves are compared.

!rows = !fagpu.fragment<128xf32, rows>
!p = !fagpu.fragment<128x64xf16, operand_a>
!o = !fagpu.fragment<128x64xf32, accumulator>

// CHECK-LABEL: llvm.func @packed
// CHECK-SAME: (%[[ROW:[^:]*]]: i32, %{{[^:]*}}: i32, %{{[^:]*}}: f32, %[[SHIFT:[^:]*]]: i32)
// CHECK: %[[ROW1:.*]] = arith.addi %[[ROW]], %c8_i32 : i32
// CHECK: %[[C2:.*]] = arith.constant 2 : i32
// CHECK: %[[Q0:.*]] = arith.shrui %[[ROW]], %[[C2]] : i32
// CHECK: %[[Q1:.*]] = arith.shrui %[[ROW1]], %[[C2]] : i32
// CHECK: arith.addi %[[Q0]], %[[SHIFT]] : i32
// CHECK: arith.addi %[[Q1]], %[[SHIFT]] : i32
gpu.module @fa_kernels {
  llvm.func @packed(%row: i32, %nk: i32, %scale: f32, %shift: i32) {
    %zero = arith.constant 0.0 : f32
    %ninf = arith.constant 0xFF800000 : f32
    %m0 = fagpu.splat %ninf : !rows
    %l0 = fagpu.splat %zero : !rows
    %s = fagpu.splat %scale : !o
    %p, %m, %l, %alpha = fagpu.softmax_step %s, %m0, %l0 keys(%row, %nk) row %row shift %shift scale %scale {masked, causal, query_group = 4 : i64} : !o, !rows -> !p
    llvm.return
  }
}

// -----

!rows = !fagpu.fragment<128xf32, rows>
!p = !fagpu.fragment<128x64xf16, operand_a>
!o = !fagpu.fragment<128x64xf32, accumulator>

// CHECK-LABEL: llvm.func @unpacked
// CHECK-NOT: arith.shrui
// CHECK: llvm.return
gpu.module @fa_kernels {
  llvm.func @unpacked(%row: i32, %nk: i32, %scale: f32, %shift: i32) {
    %zero = arith.constant 0.0 : f32
    %ninf = arith.constant 0xFF800000 : f32
    %m0 = fagpu.splat %ninf : !rows
    %l0 = fagpu.splat %zero : !rows
    %s = fagpu.splat %scale : !o
    %p, %m, %l, %alpha = fagpu.softmax_step %s, %m0, %l0 keys(%row, %nk) row %row shift %shift scale %scale {masked, causal} : !o, !rows -> !p
    llvm.return
  }
}
