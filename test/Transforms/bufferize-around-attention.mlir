// RUN: fa-opt %s --pass-pipeline="builtin.module(func.func(fa-attention-to-buffers),fa-bufferize-around-attention)" | FileCheck %s

// The code around a memref-form fa.attention is bufferized (function
// boundaries included: the tensors become memrefs, no to_buffer/to_tensor
// is left); the attention and its score_mod region, which reads its capture
// as a tensor of values, stay as they are.
// CHECK-LABEL: func.func @alibi
// CHECK-SAME: (%[[Q:.*]]: memref<1x4x77x64xf32, {{.*}}>, %[[S:.*]]: memref<4xf32, {{.*}}>) -> memref<1x4x77x64xf32>
// CHECK-NOT: bufferization.to_buffer
// CHECK-NOT: bufferization.to_tensor
// CHECK: fa.attention %{{.*}}, %{{.*}}, %{{.*}} captures(%{{.*}} : memref<4xf32>) outs(%[[O:.*]] : memref<1x4x77x64xf32>)
// CHECK: score_mod {
// CHECK: ^bb0(%{{.*}}: f32, %{{.*}}: index, %[[H:.*]]: index, %{{.*}}: index, %{{.*}}: index, %[[M:.*]]: tensor<4xf32>):
// CHECK: tensor.extract %[[M]][%[[H]]] : tensor<4xf32>
// CHECK: return %[[O]] : memref<1x4x77x64xf32>
func.func @alibi(%q: tensor<1x4x77x64xf32>, %slopes: tensor<4xf32>) -> tensor<1x4x77x64xf32> {
  %o = fa.attention %q, %q, %q captures(%slopes : tensor<4xf32>) {causal}
      : tensor<1x4x77x64xf32>, tensor<1x4x77x64xf32>, tensor<1x4x77x64xf32> -> tensor<1x4x77x64xf32>
    score_mod {
    ^bb0(%s: f32, %b: index, %h: index, %i: index, %j: index, %m: tensor<4xf32>):
      %slope = tensor.extract %m[%h] : tensor<4xf32>
      %r = arith.addf %s, %slope : f32
      fa.yield %r : f32
    }
  return %o : tensor<1x4x77x64xf32>
}
