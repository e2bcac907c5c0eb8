// RUN: fa-run %s --loop-order=fa2 | FileCheck %s
// RUN: fa-run %s --loop-order=fa1 --block-r=16 --block-c=32 | FileCheck %s

// The tensor form executes too: fa-attention-to-buffers and one-shot
// bufferization inside fa-cpu-pipeline turn it into buffers.
// CHECK: fa-run: PASS
func.func @attention(%qm: memref<2x4x50x32xf32>, %km: memref<2x4x70x32xf32>,
                     %vm: memref<2x4x70x32xf32>, %om: memref<2x4x50x32xf32>) {
  %q = bufferization.to_tensor %qm restrict : memref<2x4x50x32xf32> to tensor<2x4x50x32xf32>
  %k = bufferization.to_tensor %km restrict : memref<2x4x70x32xf32> to tensor<2x4x70x32xf32>
  %v = bufferization.to_tensor %vm restrict : memref<2x4x70x32xf32> to tensor<2x4x70x32xf32>
  %o = fa.attention %q, %k, %v {causal}
      : tensor<2x4x50x32xf32>, tensor<2x4x70x32xf32>, tensor<2x4x70x32xf32> -> tensor<2x4x50x32xf32>
  bufferization.materialize_in_destination %o in restrict writable %om
      : (tensor<2x4x50x32xf32>, memref<2x4x50x32xf32>) -> ()
  return
}
