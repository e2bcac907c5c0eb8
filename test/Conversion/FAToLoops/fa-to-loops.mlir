// RUN: fa-opt %s --split-input-file --convert-fa-to-loops --cse | FileCheck %s

// CHECK-LABEL: func @softmax_update
// CHECK-SAME: (%[[S:.*]]: memref<4x8xf32>, %[[M:.*]]: memref<4xf32>, %[[L:.*]]: memref<4xf32>, %[[A:.*]]: memref<4xf32>)
// CHECK: scf.for %[[R:.*]] = %c0 to %c4 step %c1
// m_new = max(m, rowmax(S))
// CHECK:   %[[MOLD:.*]] = memref.load %[[M]][%[[R]]]
// CHECK:   %[[MNEW:.*]] = scf.for %{{.*}} = %c0 to %c8 step %c1 iter_args(%[[MX:.*]] = %[[MOLD]]) -> (f32)
// CHECK:     arith.maximumf %[[MX]], %{{.*}} : f32
// fully masked row: subtract 0 rather than -inf
// CHECK:   %[[EMPTY:.*]] = arith.cmpf oeq, %[[MNEW]], %{{.*}} : f32
// CHECK:   %[[BASE:.*]] = arith.select %[[EMPTY]], %{{.*}}, %[[MNEW]] : f32
// P = exp2(S - base), written over S; rowsum(P)
// CHECK:   %[[SUM:.*]] = scf.for
// CHECK:     %[[D:.*]] = arith.subf %{{.*}}, %[[BASE]] : f32
// CHECK:     %[[P:.*]] = math.exp2 %[[D]] : f32
// CHECK:     memref.store %[[P]], %[[S]]
// alpha = exp2(m - base); l = alpha * l + rowsum(P); m = m_new
// CHECK:   %[[DA:.*]] = arith.subf %[[MOLD]], %[[BASE]] : f32
// CHECK:   %[[ALPHA:.*]] = math.exp2 %[[DA]] : f32
// CHECK:   %[[LOLD:.*]] = memref.load %[[L]][%[[R]]]
// CHECK:   %[[LNEW:.*]] = math.fma %[[ALPHA]], %[[LOLD]], %[[SUM]] : f32
// CHECK:   memref.store %[[LNEW]], %[[L]][%[[R]]]
// CHECK:   memref.store %[[MNEW]], %[[M]][%[[R]]]
// CHECK:   memref.store %[[ALPHA]], %[[A]][%[[R]]]
func.func @softmax_update(%s: memref<4x8xf32>, %m: memref<4xf32>, %l: memref<4xf32>, %a: memref<4xf32>) {
  fa.softmax_update %s, %m, %l -> %a : memref<4x8xf32>, memref<4xf32>, memref<4xf32> -> memref<4xf32>
  return
}

// -----

// CHECK-LABEL: func @score_tile
// CHECK-SAME: (%[[Q:.*]]: memref<?x16xf16>, %[[K:.*]]: memref<?x16xf16>, %[[S:.*]]: memref<4x8xf32>, %[[I0:.*]]: index, %[[J0:.*]]: index)
// CHECK-DAG: %[[ROWS:.*]] = memref.dim %[[Q]], %c0
// CHECK-DAG: %[[COLS:.*]] = memref.dim %[[K]], %c0
// CHECK: scf.for %[[R:.*]] = %c0 to %c4
// CHECK:   scf.for %[[C:.*]] = %c0 to %c8
// inside both tiles ...
// CHECK:     arith.cmpi ult, %[[R]], %[[ROWS]]
// CHECK:     arith.cmpi ult, %[[C]], %[[COLS]]
// ... and causal: key position <= query position
// CHECK:     %[[I:.*]] = arith.addi %[[I0]], %[[R]]
// CHECK:     %[[J:.*]] = arith.addi %[[J0]], %[[C]]
// CHECK:     arith.cmpi ule, %[[J]], %[[I]]
// CHECK:     %[[VAL:.*]] = scf.if %{{.*}} -> (f32)
// f16 inputs widened, dot product accumulated in f32 with fma
// CHECK:       arith.extf %{{.*}} : f16 to f32
// CHECK:       math.fma
// scale * log2(e) = 0.25 * 1.4427 folded into one multiply
// CHECK:       arith.mulf %{{.*}}, %{{.*}} : f32
// CHECK:     } else {
// CHECK:       scf.yield %{{.*}} : f32
// CHECK:     memref.store %[[VAL]], %[[S]][%[[R]], %[[C]]]
func.func @score_tile(%q: memref<?x16xf16>, %k: memref<?x16xf16>, %s: memref<4x8xf32>, %i: index, %j: index) {
  fa.score_tile %q, %k -> %s at [%i, %j] {causal, scale = 0.25 : f32} : memref<?x16xf16>, memref<?x16xf16> -> memref<4x8xf32>
  return
}

// -----

// CHECK-LABEL: func @softcap
// CHECK: math.tanh
// CHECK-LABEL: func @window
// |i - j| < 8 as two unsigned comparisons
// CHECK: arith.cmpi ult
// CHECK: arith.cmpi ult
func.func @softcap(%q: memref<?x16xf32>, %k: memref<?x16xf32>, %s: memref<4x8xf32>, %i: index) {
  fa.score_tile %q, %k -> %s at [%i, %i] {scale = 0.25 : f32, softcap = 20.0 : f32} : memref<?x16xf32>, memref<?x16xf32> -> memref<4x8xf32>
  return
}
func.func @window(%q: memref<?x16xf32>, %k: memref<?x16xf32>, %s: memref<4x8xf32>, %i: index) {
  fa.score_tile %q, %k -> %s at [%i, %i] {scale = 0.25 : f32, window = 8 : i64} : memref<?x16xf32>, memref<?x16xf32> -> memref<4x8xf32>
  return
}

// -----

// CHECK-LABEL: func @accumulate
// CHECK-SAME: (%[[P:.*]]: memref<4x8xf32>, %[[V:.*]]: memref<?x16xbf16>, %[[ACC:.*]]: memref<4x16xf32>, %[[F:.*]]: memref<4xf32>, %[[L:.*]]: memref<4xf32>, %[[LSE:.*]]: memref<?xf32>)
// O += P V over the rows of the (ragged) value tile
// CHECK: %[[NV:.*]] = memref.dim %[[V]], %c0
// CHECK: scf.for
// CHECK:   scf.for
// CHECK:     scf.for %{{.*}} = %c0 to %[[NV]]
// CHECK:       arith.extf %{{.*}} : bf16 to f32
// CHECK:       math.fma
// rescale: O[r, :] *= f[r]
// CHECK: scf.for
// CHECK:   memref.load %[[F]]
// CHECK:   scf.for
// CHECK:     arith.mulf
// normalise: O[r, :] *= (l > 0 ? 1 / l : 0)
// CHECK: scf.for
// CHECK:   %[[LV:.*]] = memref.load %[[L]]
// CHECK:   %[[POS:.*]] = arith.cmpf ogt, %[[LV]]
// CHECK:   %[[INV:.*]] = arith.divf %{{.*}}, %[[LV]]
// CHECK:   arith.select %[[POS]], %[[INV]]
// LSE = ln 2 * (m + log2 l), -inf when l = 0
// CHECK: %[[N:.*]] = memref.dim %[[LSE]], %c0
// CHECK: scf.for %{{.*}} = %c0 to %[[N]]
// CHECK:   math.log2
// CHECK:   arith.mulf %{{.*}}, %{{.*}} : f32
// CHECK:   arith.select
// CHECK: linalg.fill
// CHECK: linalg.fill
// CHECK: linalg.fill
func.func @accumulate(%p: memref<4x8xf32>, %v: memref<?x16xbf16>, %acc: memref<4x16xf32>,
                      %f: memref<4xf32>, %l: memref<4xf32>, %lse: memref<?xf32>) {
  fa.pv_accumulate %p, %v -> %acc : memref<4x8xf32>, memref<?x16xbf16> -> memref<4x16xf32>
  fa.rescale %acc, %f : memref<4x16xf32>, memref<4xf32>
  fa.normalize %acc, %l : memref<4x16xf32>, memref<4xf32>
  fa.logsumexp %f, %l -> %lse : memref<4xf32>, memref<4xf32> -> memref<?xf32>
  fa.init_state %f, %l, %acc : memref<4xf32>, memref<4xf32>, memref<4x16xf32>
  return
}

// -----

// A sink starts the state as a seen key of score s and no value row:
// m = log2(e) s, l = 1; a sink of -inf is none (l = 0).
// CHECK-LABEL: func @init_state_sink
// CHECK-SAME: (%[[M:.*]]: memref<4xf32>, %[[L:.*]]: memref<4xf32>, %[[A:.*]]: memref<4x8xf32>, %[[S:.*]]: f32)
// CHECK: %[[LOG2E:.*]] = arith.constant 1.44269502 : f32
// CHECK: %[[MAX:.*]] = arith.mulf %[[S]], %[[LOG2E]] : f32
// CHECK: %[[NEGINF:.*]] = arith.constant 0xFF800000 : f32
// CHECK: %[[NONE:.*]] = arith.cmpf oeq, %[[S]], %[[NEGINF]] : f32
// CHECK: %[[ZERO:.*]] = arith.constant 0.000000e+00 : f32
// CHECK: %[[ONE:.*]] = arith.constant 1.000000e+00 : f32
// CHECK: %[[SUM:.*]] = arith.select %[[NONE]], %[[ZERO]], %[[ONE]] : f32
// CHECK: linalg.fill ins(%[[MAX]] : f32) outs(%[[M]] : memref<4xf32>)
// CHECK: linalg.fill ins(%[[SUM]] : f32) outs(%[[L]] : memref<4xf32>)
// CHECK: linalg.fill ins(%[[ZERO]] : f32) outs(%[[A]] : memref<4x8xf32>)
func.func @init_state_sink(%m: memref<4xf32>, %l: memref<4xf32>, %acc: memref<4x8xf32>, %s: f32) {
  fa.init_state %m, %l, %acc sink(%s) : memref<4xf32>, memref<4xf32>, memref<4x8xf32>
  return
}
