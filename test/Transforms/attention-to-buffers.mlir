// RUN: fa-opt %s --fa-attention-to-buffers | FileCheck %s

// CHECK-LABEL: func @attention
// CHECK-SAME: (%[[Q:.*]]: tensor<?x8x?x64xbf16>, %[[K:.*]]: tensor<?x2x?x64xbf16>, %[[V:.*]]: tensor<?x2x?x64xbf16>)
// CHECK-DAG: %[[QB:.*]] = bufferization.to_buffer %[[Q]] read_only : tensor<?x8x?x64xbf16> to memref<?x8x?x64xbf16>
// CHECK-DAG: %[[KB:.*]] = bufferization.to_buffer %[[K]] read_only
// CHECK-DAG: %[[VB:.*]] = bufferization.to_buffer %[[V]] read_only
// The outputs take the query's dynamic batch and length:
// CHECK-DAG: %[[B:.*]] = memref.dim %[[QB]], %c0
// CHECK-DAG: %[[N:.*]] = memref.dim %[[QB]], %c2
// CHECK: %[[OB:.*]] = memref.alloc(%[[B]], %[[N]]) : memref<?x8x?x64xbf16>
// CHECK: %[[LB:.*]] = memref.alloc(%{{.*}}, %{{.*}}) : memref<?x8x?xf32>
// CHECK: fa.attention %[[QB]], %[[KB]], %[[VB]] outs(%[[OB]], %[[LB]] : memref<?x8x?x64xbf16>, memref<?x8x?xf32>) {causal}
// CHECK: %[[O:.*]] = bufferization.to_tensor %[[OB]] restrict writable
// CHECK: %[[L:.*]] = bufferization.to_tensor %[[LB]] restrict writable
// CHECK: return %[[O]], %[[L]]
func.func @attention(%q: tensor<?x8x?x64xbf16>, %k: tensor<?x2x?x64xbf16>,
                     %v: tensor<?x2x?x64xbf16>) -> (tensor<?x8x?x64xbf16>, tensor<?x8x?xf32>) {
  %o, %lse = fa.attention %q, %k, %v {causal}
      : tensor<?x8x?x64xbf16>, tensor<?x2x?x64xbf16>, tensor<?x2x?x64xbf16>
      -> tensor<?x8x?x64xbf16>, tensor<?x8x?xf32>
  return %o, %lse : tensor<?x8x?x64xbf16>, tensor<?x8x?xf32>
}
