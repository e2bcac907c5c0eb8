// A diagonal offset (flash-attention's window_size = (left, right) is
// causal, window = left + right + 1, diagonal_offset = right; here (16, 5))
// through every GPU pipeline: the tile level adds the offset to the score
// tiles' row positions, fa-map-to-gpu carries it to fagpu.attention, and
// each target's kernel adds it to the diagonal shift of its masks and K/V
// range (top-left: the shift is the offset alone; bottom-right: Nk - Nq
// plus it).
// RUN: fa-opt %s --split-input-file --fa-sm90-kernel-pipeline="persistent=off" | FileCheck %s --check-prefix=SM90
// RUN: fa-opt %s --split-input-file --fa-sm80-kernel-pipeline | FileCheck %s --check-prefix=SM80
// RUN: fa-opt %s --split-input-file --fa-sm100-kernel-pipeline | FileCheck %s --check-prefix=SM100
// RUN: fa-opt %s --split-input-file --pass-pipeline="builtin.module(func.func(fa-attention-to-buffers,fagpu-tile{target=sm_90a},fa-lower-fa2))" | FileCheck %s --check-prefix=TILE
// RUN: fa-opt %s --split-input-file --pass-pipeline="builtin.module(func.func(fa-attention-to-buffers,fagpu-tile{target=sm_90a},fa-lower-fa2),func.func(fa-map-to-gpu{target=sm_90a}))" | FileCheck %s --check-prefix=MAP

func.func @band(%q: memref<?x?x?x128xf16>, %k: memref<?x?x?x128xf16>,
                %v: memref<?x?x?x128xf16>, %o: memref<?x?x?x128xf16>,
                %lse: memref<?x?x?xf32>) {
  fa.attention %q, %k, %v outs(%o, %lse : memref<?x?x?x128xf16>, memref<?x?x?xf32>)
      {causal, window = 22 : i64, diagonal_offset = 5 : i64} : memref<?x?x?x128xf16>, memref<?x?x?x128xf16>, memref<?x?x?x128xf16>
  return
}
// TILE-LABEL: func.func @band
// The K/V block range from the last and first rows' shifted positions
// (mlir::fa::model::kvBlockRange):
// TILE: arith.addi %{{.*}}, %c5 : index
// TILE: %[[FIRST:.*]] = arith.addi %{{.*}}, %c5 : index
// TILE-NEXT: arith.maxui %[[FIRST]], %c21 : index
// then each score tile's rows:
// TILE: %[[ROW:.*]] = arith.addi %{{.*}}, %c5{{.*}} : index
// TILE-NEXT: fa.score_tile {{.*}} at [%[[ROW]], %{{.*}}] {causal, diagonal_offset = 5 : i64, {{.*}}window = 22 : i64}
// MAP: fagpu.attention {{.*}}causal, diagonal_offset = 5 : i64{{.*}}window = 22 : i64
// SM90: llvm.func @fa3_sm90_{{.*}}_causal{{.*}}_w22_do5(
// SM90: arith.addi %{{.*}}, %c5_i32{{.*}} : i32
// SM80: llvm.func @fa2_sm80_{{.*}}_causal{{.*}}_w22_do5(
// SM80: arith.addi %{{.*}}, %c5_i32{{.*}} : i32
// SM100: llvm.func @fa4_sm100_{{.*}}_causal{{.*}}_w22_do5(
// SM100: arith.addi %{{.*}}, %c5_i32{{.*}} : i32

// -----

func.func @band_bottom_right(%q: memref<?x?x?x128xf16>, %k: memref<?x?x?x128xf16>,
                             %v: memref<?x?x?x128xf16>, %o: memref<?x?x?x128xf16>) {
  fa.attention %q, %k, %v outs(%o : memref<?x?x?x128xf16>)
      {causal, bottom_right, diagonal_offset = 7 : i64} : memref<?x?x?x128xf16>, memref<?x?x?x128xf16>, memref<?x?x?x128xf16>
  return
}
// TILE-LABEL: func.func @band_bottom_right
// TILE: fa.score_tile {{.*}} {bottom_right, causal, diagonal_offset = 7 : i64
// MAP: fagpu.attention {{.*}}bottom_right, causal, diagonal_offset = 7 : i64
// SM90: llvm.func @fa3_sm90_{{.*}}_causal{{.*}}_bralign_do7_nolse(
// SM90: arith.addi %{{.*}}, %c7_i32{{.*}} : i32
// SM80: llvm.func @fa2_sm80_{{.*}}_causal{{.*}}_bralign_do7_nolse(
// SM100: llvm.func @fa4_sm100_{{.*}}_causal{{.*}}_bralign_do7_nolse(
