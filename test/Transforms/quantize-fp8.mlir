// RUN: fa-opt %s --split-input-file --fa-quantize-fp8 --verify-diagnostics | FileCheck %s

// fa-quantize-fp8: Q, K, V quantised per tensor into fresh e4m3 buffers
// with rank-0 descales (dynamic sizes from the inputs), the attention
// rewritten onto them with its attributes and outputs kept, every new
// buffer freed after it.
// CHECK-LABEL: func @attention
// CHECK-SAME: (%[[Q:.*]]: memref<1x2x?x64xf16>, %[[K:.*]]: memref<1x1x?x64xf16>, %[[V:.*]]: memref<1x1x?x64xf16>, %[[O:.*]]: memref<1x2x?x64xf16>)
// CHECK:      %[[NQ:.*]] = memref.dim %[[Q]], %c2
// CHECK:      %[[Q8:.*]] = memref.alloc(%[[NQ]]) : memref<1x2x?x64xf8E4M3FN>
// CHECK:      %[[QD:.*]] = memref.alloc() : memref<f32>
// CHECK:      fa.quantize %[[Q]] -> %[[Q8]], %[[QD]] : memref<1x2x?x64xf16> -> memref<1x2x?x64xf8E4M3FN>, memref<f32>
// CHECK:      fa.quantize %[[K]] -> %[[K8:.*]], %[[KD:.*]] :
// CHECK:      fa.quantize %[[V]] -> %[[V8:.*]], %[[VD:.*]] :
// CHECK:      fa.attention %[[Q8]], %[[K8]], %[[V8]] descale(%[[QD]], %[[KD]], %[[VD]] : memref<f32>, memref<f32>, memref<f32>) outs(%[[O]] : memref<1x2x?x64xf16>) {causal, scale = 1.250000e-01 : f32}
// CHECK-COUNT-6: memref.dealloc
// CHECK-NEXT: return
func.func @attention(%q: memref<1x2x?x64xf16>, %k: memref<1x1x?x64xf16>, %v: memref<1x1x?x64xf16>, %o: memref<1x2x?x64xf16>) {
  fa.attention %q, %k, %v outs(%o : memref<1x2x?x64xf16>) {causal, scale = 0.125 : f32} : memref<1x2x?x64xf16>, memref<1x1x?x64xf16>, memref<1x1x?x64xf16>
  return
}

// -----

// An attention on e4m3 already is left alone.
// CHECK-LABEL: func @already
// CHECK-NOT: fa.quantize
func.func @already(%q: memref<1x1x8x8xf8E4M3FN>, %o: memref<1x1x8x8xf32>, %d: memref<f32>) {
  fa.attention %q, %q, %q descale(%d, %d, %d : memref<f32>, memref<f32>, memref<f32>) outs(%o : memref<1x1x8x8xf32>) : memref<1x1x8x8xf8E4M3FN>, memref<1x1x8x8xf8E4M3FN>, memref<1x1x8x8xf8E4M3FN>
  return
}

// -----

func.func @tensor(%q: tensor<1x1x8x8xf32>) -> tensor<1x1x8x8xf32> {
  // expected-error @+1 {{has tensor operands; fa-quantize-fp8 needs the memref form (run fa-attention-to-buffers first)}}
  %o = fa.attention %q, %q, %q : tensor<1x1x8x8xf32>, tensor<1x1x8x8xf32>, tensor<1x1x8x8xf32> -> tensor<1x1x8x8xf32>
  return %o : tensor<1x1x8x8xf32>
}
