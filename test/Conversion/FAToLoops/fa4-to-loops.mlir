// RUN: fa-opt %s --split-input-file --convert-fa-to-loops --cse | FileCheck %s

// Software exp2 for one score column in 4: 2^floor(y) * p(y - floor(y)).
// CHECK-LABEL: func @poly
// CHECK: %[[P:.*]] = arith.remui %{{.*}}, %c4
// CHECK: %[[EMU:.*]] = arith.cmpi eq, %[[P]], %c0
// clamp to [-126, 127], split into integer and fraction
// CHECK: arith.maximumf %{{.*}}, %cst{{.*}} : f32
// CHECK: arith.minimumf
// the integer part, as f32 and as an exponent-field step (the CPU's floor)
// CHECK: %[[J:.*]] = math.floor
// CHECK: %[[JI:.*]] = arith.fptosi %[[J]] : f32 to i32
// CHECK: %[[SH:.*]] = arith.shli %[[JI]], %c23_i32
// CHECK: %[[F:.*]] = arith.subf %{{.*}}, %[[J]]
// degree 3 in Horner form: three FMAs
// CHECK: math.fma %{{.*}}, %[[F]]
// CHECK: math.fma %{{.*}}, %[[F]]
// CHECK: math.fma %{{.*}}, %[[F]]
// the integer part goes into the exponent bits
// CHECK: arith.bitcast %{{.*}} : f32 to i32
// CHECK: arith.addi %{{.*}}, %[[SH]] : i32
// CHECK: arith.bitcast %{{.*}} : i32 to f32
// y < -126 (masked) gives exactly 0; NaN stays NaN
// CHECK: arith.cmpf olt
// CHECK: arith.cmpf uno
// the other columns use the hardware exp2
// CHECK: arith.select %[[EMU]]
func.func @poly(%s: memref<4x8xf32>, %m: memref<4xf32>, %l: memref<4xf32>, %a: memref<4xf32>) {
  fa.softmax_update %s, %m, %l -> %a {exp2_poly_degree = 3 : i64, exp2_poly_period = 4 : i64}
      : memref<4x8xf32>, memref<4xf32>, memref<4xf32> -> memref<4xf32>
  return
}

// -----

// The conditional step: move = rowmax - base > 8; alpha = 1 when not moved.
// CHECK-LABEL: func @conditional
// CHECK: %[[ANY:.*]] = scf.for %{{.*}} iter_args(%[[ACC:.*]] = %false) -> (i1)
// CHECK:   %[[BASE:.*]] = memref.load %{{.*}}[%{{.*}}] : memref<4xf32>
// CHECK:   %[[MX:.*]] = scf.for
// CHECK:   %[[D:.*]] = arith.subf %[[MX]], %[[BASE]]
// CHECK:   %[[MOVE:.*]] = arith.cmpf ogt, %[[D]], %cst
// CHECK:   arith.select %[[MOVE]], %[[MX]], %[[BASE]]
// CHECK:   math.exp2
// CHECK:   %[[ALPHA:.*]] = arith.select %[[MOVE]], %{{.*}}, %cst{{.*}} : f32
// counters: moved, skipped, max P
// CHECK:   memref.load %[[CNT:.*]][%c0] : memref<3xf64>
// CHECK:   memref.store %{{.*}}, %[[CNT]][%c1]
// CHECK:   memref.store %{{.*}}, %[[CNT]][%c2]
// CHECK:   arith.ori %[[ACC]], %[[MOVE]]
// CHECK: return %[[ANY]]
func.func @conditional(%s: memref<4x8xf32>, %m: memref<4xf32>, %l: memref<4xf32>, %a: memref<4xf32>,
                       %c: memref<3xf64>) -> i1 {
  %moved = fa.conditional_softmax_update %s, %m, %l -> %a counters(%c : memref<3xf64>) {threshold = 8.0 : f32}
      : memref<4x8xf32>, memref<4xf32>, memref<4xf32> -> memref<4xf32>
  return %moved : i1
}
