// RUN: fa-opt %s --fa-lower-fa1 --canonicalize --cse | FileCheck %s

// FlashAttention-1: K/V blocks outside, Q blocks inside; O, l and m live in
// memory and make a round trip in every inner step; O is normalised in
// every step. 100 queries in blocks of 32 (ragged tail of 4), 200 keys in
// blocks of 64 (tail of 8), 4 query heads over 2 key/value heads.

// CHECK-DAG: #[[KLEN:.*]] = affine_map<(d0) -> (-d0 + 200, 64)>
// CHECK-DAG: #[[QLEN:.*]] = affine_map<(d0) -> (-d0 + 100, 32)>
// CHECK-LABEL: func @attention
// CHECK-SAME: (%[[Q:.*]]: memref<2x4x100x64xf16>, %[[K:.*]]: memref<2x2x200x64xf16>, %[[V:.*]]: memref<2x2x200x32xf16>, %[[O:.*]]: memref<2x4x100x32xf16>, %[[LSE:.*]]: memref<2x4x100xf32>)
// m and l in memory, O = 0, l = 0, m = -inf before the loops:
// CHECK-DAG: %[[NEGINF:.*]] = arith.constant 0xFF800000 : f32
// CHECK: %[[MMEM:.*]] = memref.alloc() : memref<2x4x100xf32>
// CHECK: %[[LMEM:.*]] = memref.alloc() : memref<2x4x100xf32>
// CHECK: linalg.fill ins(%{{.*}} : f16) outs(%[[O]]
// CHECK: linalg.fill ins(%{{.*}} : f32) outs(%[[LMEM]]
// CHECK: linalg.fill ins(%[[NEGINF]] : f32) outs(%[[MMEM]]
// CHECK: scf.forall (%[[B:.*]], %[[H:.*]]) in (2, 4)
// GQA: key/value head = query head / 2.
// CHECK: %[[KVH:.*]] = arith.divui %[[H]], %c2
// Outer loop over the 4 K/V blocks: K_j and V_j loaded once.
// CHECK: scf.for %[[J:.*]] = %c0 to %c4 step %c1
// CHECK:   %[[KSTART:.*]] = arith.muli %[[J]], %c64
// CHECK:   %[[COLS:.*]] = affine.min #[[KLEN]](%[[KSTART]])
// CHECK:   memref.subview %[[K]][%[[B]], %[[KVH]], %[[KSTART]], 0] [1, 1, %[[COLS]], 64]
// CHECK:   linalg.copy
// CHECK:   memref.subview %[[V]][%[[B]], %[[KVH]], %[[KSTART]], 0] [1, 1, %[[COLS]], 32]
// CHECK:   linalg.copy
// Inner loop over the 4 Q blocks: Q_i, O_i, m_i, l_i read from memory ...
// CHECK:   scf.for %[[I:.*]] = %c0 to %c4 step %c1
// CHECK:     %[[QSTART:.*]] = arith.muli %[[I]], %c32
// CHECK:     %[[ROWS:.*]] = affine.min #[[QLEN]](%[[QSTART]])
// CHECK:     %[[OI:.*]] = memref.subview %[[O]][%[[B]], %[[H]], %[[QSTART]], 0] [1, 1, %[[ROWS]], 32]
// CHECK:     %[[MI:.*]] = memref.subview %[[MMEM]][%[[B]], %[[H]], %[[QSTART]]] [1, 1, %[[ROWS]]]
// CHECK:     %[[LI:.*]] = memref.subview %[[LMEM]][%[[B]], %[[H]], %[[QSTART]]] [1, 1, %[[ROWS]]]
// CHECK:     memref.subview %[[Q]][%[[B]], %[[H]], %[[QSTART]], 0]
// CHECK:     linalg.copy
// CHECK:     linalg.copy ins(%[[OI]] : {{.*}}xf16{{.*}}) outs(%{{.*}} : {{.*}}xf32
// CHECK:     linalg.copy ins(%[[MI]]
// CHECK:     linalg.copy ins(%[[LI]]
// ... one online-softmax step, O_i = (alpha * l_i * O_i + P V_j) / l_new ...
// CHECK:     fa.score_tile %{{.*}}, %{{.*}} -> %[[S:.*]] at [%[[QSTART]], %[[KSTART]]] {scale = 1.250000e-01 : f32}
// CHECK:     fa.rescale %[[ACC:.*]], %[[L:.*]] :
// CHECK:     fa.softmax_update %[[S]], %[[M:.*]], %[[L]] -> %[[ALPHA:.*]] :
// CHECK:     fa.rescale %[[ACC]], %[[ALPHA]]
// CHECK:     fa.pv_accumulate %[[S]], %{{.*}} -> %[[ACC]]
// CHECK:     fa.normalize %[[ACC]], %[[L]]
// ... and O_i, m_i, l_i written back.
// CHECK:     linalg.copy ins(%{{.*}}) outs(%[[OI]]
// CHECK:     linalg.copy ins(%{{.*}}) outs(%[[MI]]
// CHECK:     linalg.copy ins(%{{.*}}) outs(%[[LI]]
// CHECK:   }
// CHECK: }
// CHECK: } {fa.loop_order = "fa1"}
// LSE from the final m and l in memory.
// CHECK: scf.forall (%{{.*}}, %{{.*}}, %{{.*}}) in (2, 4, 4)
// CHECK:   fa.logsumexp %{{.*}}, %{{.*}} -> %{{.*}} :
// CHECK: memref.dealloc %[[MMEM]]
// CHECK: memref.dealloc %[[LMEM]]
func.func @attention(%q: memref<2x4x100x64xf16>, %k: memref<2x2x200x64xf16>,
                     %v: memref<2x2x200x32xf16>, %o: memref<2x4x100x32xf16>,
                     %lse: memref<2x4x100xf32>) {
  fa.attention %q, %k, %v outs(%o, %lse : memref<2x4x100x32xf16>, memref<2x4x100xf32>)
      {block_r = 32 : i64, block_c = 64 : i64, scale = 0.125 : f32}
      : memref<2x4x100x64xf16>, memref<2x2x200x64xf16>, memref<2x2x200x32xf16>
  return
}
