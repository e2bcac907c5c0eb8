// RUN: fa-opt %s --fa-lower-fa2-backward="block-r=32 block-c=64" --canonicalize --cse | FileCheck %s

// A varlen batch's backward: dK and dV start at zero (rows outside every
// sequence keep it); the (sequence, K/V head) iterations read the prefix
// sums, and every block range, row offset and the bottom-right mask's shift
// are the sequence's own.
// CHECK-LABEL: func.func @varlen
// CHECK-SAME: (%[[Q:.*]]: memref<1x4x77x64xf32>, %[[K:.*]]: memref<1x2x131x64xf32>, %{{.*}}: memref<1x4x77xf32>, %[[CQ:.*]]: memref<3xi32>, %[[CK:.*]]: memref<3xi32>, %[[DQ:.*]]: memref<1x4x77x64xf32>, %[[DK:.*]]: memref<1x2x131x64xf32>, %[[DV:.*]]: memref<1x2x131x64xf32>)
// CHECK: fa.row_dot
// CHECK: linalg.fill ins(%{{.*}} : f32) outs(%[[DK]] : memref<1x2x131x64xf32>)
// CHECK: linalg.fill ins(%{{.*}} : f32) outs(%[[DV]] : memref<1x2x131x64xf32>)
// CHECK: scf.forall (%[[S:.*]], %[[H:.*]]) in (2, 2)
// CHECK: %[[Q0:.*]] = memref.load %[[CQ]][%[[S]]] : memref<3xi32>
// CHECK: %[[QBASE:.*]] = arith.index_castui %[[Q0]]
// CHECK: %[[K0:.*]] = memref.load %[[CK]][%[[S]]] : memref<3xi32>
// CHECK: %[[KBASE:.*]] = arith.index_castui %[[K0]]
// CHECK: %[[QEND:.*]] = arith.index_castui
// CHECK: %[[NQ:.*]] = arith.subi %[[QEND]], %[[QBASE]] : index
// CHECK: %[[KEND:.*]] = arith.index_castui
// CHECK: %[[NK:.*]] = arith.subi %[[KEND]], %[[KBASE]] : index
// CHECK: %[[QBLOCKS:.*]] = arith.ceildivui %[[NQ]], %c32
// CHECK: %[[KBLOCKS:.*]] = arith.ceildivui %[[NK]], %c64
// CHECK: scf.for %[[J:.*]] = %c0 to %[[KBLOCKS]]
// CHECK: %[[KSTART:.*]] = arith.muli %[[J]], %c64
// CHECK: %[[KROW:.*]] = arith.addi %[[KBASE]], %[[KSTART]]
// CHECK: memref.subview %[[K]][0, %[[H]], %[[KROW]], 0]
// CHECK: scf.for %[[I:.*]] = %c0 to %[[QBLOCKS]]
// CHECK: %[[QSTART:.*]] = arith.muli %[[I]], %c32
// CHECK: %[[QROW:.*]] = arith.addi %[[QBASE]], %[[QSTART]]
// CHECK: memref.subview %[[Q]][0, %{{.*}}, %[[QROW]], 0]
// CHECK: %[[ROWPOS:.*]] = arith.addi %[[QSTART]], %[[NK]]
// CHECK: %[[COLPOS:.*]] = arith.addi %[[KSTART]], %[[NQ]]
// CHECK: fa.score_tile %{{.*}}, %{{.*}} -> %{{.*}} at [%[[ROWPOS]], %[[COLPOS]]] {bottom_right, causal
func.func @varlen(%q: memref<1x4x77x64xf32>, %k: memref<1x2x131x64xf32>, %l: memref<1x4x77xf32>, %cq: memref<3xi32>, %ck: memref<3xi32>,
                  %dq: memref<1x4x77x64xf32>, %dk: memref<1x2x131x64xf32>, %dv: memref<1x2x131x64xf32>) {
  fa.attention_backward %q, %k, %k, %q, %l, %q varlen(%cq, %ck : memref<3xi32>, memref<3xi32>)
      outs(%dq, %dk, %dv : memref<1x4x77x64xf32>, memref<1x2x131x64xf32>, memref<1x2x131x64xf32>) {causal, bottom_right}
      : memref<1x4x77x64xf32>, memref<1x2x131x64xf32>, memref<1x2x131x64xf32>, memref<1x4x77x64xf32>, memref<1x4x77xf32>, memref<1x4x77x64xf32>
  return
}
