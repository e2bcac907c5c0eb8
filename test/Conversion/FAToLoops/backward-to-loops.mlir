// RUN: fa-opt %s --split-input-file --convert-fa-to-loops --canonicalize | FileCheck %s

// Each backward tile op of FABackwardOps.td as its scalar loop nest
// (BackwardToLoops.cpp): f32 arithmetic, f16 operands widened as read.

// D_r = sum_c dO[r, c] O[r, c] over the (dynamic) rows.
// CHECK-LABEL: func.func @row_dot
// CHECK:       %[[ROWS:.*]] = memref.dim %arg0, %c0
// CHECK:       scf.for %[[R:.*]] = %c0 to %[[ROWS]]
// CHECK:         scf.for {{.*}} = %c0 to %c16 {{.*}} iter_args
// CHECK:           math.fma
// CHECK:         memref.store %{{.*}}, %arg2[%[[R]]]
func.func @row_dot(%do: memref<?x16xf16>, %o: memref<?x16xf16>, %d: memref<?xf32>) {
  fa.row_dot %do, %o -> %d : memref<?x16xf16>, memref<?x16xf16> -> memref<?xf32>
  return
}

// -----

// P = exp2(S - log2(e) L) in place; rows past the LSE's and rows whose
// LSE is -inf give 0.
// CHECK-LABEL: func.func @recompute_probs
// CHECK-DAG:   arith.constant 1.44269502 : f32
// CHECK-DAG:   arith.constant 0xFF800000 : f32
// CHECK:       scf.for %[[R:.*]] = %c0 to %c32
// CHECK:         %[[IN:.*]] = arith.cmpi ult, %[[R]]
// CHECK:         arith.cmpf oeq
// CHECK:         scf.for
// CHECK:           math.exp2
// CHECK:           arith.select
// CHECK:           memref.store %{{.*}}, %arg0
func.func @recompute_probs(%s: memref<32x64xf32>, %lse: memref<?xf32>) {
  fa.recompute_probs %s, %lse : memref<32x64xf32>, memref<?xf32>
  return
}

// -----

// dV[c, d] += sum_r P[r, c] dO[r, d]: the sum runs on from dV's value.
// CHECK-LABEL: func.func @grad_values
// CHECK:       %[[ROWS:.*]] = memref.dim %arg1, %c0
// CHECK:       scf.for %[[C:.*]] = %c0 to %c64
// CHECK:         scf.for %[[D:.*]] = %c0 to %c16
// CHECK:           %[[OLD:.*]] = memref.load %arg2[%[[C]], %[[D]]]
// CHECK:           %[[SUM:.*]] = scf.for %[[R:.*]] = %c0 to %[[ROWS]] {{.*}} iter_args(%{{.*}} = %[[OLD]])
// CHECK:             memref.load %arg0[%[[R]], %[[C]]]
// CHECK:             arith.extf
// CHECK:             math.fma
// CHECK:           memref.store %[[SUM]], %arg2[%[[C]], %[[D]]]
func.func @grad_values(%p: memref<32x64xf32>, %do: memref<?x16xf16>, %acc: memref<64x16xf32>) {
  fa.grad_values %p, %do -> %acc : memref<32x64xf32>, memref<?x16xf16> -> memref<64x16xf32>
  return
}

// -----

// dP[r, c] = sum_d dO[r, d] V[c, d] inside the tiles, 0 outside them.
// CHECK-LABEL: func.func @grad_probs
// CHECK:       scf.for {{.*}} = %c0 to %c32
// CHECK:         scf.for {{.*}} = %c0 to %c64
// CHECK:           arith.andi
// CHECK:           scf.if
// CHECK:             scf.for {{.*}} = %c0 to %c16
// CHECK:               math.fma
// CHECK:           } else {
// CHECK:             scf.yield %cst
// CHECK:           memref.store %{{.*}}, %arg2
func.func @grad_probs(%do: memref<?x16xf16>, %v: memref<?x16xf16>, %dp: memref<32x64xf32>) {
  fa.grad_probs %do, %v -> %dp : memref<?x16xf16>, memref<?x16xf16> -> memref<32x64xf32>
  return
}

// -----

// dS = P (dP - D) (1 - (ln2 S / c)^2) over dP, 0 where P = 0 or past the
// rows.
// CHECK-LABEL: func.func @grad_scores
// CHECK:       scf.for
// CHECK:         scf.for
// CHECK:           arith.subf
// CHECK:           arith.mulf
// CHECK:           arith.cmpf oeq
// CHECK:           arith.select
// CHECK:           memref.store %{{.*}}, %arg3
func.func @grad_scores(%p: memref<32x64xf32>, %d: memref<?xf32>, %s: memref<32x64xf32>, %dp: memref<32x64xf32>) {
  fa.grad_scores %p, %d, %s -> %dp {softcap = 30.0 : f32} : memref<32x64xf32>, memref<?xf32>, memref<32x64xf32> -> memref<32x64xf32>
  return
}

// -----

// dK[c, d] += scale sum_r dS[r, c] Q[r, d]: the sum from 0, added scaled.
// CHECK-LABEL: func.func @grad_keys
// CHECK-DAG:   %[[SCALE:.*]] = arith.constant 1.250000e-01 : f32
// CHECK-DAG:   %[[ZERO:.*]] = arith.constant 0.000000e+00 : f32
// CHECK:       %[[ROWS:.*]] = memref.dim %arg1, %c0
// CHECK:       scf.for %[[C:.*]] = %c0 to %c64
// CHECK:         scf.for %[[D:.*]] = %c0 to %c16
// CHECK:           %[[SUM:.*]] = scf.for %[[R:.*]] = %c0 to %[[ROWS]] {{.*}} iter_args(%{{.*}} = %[[ZERO]])
// CHECK:             memref.load %arg0[%[[R]], %[[C]]]
// CHECK:             memref.load %arg1[%[[R]], %[[D]]]
// CHECK:           %[[OLD:.*]] = memref.load %arg2[%[[C]], %[[D]]]
// CHECK:           %[[NEW:.*]] = math.fma %[[SUM]], %[[SCALE]], %[[OLD]]
// CHECK:           memref.store %[[NEW]], %arg2[%[[C]], %[[D]]]
func.func @grad_keys(%ds: memref<32x64xf32>, %q: memref<?x16xf16>, %acc: memref<64x16xf32>) {
  fa.grad_keys %ds, %q -> %acc {scale = 0.125 : f32} : memref<32x64xf32>, memref<?x16xf16> -> memref<64x16xf32>
  return
}

// -----

// dQ[r, d] += scale sum_c dS[r, c] K[c, d], over dQ's (dynamic) rows and
// K's rows.
// CHECK-LABEL: func.func @grad_queries
// CHECK-DAG:   %[[SCALE:.*]] = arith.constant 1.250000e-01 : f32
// CHECK-DAG:   %[[QROWS:.*]] = memref.dim %arg2, %c0
// CHECK-DAG:   %[[KROWS:.*]] = memref.dim %arg1, %c0
// CHECK:       scf.for %[[R:.*]] = %c0 to %[[QROWS]]
// CHECK:         scf.for %[[D:.*]] = %c0 to %c16
// CHECK:           %[[SUM:.*]] = scf.for %[[C:.*]] = %c0 to %[[KROWS]]
// CHECK:             memref.load %arg0[%[[R]], %[[C]]]
// CHECK:             memref.load %arg1[%[[C]], %[[D]]]
// CHECK:           math.fma %[[SUM]], %[[SCALE]]
// CHECK:           memref.store %{{.*}}, %arg2[%[[R]], %[[D]]]
func.func @grad_queries(%ds: memref<32x64xf32>, %k: memref<?x16xf16>, %acc: memref<?x16xf32>) {
  fa.grad_queries %ds, %k -> %acc {scale = 0.125 : f32} : memref<32x64xf32>, memref<?x16xf16> -> memref<?x16xf32>
  return
}

// -----

// A sink's gradient over a query block's rows: -sum_r exp(s - L_r) D_r, 0
// for a sink of -inf.
// CHECK-LABEL: func.func @grad_sink
// CHECK-SAME: (%[[S:.*]]: f32, %[[L:.*]]: memref<?xf32>, %[[D:.*]]: memref<?xf32>)
// CHECK: %[[NONE:.*]] = arith.cmpf oeq, %[[S]], %{{.*}} : f32
// CHECK: %[[SUM:.*]] = scf.for %[[R:.*]] = %{{.*}} iter_args(%[[ACC:.*]] = %{{.*}}) -> (f32)
// CHECK: %[[LR:.*]] = memref.load %[[L]][%[[R]]]
// CHECK: %[[X:.*]] = arith.subf %[[S]], %[[LR]] : f32
// CHECK: %[[P:.*]] = math.exp %[[X]] : f32
// CHECK: %[[DR:.*]] = memref.load %[[D]][%[[R]]]
// CHECK: %[[NEXT:.*]] = math.fma %[[P]], %[[DR]], %[[ACC]] : f32
// CHECK: scf.yield %[[NEXT]]
// CHECK: %[[NEG:.*]] = arith.negf %[[SUM]] : f32
// CHECK: %[[PART:.*]] = arith.select %[[NONE]], %{{.*}}, %[[NEG]] : f32
// CHECK: return %[[PART]]
func.func @grad_sink(%s: f32, %l: memref<?xf32>, %d: memref<?xf32>) -> f32 {
  %part = fa.grad_sink %s, %l, %d : memref<?xf32>, memref<?xf32>
  return %part : f32
}
