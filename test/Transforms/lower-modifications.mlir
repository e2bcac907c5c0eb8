// RUN: fa-opt %s --split-input-file --fa-attention-to-buffers | FileCheck %s --check-prefix=BUFFERS
// RUN: fa-opt %s --split-input-file --fa-attention-to-buffers --fa-lower-fa2 --canonicalize --cse | FileCheck %s
// RUN: fa-opt %s --split-input-file --fa-attention-to-buffers --fa-lower-fa2 --convert-fa-to-loops --cse | FileCheck %s --check-prefix=LOOPS

// score_mod / mask_mod through the CPU lowering: the memref form takes the
// captures as buffers and keeps the regions as they are (they read values);
// the loop order copies them into each fa.score_tile with the tile's
// coordinates; the tile's lowering inlines them at every visible score,
// reading the captured memref.

// BUFFERS-LABEL: func.func @alibi
// BUFFERS: %[[SLOPES:.*]] = bufferization.to_buffer %{{.*}} read_only : tensor<4xf32> to memref<4xf32>
// BUFFERS: fa.attention %{{.*}}, %{{.*}}, %{{.*}} captures(%[[SLOPES]] : memref<4xf32>) outs(%{{.*}} : memref<1x4x77x64xf32>)
// BUFFERS: score_mod {
// BUFFERS: ^bb0(%{{.*}}: f32, %{{.*}}: index, %{{.*}}: index, %{{.*}}: index, %{{.*}}: index, %{{.*}}: tensor<4xf32>):

// CHECK-LABEL: func.func @alibi
// CHECK: %[[SLOPES:.*]] = bufferization.to_buffer %{{.*}} read_only : tensor<4xf32> to memref<4xf32>
// CHECK: scf.forall (%[[H:.*]], %[[I:.*]]) in (4, 3)
// CHECK: %[[Q0:.*]] = arith.muli %[[I]], %c32 : index
// CHECK: scf.for %[[J:.*]] =
// CHECK: %[[K0:.*]] = arith.muli %[[J]], %c64 : index
// CHECK: fa.score_tile %{{.*}}, %{{.*}} -> %{{.*}} at [%[[Q0]], %[[K0]]] coordinates(%c0, %[[H]], %[[Q0]], %[[K0]]) captures(%[[SLOPES]] : memref<4xf32>) {causal
// CHECK: score_mod {
// CHECK: tensor.extract
// CHECK: fa.yield

// LOOPS-LABEL: func.func @alibi
// LOOPS-SAME: %[[SARG:[a-z0-9]+]]: tensor<4xf32>
// LOOPS: %[[SLOPES:.*]] = bufferization.to_buffer %[[SARG]]
// LOOPS-NOT: fa.score_tile
// LOOPS-NOT: tensor.extract
// LOOPS: %[[DOT:.*]] = scf.for
// LOOPS: %[[X:.*]] = arith.mulf %[[DOT]], %{{.*}} : f32
// LOOPS: %[[SLOPE:.*]] = memref.load %[[SLOPES]][%{{.*}}] : memref<4xf32>
// LOOPS: %[[Y:.*]] = arith.addf %[[X]], %[[SLOPE]] : f32
// LOOPS: arith.mulf %[[Y]], %{{.*}} : f32
func.func @alibi(%q: tensor<1x4x77x64xf32>, %slopes: tensor<4xf32>) -> tensor<1x4x77x64xf32> {
  %o = fa.attention %q, %q, %q captures(%slopes : tensor<4xf32>) {causal, block_r = 32 : i64, block_c = 64 : i64}
      : tensor<1x4x77x64xf32>, tensor<1x4x77x64xf32>, tensor<1x4x77x64xf32> -> tensor<1x4x77x64xf32>
    score_mod {
    ^bb0(%s: f32, %b: index, %h: index, %i: index, %j: index, %m: tensor<4xf32>):
      %slope = tensor.extract %m[%h] : tensor<4xf32>
      %r = arith.addf %s, %slope : f32
      fa.yield %r : f32
    }
  return %o : tensor<1x4x77x64xf32>
}

// -----

// A mask_mod is evaluated inside the sequences, where the built-in masks
// leave the key visible; false gives -inf.
// LOOPS-LABEL: func.func @documents
// LOOPS-SAME: %[[QD:[a-z0-9]+]]: memref<2x64xi32>, %[[KD:[a-z0-9]+]]: memref<2x64xi32>
// LOOPS: scf.if
// LOOPS: %[[A:.*]] = memref.load %[[QD]][%{{.*}}, %{{.*}}] : memref<2x64xi32>
// LOOPS: %[[C:.*]] = memref.load %[[KD]][%{{.*}}, %{{.*}}] : memref<2x64xi32>
// LOOPS: %[[SAME:.*]] = arith.cmpi eq, %[[A]], %[[C]] : i32
// LOOPS: scf.if %[[SAME]] -> (f32)
// LOOPS: } else {
// LOOPS: scf.yield %cst{{.*}} : f32
func.func @documents(%q: memref<2x4x64x32xf32>, %qd: memref<2x64xi32>, %kd: memref<2x64xi32>, %o: memref<2x4x64x32xf32>) {
  fa.attention %q, %q, %q captures(%qd, %kd : memref<2x64xi32>, memref<2x64xi32>) outs(%o : memref<2x4x64x32xf32>) {block_r = 16 : i64, block_c = 16 : i64}
      : memref<2x4x64x32xf32>, memref<2x4x64x32xf32>, memref<2x4x64x32xf32>
    mask_mod {
    ^bb0(%b: index, %h: index, %i: index, %j: index, %x: tensor<2x64xi32>, %y: tensor<2x64xi32>):
      %a = tensor.extract %x[%b, %i] : tensor<2x64xi32>
      %c = tensor.extract %y[%b, %j] : tensor<2x64xi32>
      %same = arith.cmpi eq, %a, %c : i32
      fa.yield %same : i1
    }
  return
}
