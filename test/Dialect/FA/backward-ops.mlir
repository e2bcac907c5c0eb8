// RUN: fa-opt %s | fa-opt | FileCheck %s
// RUN: fa-opt %s --mlir-print-op-generic | fa-opt | FileCheck %s

// The backward's ops print and parse back.
// CHECK-LABEL: func.func @ops
// CHECK: fa.attention_backward %{{.*}}, %{{.*}}, %{{.*}}, %{{.*}}, %{{.*}}, %{{.*}} outs(%{{.*}}, %{{.*}}, %{{.*}} : memref<1x8x77x64xf32>, memref<1x2x131x64xf32>, memref<1x2x131x64xf32>) {causal, softcap = 3.000000e+01 : f32}
// CHECK: fa.row_dot
// CHECK: fa.recompute_probs
// CHECK: fa.grad_values
// CHECK: fa.grad_probs
// CHECK: fa.grad_scores %{{.*}}, %{{.*}}, %{{.*}} -> %{{.*}} {softcap = 3.000000e+01 : f32}
// CHECK: fa.grad_keys {{.*}} {scale = 1.250000e-01 : f32}
// CHECK: fa.grad_queries {{.*}} {scale = 1.250000e-01 : f32}
func.func @ops(%q: memref<1x8x77x64xf32>, %k: memref<1x2x131x64xf32>, %v: memref<1x2x131x64xf32>,
               %o: memref<1x8x77x64xf32>, %lse: memref<1x8x77xf32>, %do: memref<1x8x77x64xf32>,
               %dq: memref<1x8x77x64xf32>, %dk: memref<1x2x131x64xf32>, %dv: memref<1x2x131x64xf32>,
               %rows: memref<?x64xf16>, %d: memref<?xf32>, %s: memref<32x64xf32>,
               %p: memref<32x64xf32>, %acc: memref<64x64xf32>, %qacc: memref<?x64xf32>) {
  fa.attention_backward %q, %k, %v, %o, %lse, %do
      outs(%dq, %dk, %dv : memref<1x8x77x64xf32>, memref<1x2x131x64xf32>, memref<1x2x131x64xf32>)
      {causal, softcap = 30.0 : f32}
      : memref<1x8x77x64xf32>, memref<1x2x131x64xf32>, memref<1x2x131x64xf32>, memref<1x8x77x64xf32>, memref<1x8x77xf32>, memref<1x8x77x64xf32>
  fa.row_dot %rows, %rows -> %d : memref<?x64xf16>, memref<?x64xf16> -> memref<?xf32>
  fa.recompute_probs %s, %d : memref<32x64xf32>, memref<?xf32>
  fa.grad_values %s, %rows -> %acc : memref<32x64xf32>, memref<?x64xf16> -> memref<64x64xf32>
  fa.grad_probs %rows, %rows -> %p : memref<?x64xf16>, memref<?x64xf16> -> memref<32x64xf32>
  fa.grad_scores %s, %d, %s -> %p {softcap = 30.0 : f32} : memref<32x64xf32>, memref<?xf32>, memref<32x64xf32> -> memref<32x64xf32>
  fa.grad_keys %p, %rows -> %acc {scale = 0.125 : f32} : memref<32x64xf32>, memref<?x64xf16> -> memref<64x64xf32>
  fa.grad_queries %p, %rows -> %qacc {scale = 0.125 : f32} : memref<32x64xf32>, memref<?x64xf16> -> memref<?x64xf32>
  return
}

// A varlen batch's backward (packed sequences, their prefix sums).
// CHECK-LABEL: func.func @varlen
// CHECK: fa.attention_backward %{{.*}}, %{{.*}}, %{{.*}}, %{{.*}}, %{{.*}}, %{{.*}} varlen(%{{.*}}, %{{.*}} : memref<3xi32>, memref<3xi32>) outs(
func.func @varlen(%q: memref<1x4x77x64xf32>, %k: memref<1x2x131x64xf32>, %l: memref<1x4x77xf32>, %cq: memref<3xi32>, %ck: memref<3xi32>) {
  fa.attention_backward %q, %k, %k, %q, %l, %q varlen(%cq, %ck : memref<3xi32>, memref<3xi32>)
      outs(%q, %k, %k : memref<1x4x77x64xf32>, memref<1x2x131x64xf32>, memref<1x2x131x64xf32>)
      : memref<1x4x77x64xf32>, memref<1x2x131x64xf32>, memref<1x2x131x64xf32>, memref<1x4x77x64xf32>, memref<1x4x77xf32>, memref<1x4x77x64xf32>
  return
}
