// RUN: fa-opt %s --split-input-file --convert-fagpu-to-nvvm | FileCheck %s

// fagpu.softmax_step's row max, per thread: each of its rows has 2 scores in
// each of the 8 n8 tiles of a 64-key block (16 scores). As a chain, each
// max waits for the one before it; with `tree_row_max` (the mma.sync
// kernel's form) the 16 are reduced pairwise, 8 + 4 + 2 + 1 maxima of depth
// 4, before the quad's shuffles.

!rows = !fagpu.fragment<128xf32, rows>
!p = !fagpu.fragment<128x64xf16, operand_a>
!o = !fagpu.fragment<128x64xf32, accumulator>

// CHECK-LABEL: llvm.func @chain
// The running max starts at -inf and takes one pair at a time.
// CHECK: %[[P0:.*]] = arith.maxnumf %{{.*}}, %{{.*}} : f32
// CHECK-NEXT: %[[M0:.*]] = arith.maxnumf %cst{{.*}}, %[[P0]] : f32
// CHECK-NEXT: %[[P1:.*]] = arith.maxnumf %{{.*}}, %{{.*}} : f32
// CHECK-NEXT: arith.maxnumf %[[M0]], %[[P1]] : f32
// CHECK: nvvm.shfl.sync  bfly
gpu.module @fa_kernels {
  llvm.func @chain(%row: i32, %nk: i32, %scale: f32) {
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

!rows = !fagpu.fragment<128xf32, rows>
!p = !fagpu.fragment<128x64xf16, operand_a>
!o = !fagpu.fragment<128x64xf32, accumulator>

// CHECK-LABEL: llvm.func @tree
// Eight pairs, then four, two and one maxima of them; no -inf start.
// CHECK-NOT: arith.maxnumf %cst
// CHECK-COUNT-8: arith.maxnumf %{{.*}}, %{{.*}} : f32
// CHECK-NEXT: %[[Q0:.*]] = arith.maxnumf %{{.*}}, %{{.*}} : f32
// CHECK-NEXT: %[[Q1:.*]] = arith.maxnumf %{{.*}}, %{{.*}} : f32
// CHECK-NEXT: %[[Q2:.*]] = arith.maxnumf %{{.*}}, %{{.*}} : f32
// CHECK-NEXT: %[[Q3:.*]] = arith.maxnumf %{{.*}}, %{{.*}} : f32
// CHECK-NEXT: %[[H0:.*]] = arith.maxnumf %[[Q0]], %[[Q1]] : f32
// CHECK-NEXT: %[[H1:.*]] = arith.maxnumf %[[Q2]], %[[Q3]] : f32
// CHECK-NEXT: %[[MX:.*]] = arith.maxnumf %[[H0]], %[[H1]] : f32
// CHECK: nvvm.shfl.sync  bfly %{{.*}}, %[[MX]], %c1_i32
gpu.module @fa_kernels {
  llvm.func @tree(%row: i32, %nk: i32, %scale: f32) {
    %zero = arith.constant 0.0 : f32
    %ninf = arith.constant 0xFF800000 : f32
    %m0 = fagpu.splat %ninf : !rows
    %l0 = fagpu.splat %zero : !rows
    %s = fagpu.splat %scale : !o
    %p, %m, %l, %alpha = fagpu.softmax_step %s, %m0, %l0 keys(%row, %nk) row %row scale %scale {tree_row_max} : !o, !rows -> !p
    llvm.return
  }
}
