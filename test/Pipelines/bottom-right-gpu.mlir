// Bottom-right aligned masks through every GPU pipeline: the tile level
// shifts the score tiles' positions, fa-map-to-gpu carries the alignment to
// fagpu.attention, and each target's kernel moves its mask and K/V range by
// Nk - Nq (signed: rows before every key see none).
// RUN: fa-opt %s --fa-sm90-kernel-pipeline="persistent=off" | FileCheck %s --check-prefix=SM90
// RUN: fa-opt %s --fa-sm80-kernel-pipeline | FileCheck %s --check-prefix=SM80
// RUN: fa-opt %s --fa-sm100-kernel-pipeline | FileCheck %s --check-prefix=SM100
// RUN: fa-opt %s --split-input-file --pass-pipeline="builtin.module(func.func(fa-attention-to-buffers,fagpu-tile{target=sm_90a},fa-lower-fa2),func.func(fa-map-to-gpu{target=sm_90a}))" | FileCheck %s --check-prefix=MAP

func.func @chunked_prefill(%q: memref<?x?x?x128xf16>, %k: memref<?x?x?x128xf16>,
                           %v: memref<?x?x?x128xf16>, %o: memref<?x?x?x128xf16>,
                           %lse: memref<?x?x?xf32>) {
  fa.attention %q, %k, %v outs(%o, %lse : memref<?x?x?x128xf16>, memref<?x?x?xf32>)
      {causal, bottom_right} : memref<?x?x?x128xf16>, memref<?x?x?x128xf16>, memref<?x?x?x128xf16>
  return
}
// MAP: fagpu.attention {{.*}}bottom_right{{.*}}causal
// SM90: llvm.func @fa3_sm90_{{.*}}_causal{{.*}}_bralign(
// SM90: arith.maxsi
// SM90: arith.minsi
// SM80: llvm.func @fa2_sm80_{{.*}}_causal{{.*}}_bralign(
// SM80: arith.maxsi
// SM80: arith.minsi
// SM100: llvm.func @fa4_sm100_{{.*}}_causal{{.*}}_bralign(
// SM100: arith.maxsi
// SM100: arith.minsi
