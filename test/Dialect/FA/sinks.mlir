// RUN: fa-opt %s | fa-opt | FileCheck %s
// RUN: fa-opt %s --mlir-print-op-generic | fa-opt | FileCheck %s

// Attention sinks at every level print and parse back: the op's sinks
// operand (tensor and memref form), the state a sink starts, the backward's
// sinks and their gradient, and the tile op of that gradient.

// CHECK-LABEL: func.func @attention_tensor
// CHECK: fa.attention %{{.*}}, %{{.*}}, %{{.*}} sinks(%{{.*}} : tensor<8xf32>) {causal}
func.func @attention_tensor(%q: tensor<2x8x128x64xf16>, %k: tensor<2x2x128x64xf16>, %s: tensor<8xf32>) -> (tensor<2x8x128x64xf16>, tensor<2x8x128xf32>) {
  %o, %l = fa.attention %q, %k, %k sinks(%s : tensor<8xf32>) {causal}
      : tensor<2x8x128x64xf16>, tensor<2x2x128x64xf16>, tensor<2x2x128x64xf16>
      -> tensor<2x8x128x64xf16>, tensor<2x8x128xf32>
  return %o, %l : tensor<2x8x128x64xf16>, tensor<2x8x128xf32>
}

// CHECK-LABEL: func.func @attention_cache
// CHECK: fa.attention %{{.*}}, %{{.*}}, %{{.*}} kv_lengths(%{{.*}} : memref<2xi32>) pages(%{{.*}} : memref<2x4xi32>) sinks(%{{.*}} : memref<?xf32>) outs(%{{.*}} : memref<2x8x1x64xf16>)
func.func @attention_cache(%q: memref<2x8x1x64xf16>, %kv: memref<16x2x16x64xf16>, %lens: memref<2xi32>, %table: memref<2x4xi32>, %s: memref<?xf32>, %o: memref<2x8x1x64xf16>) {
  fa.attention %q, %kv, %kv kv_lengths(%lens : memref<2xi32>) pages(%table : memref<2x4xi32>)
      sinks(%s : memref<?xf32>) outs(%o : memref<2x8x1x64xf16>) {causal, bottom_right}
      : memref<2x8x1x64xf16>, memref<16x2x16x64xf16>, memref<16x2x16x64xf16>
  return
}

// CHECK-LABEL: func.func @init_state
// CHECK: fa.init_state %{{.*}}, %{{.*}}, %{{.*}} : memref<16xf32>
// CHECK: fa.init_state %{{.*}}, %{{.*}}, %{{.*}} sink(%{{.*}}) : memref<16xf32>
func.func @init_state(%m: memref<16xf32>, %l: memref<16xf32>, %acc: memref<16x64xf32>, %s: f32) {
  fa.init_state %m, %l, %acc : memref<16xf32>, memref<16xf32>, memref<16x64xf32>
  fa.init_state %m, %l, %acc sink(%s) : memref<16xf32>, memref<16xf32>, memref<16x64xf32>
  return
}

// CHECK-LABEL: func.func @backward
// CHECK: fa.attention_backward %{{.*}}, %{{.*}}, %{{.*}}, %{{.*}}, %{{.*}}, %{{.*}} sinks(%{{.*}} : memref<4xf32>) outs(%{{.*}}, %{{.*}}, %{{.*}}, %{{.*}} : memref<1x4x8x64xf32>, memref<1x2x8x64xf32>, memref<1x2x8x64xf32>, memref<4xf32>)
func.func @backward(%q: memref<1x4x8x64xf32>, %k: memref<1x2x8x64xf32>, %l: memref<1x4x8xf32>, %s: memref<4xf32>, %ds: memref<4xf32>) {
  fa.attention_backward %q, %k, %k, %q, %l, %q sinks(%s : memref<4xf32>)
      outs(%q, %k, %k, %ds : memref<1x4x8x64xf32>, memref<1x2x8x64xf32>, memref<1x2x8x64xf32>, memref<4xf32>)
      : memref<1x4x8x64xf32>, memref<1x2x8x64xf32>, memref<1x2x8x64xf32>, memref<1x4x8x64xf32>, memref<1x4x8xf32>, memref<1x4x8x64xf32>
  return
}

// CHECK-LABEL: func.func @grad_sink
// CHECK: %{{.*}} = fa.grad_sink %{{.*}}, %{{.*}}, %{{.*}} : memref<?xf32>, memref<?xf32>
func.func @grad_sink(%s: f32, %l: memref<?xf32>, %d: memref<?xf32>) -> f32 {
  %part = fa.grad_sink %s, %l, %d : memref<?xf32>, memref<?xf32>
  return %part : f32
}
