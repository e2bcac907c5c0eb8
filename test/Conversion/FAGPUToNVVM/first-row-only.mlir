// RUN: fa-opt %s --split-input-file --convert-fagpu-to-nvvm | FileCheck %s

// fagpu.softmax_step with `first_row_only` (a tile of at most 8 real rows,
// the schedule's max_rows = 8): each thread steps its row g alone. A 64-row
// fragment of a 64-key block gives a thread 16 scores a row; both rows take
// 2 ex2 for alpha and 32 for P, the first row alone 1 and 16, and row g + 8
// takes no max, no shuffle and no sum.

!rows = !fagpu.fragment<64xf32, rows>
!p = !fagpu.fragment<64x64xf16, operand_a>
!o = !fagpu.fragment<64x64xf32, accumulator>

// CHECK-LABEL: llvm.func @both_rows
// CHECK-COUNT-34: "ex2.approx.ftz.f32
// CHECK-NOT: "ex2.approx
// CHECK: llvm.return
gpu.module @fa_kernels {
  llvm.func @both_rows(%row: i32, %nk: i32, %scale: f32) {
    %zero = arith.constant 0.0 : f32
    %ninf = arith.constant 0xFF800000 : f32
    %m0 = fagpu.splat %ninf : !rows
    %l0 = fagpu.splat %zero : !rows
    %s = fagpu.splat %scale : !o
    %p, %m, %l, %alpha = fagpu.softmax_step %s, %m0, %l0 keys(%row, %nk) row %row scale %scale : !o, !rows -> !p
    llvm.return
  }
}

// -----

!rows = !fagpu.fragment<64xf32, rows>
!p = !fagpu.fragment<64x64xf16, operand_a>
!o = !fagpu.fragment<64x64xf32, accumulator>

// CHECK-LABEL: llvm.func @first_row
// One row max over 16 scores and its quad's two shuffles, then 17 ex2.
// CHECK-COUNT-2: nvvm.shfl.sync  bfly
// CHECK-NOT: nvvm.shfl.sync
// CHECK-COUNT-17: "ex2.approx.ftz.f32
// CHECK-NOT: "ex2.approx
// CHECK: llvm.return
gpu.module @fa_kernels {
  llvm.func @first_row(%row: i32, %nk: i32, %scale: f32) {
    %zero = arith.constant 0.0 : f32
    %ninf = arith.constant 0xFF800000 : f32
    %m0 = fagpu.splat %ninf : !rows
    %l0 = fagpu.splat %zero : !rows
    %s = fagpu.splat %scale : !o
    %p, %m, %l, %alpha = fagpu.softmax_step %s, %m0, %l0 keys(%row, %nk) row %row scale %scale {first_row_only} : !o, !rows -> !p
    llvm.return
  }
}
