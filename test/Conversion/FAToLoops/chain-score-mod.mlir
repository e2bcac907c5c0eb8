// RUN: fa-opt %s --convert-fa-to-loops | FileCheck %s

// fa.chain_score_mod on the host: at every visible entry (X > -inf) the
// score_mod body is cloned at x = ln(2) X with each op on the score's path
// followed by its tangent (forward-mode differentiation, the score's
// tangent 1), and dS is multiplied by the yielded value's tangent.
// 2 tanh(s / 2): d/ds = (1 - tanh^2(s / 2)) (1 / 2) 2.
// CHECK-LABEL: func.func @tanh_cap
// CHECK: %[[X:.*]] = memref.load %{{.*}}[%[[R:.*]], %[[C:.*]]] : memref<16x32xf32>
// CHECK: %[[VIS:.*]] = arith.cmpf ogt, %[[X]], %{{.*}} : f32
// CHECK: scf.if %[[VIS]] {
// CHECK: %[[S:.*]] = arith.mulf %[[X]], %{{.*}} : f32
// CHECK: %[[ONE:.*]] = arith.constant 1.000000e+00 : f32
// CHECK: %[[TWO:.*]] = arith.constant 2.000000e+00 : f32
// CHECK: %[[A:.*]] = arith.divf %[[S]], %[[TWO]] : f32
// CHECK: %[[DA:.*]] = arith.divf %[[ONE]], %[[TWO]] : f32
// CHECK: %[[T:.*]] = math.tanh %[[A]] : f32
// CHECK: %[[TT:.*]] = arith.mulf %[[T]], %[[T]] : f32
// CHECK: %[[SECH2:.*]] = arith.subf %{{.*}}, %[[TT]] : f32
// CHECK: %[[DT:.*]] = arith.mulf %[[SECH2]], %[[DA]] : f32
// CHECK: %[[DR:.*]] = arith.mulf %[[DT]], %[[TWO]] : f32
// CHECK: %[[DS:.*]] = memref.load %{{.*}}[%[[R]], %[[C]]] : memref<16x32xf32>
// CHECK: %[[NEW:.*]] = arith.mulf %[[DS]], %[[DR]] : f32
// CHECK: memref.store %[[NEW]], %{{.*}}[%[[R]], %[[C]]] : memref<16x32xf32>
func.func @tanh_cap(%x: memref<16x32xf32>, %ds: memref<16x32xf32>, %b: index, %h: index, %q0: index, %k0: index) {
  fa.chain_score_mod %x -> %ds coordinates(%b, %h, %q0, %k0) : memref<16x32xf32> -> memref<16x32xf32>
    score_mod {
    ^bb0(%s: f32, %bb: index, %hh: index, %i: index, %j: index):
      %c = arith.constant 2.0 : f32
      %a = arith.divf %s, %c : f32
      %t = math.tanh %a : f32
      %r = arith.mulf %t, %c : f32
      fa.yield %r : f32
    }
  return
}

// A per-head temperature read from a capture (tensor.extract becomes a
// load of the memref) times a clamp: d/ds max(s, -5) w_h = [s >= -5] w_h.
// CHECK-LABEL: func.func @clamped_temperature
// CHECK: scf.if
// CHECK: %[[S:.*]] = arith.mulf %{{.*}}, %{{.*}} : f32
// CHECK: %[[W:.*]] = memref.load %{{.*}}[%{{.*}}] : memref<8xf32>
// CHECK: %[[FLOOR:.*]] = arith.constant -5.000000e+00 : f32
// CHECK: %[[M:.*]] = arith.maximumf %[[S]], %[[FLOOR]] : f32
// CHECK: %[[GE:.*]] = arith.cmpf oge, %[[S]], %[[FLOOR]] : f32
// CHECK: %[[ZERO:.*]] = arith.constant 0.000000e+00 : f32
// CHECK: %[[DM:.*]] = arith.select %[[GE]], %{{.*}}, %[[ZERO]] : f32
// CHECK: %[[DR:.*]] = arith.mulf %[[DM]], %[[W]] : f32
// CHECK: arith.mulf %{{.*}}, %[[DR]] : f32
func.func @clamped_temperature(%x: memref<16x32xf32>, %ds: memref<16x32xf32>, %w: memref<8xf32>, %i: index) {
  fa.chain_score_mod %x -> %ds coordinates(%i, %i, %i, %i) captures(%w : memref<8xf32>) : memref<16x32xf32> -> memref<16x32xf32>
    score_mod {
    ^bb0(%s: f32, %b: index, %h: index, %q: index, %k: index, %t: tensor<8xf32>):
      %wh = tensor.extract %t[%h] : tensor<8xf32>
      %floor = arith.constant -5.0 : f32
      %m = arith.maximumf %s, %floor : f32
      %r = arith.mulf %m, %wh : f32
      fa.yield %r : f32
    }
  return
}
