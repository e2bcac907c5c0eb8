// RUN: fa-opt %s --fa-lower-fa2-backward="block-r=32 block-c=64" | FileCheck %s

// FlashAttention-2's backward loop order, step by step: the preprocess
// D = rowsum(dO o O) per query block; then per (batch, K/V head) in
// parallel, the K/V blocks in order, each K_j / V_j on chip with f32 dK_j /
// dV_j; for each of the head's query heads (GQA: 4 / 2) and query blocks,
// the recurrence; dK_j and dV_j written once in their type; dQ, accumulated
// in f32 across the K/V blocks, converted at the end.
// CHECK-LABEL: func.func @backward
// D_i = sum_d dO[i, d] O[i, d] for every (b, h, query block): 77 / 32 -> 3
// CHECK: %[[D:.*]] = memref.alloc(%{{.*}}, %{{.*}}, %{{.*}}) : memref<?x?x?xf32>
// CHECK: scf.forall (%{{.*}}, %{{.*}}, %{{.*}}) in (1, 4, 3)
// CHECK: fa.row_dot %{{.*}}, %{{.*}} -> %{{.*}} : memref<?x64xf16, {{.*}}>, memref<?x64xf16, {{.*}}> -> memref<?xf32, {{.*}}>
// dQ in f32, zeroed (dQ itself is f16).
// CHECK: %[[DQ:.*]] = memref.alloc(%{{.*}}, %{{.*}}, %{{.*}}) : memref<?x?x?x64xf32>
// CHECK: linalg.fill ins(%{{.*}} : f32) outs(%[[DQ]] : memref<?x?x?x64xf32>)
// Per (batch, K/V head): K/V blocks in order (131 / 64 -> 3 blocks).
// CHECK: scf.forall (%{{.*}}, %[[HKV:.*]]) in (1, 2)
// CHECK: scf.for %{{.*}} = %{{.*}} to %c3{{.*}} step
// CHECK: linalg.copy
// CHECK: linalg.copy
// dK_j = dV_j = 0, then the K/V head's query heads (4 / 2 = 2) and blocks.
// CHECK: linalg.fill
// CHECK: linalg.fill
// CHECK: scf.for %[[G:.*]] = %{{.*}} to %c2{{.*}} step
// CHECK: scf.for %{{.*}} = %{{.*}} to %c3{{.*}} step
// S = scale Q_i K_j^T masked (bottom-right: rows shifted by Nk, columns by
// Nq), P recomputed from the LSE, then the five products.
// CHECK: fa.score_tile %{{.*}}, %{{.*}} -> %[[S:.*]] at [%{{.*}}, %{{.*}}] {bottom_right, causal, scale = 1.250000e-01 : f32}
// CHECK: fa.recompute_probs %[[S]], %{{.*}} : memref<32x64xf32>, memref<?xf32, {{.*}}>
// CHECK: fa.grad_values %[[S]], %{{.*}} -> %{{.*}} : memref<32x64xf32>, memref<?x64xf16, {{.*}}> -> memref<64x64xf32>
// CHECK: fa.grad_probs %{{.*}}, %{{.*}} -> %[[DP:.*]] : memref<?x64xf16, {{.*}}>, memref<?x64xf16, {{.*}}> -> memref<32x64xf32>
// CHECK: fa.grad_scores %[[S]], %{{.*}} -> %[[DP]] : memref<32x64xf32>, memref<?xf32, {{.*}}> -> memref<32x64xf32>
// CHECK: fa.grad_keys %[[DP]], %{{.*}} -> %{{.*}} {scale = 1.250000e-01 : f32}
// CHECK: fa.grad_queries %[[DP]], %{{.*}} -> %{{.*}} {scale = 1.250000e-01 : f32} : memref<32x64xf32>, memref<?x64xf16, {{.*}}> -> memref<?x64xf32, {{.*}}>
// dK_j, dV_j in f16, once per K/V block.
// CHECK: linalg.generic {{.*}} ins(%{{.*}} : memref<?x64xf32, {{.*}}>) outs(%{{.*}} : memref<?x64xf16, {{.*}}>)
// CHECK: arith.truncf
// CHECK: linalg.generic
// dQ in f16 at the end.
// CHECK: linalg.generic {{.*}} ins(%[[DQ]] : memref<?x?x?x64xf32>) outs(%{{.*}} : memref<1x4x77x64xf16>)
// CHECK-NOT: fa.attention_backward
func.func @backward(%q: memref<1x4x77x64xf16>, %k: memref<1x2x131x64xf16>, %v: memref<1x2x131x64xf16>,
                    %o: memref<1x4x77x64xf16>, %lse: memref<1x4x77xf32>, %do: memref<1x4x77x64xf16>,
                    %dq: memref<1x4x77x64xf16>, %dk: memref<1x2x131x64xf16>, %dv: memref<1x2x131x64xf16>) {
  fa.attention_backward %q, %k, %v, %o, %lse, %do
      outs(%dq, %dk, %dv : memref<1x4x77x64xf16>, memref<1x2x131x64xf16>, memref<1x2x131x64xf16>)
      {causal, bottom_right}
      : memref<1x4x77x64xf16>, memref<1x2x131x64xf16>, memref<1x2x131x64xf16>, memref<1x4x77x64xf16>, memref<1x4x77xf32>, memref<1x4x77x64xf16>
  return
}

// A softcap keeps the capped scores for its derivative; an f32 dQ is
// accumulated in place (no conversion at the end).
// CHECK-LABEL: func.func @softcap
// CHECK: linalg.fill ins(%{{.*}} : f32) outs(%arg6 : memref<1x2x40x32xf32>)
// CHECK: fa.score_tile {{.*}} softcap = 5.000000e+00
// CHECK: memref.copy %[[SC:.*]], %[[CAPPED:.*]] : memref<32x64xf32> to memref<32x64xf32>
// CHECK: fa.recompute_probs %[[SC]]
// CHECK: fa.grad_scores %[[SC]], %{{.*}}, %[[CAPPED]] -> %{{.*}} {softcap = 5.000000e+00 : f32}
// CHECK-NOT: ins(%{{.*}} : memref<?x?x?x32xf32>)
func.func @softcap(%q: memref<1x2x40x32xf32>, %k: memref<1x2x40x32xf32>, %v: memref<1x2x40x32xf32>,
                   %o: memref<1x2x40x32xf32>, %lse: memref<1x2x40xf32>, %do: memref<1x2x40x32xf32>,
                   %dq: memref<1x2x40x32xf32>, %dk: memref<1x2x40x32xf32>, %dv: memref<1x2x40x32xf32>) {
  fa.attention_backward %q, %k, %v, %o, %lse, %do
      outs(%dq, %dk, %dv : memref<1x2x40x32xf32>, memref<1x2x40x32xf32>, memref<1x2x40x32xf32>)
      {softcap = 5.0 : f32}
      : memref<1x2x40x32xf32>, memref<1x2x40x32xf32>, memref<1x2x40x32xf32>, memref<1x2x40x32xf32>, memref<1x2x40xf32>, memref<1x2x40x32xf32>
  return
}
