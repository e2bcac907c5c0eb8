// RUN: fa-opt %s --split-input-file --fa-lower-fa2 --canonicalize --cse | FileCheck %s

// FlashAttention-2: one parallel iteration per (batch, head, Q block); Q_i
// loaded once; m, l, O local; K/V blocks streamed in the inner loop; one
// normalisation after it; O_i and LSE_i written once.

// CHECK-DAG: #[[QLEN:.*]] = affine_map<(d0) -> (-d0 + 100, 32)>
// CHECK-DAG: #[[KLEN:.*]] = affine_map<(d0) -> (-d0 + 200, 64)>
// CHECK-LABEL: func @attention
// CHECK-SAME: (%[[Q:.*]]: memref<2x4x100x64xf16>, %[[K:.*]]: memref<2x2x200x64xf16>, %[[V:.*]]: memref<2x2x200x32xf16>, %[[O:.*]]: memref<2x4x100x32xf16>, %[[LSE:.*]]: memref<2x4x100xf32>)
// No state in memory:
// CHECK-NOT: memref.alloc() : memref<2x4x100xf32>
// CHECK: scf.forall (%[[B:.*]], %[[H:.*]], %[[I:.*]]) in (2, 4, 4)
// CHECK:   %[[KVH:.*]] = arith.divui %[[H]], %c2
// CHECK:   %[[QSTART:.*]] = arith.muli %[[I]], %c32
// CHECK:   %[[ROWS:.*]] = affine.min #[[QLEN]](%[[QSTART]])
// CHECK:   %[[M:.*]] = memref.alloc() : memref<32xf32>
// CHECK:   %[[L:.*]] = memref.alloc() : memref<32xf32>
// CHECK:   %[[ALPHA:.*]] = memref.alloc() : memref<32xf32>
// CHECK:   %[[ACC:.*]] = memref.alloc() : memref<32x32xf32>
// Q_i loaded once, before the K/V loop:
// CHECK:   memref.subview %[[Q]][%[[B]], %[[H]], %[[QSTART]], 0] [1, 1, %[[ROWS]], 64]
// CHECK:   linalg.copy
// CHECK:   fa.init_state %[[M]], %[[L]], %[[ACC]]
// Causal: the K/V loop ends at the block holding the last row's diagonal,
// min(T_c, ceil(min(qStart + B_r, Nq) / B_c)) (mlir::fa::model::kvBlockRange,
// the kernels' rule); later blocks are skipped.
// CHECK:   %[[END0:.*]] = arith.addi %[[QSTART]], %c32
// CHECK:   %[[LAST:.*]] = arith.minui %[[END0]], %c100
// CHECK:   %[[UP:.*]] = arith.addi %[[LAST]], %c63
// CHECK:   %[[NBLK:.*]] = arith.divui %[[UP]], %c64
// CHECK:   %[[END:.*]] = arith.minui %[[NBLK]], %c4
// CHECK:   scf.for %[[J:.*]] = %c0 to %[[END]] step %c1
// CHECK:     %[[KSTART:.*]] = arith.muli %[[J]], %c64
// CHECK:     %[[COLS:.*]] = affine.min #[[KLEN]](%[[KSTART]])
// CHECK:     memref.subview %[[K]][%[[B]], %[[KVH]], %[[KSTART]], 0] [1, 1, %[[COLS]], 64]
// CHECK:     linalg.copy
// CHECK:     memref.subview %[[V]][%[[B]], %[[KVH]], %[[KSTART]], 0] [1, 1, %[[COLS]], 32]
// CHECK:     linalg.copy
// The state never leaves the tiles inside the loop:
// CHECK-NOT: %[[O]]
// CHECK:     fa.score_tile %{{.*}}, %{{.*}} -> %[[S:.*]] at [%[[QSTART]], %[[KSTART]]] {causal, scale = 1.250000e-01 : f32}
// CHECK-NEXT: fa.softmax_update %[[S]], %[[M]], %[[L]] -> %[[ALPHA]]
// CHECK-NEXT: fa.rescale %[[ACC]], %[[ALPHA]]
// CHECK-NEXT: fa.pv_accumulate %[[S]], %{{.*}} -> %[[ACC]]
// CHECK-NOT: fa.normalize
// CHECK:   }
// The one normalisation, then O_i and LSE_i written:
// CHECK:   fa.normalize %[[ACC]], %[[L]]
// CHECK:   %[[OI:.*]] = memref.subview %[[O]][%[[B]], %[[H]], %[[QSTART]], 0] [1, 1, %[[ROWS]], 32]
// CHECK:   linalg.copy ins(%{{.*}} : memref<?x32xf32{{.*}}) outs(%[[OI]] : memref<?x32xf16
// CHECK:   %[[LSEI:.*]] = memref.subview %[[LSE]][%[[B]], %[[H]], %[[QSTART]]] [1, 1, %[[ROWS]]]
// CHECK:   fa.logsumexp %[[M]], %[[L]] -> %[[LSEI]]
// CHECK: } {fa.loop_order = "fa2"}
func.func @attention(%q: memref<2x4x100x64xf16>, %k: memref<2x2x200x64xf16>,
                     %v: memref<2x2x200x32xf16>, %o: memref<2x4x100x32xf16>,
                     %lse: memref<2x4x100xf32>) {
  fa.attention %q, %k, %v outs(%o, %lse : memref<2x4x100x32xf16>, memref<2x4x100xf32>)
      {block_r = 32 : i64, block_c = 64 : i64, scale = 0.125 : f32, causal}
      : memref<2x4x100x64xf16>, memref<2x2x200x64xf16>, memref<2x2x200x32xf16>
  return
}

// -----

// Non-causal: every K/V block is visited; a sliding window (non-causal)
// bounds the loop on both sides.
// CHECK-LABEL: func @full
// CHECK: scf.for %{{.*}} = %c0 to %c4 step %c1
// CHECK-LABEL: func @windowed
// CHECK: %[[FIRSTBLK:.*]] = arith.divui %{{.*}}, %c64
// CHECK: %[[END:.*]] = arith.minui %{{.*}}, %c4
// CHECK: %[[LASTONE:.*]] = arith.subi %[[END]], %c1
// CHECK: %[[BEGIN:.*]] = arith.minui %[[FIRSTBLK]], %[[LASTONE]]
// CHECK: scf.for %{{.*}} = %[[BEGIN]] to %[[END]] step %c1
func.func @full(%q: memref<1x1x256x64xf32>, %k: memref<1x1x256x64xf32>,
                %v: memref<1x1x256x64xf32>, %o: memref<1x1x256x64xf32>) {
  fa.attention %q, %k, %v outs(%o : memref<1x1x256x64xf32>) {block_r = 64 : i64, block_c = 64 : i64}
      : memref<1x1x256x64xf32>, memref<1x1x256x64xf32>, memref<1x1x256x64xf32>
  return
}
func.func @windowed(%q: memref<1x1x256x64xf32>, %k: memref<1x1x256x64xf32>,
                    %v: memref<1x1x256x64xf32>, %o: memref<1x1x256x64xf32>) {
  fa.attention %q, %k, %v outs(%o : memref<1x1x256x64xf32>) {block_r = 64 : i64, block_c = 64 : i64, window = 32 : i64}
      : memref<1x1x256x64xf32>, memref<1x1x256x64xf32>, memref<1x1x256x64xf32>
  return
}
