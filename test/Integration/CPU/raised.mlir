// RUN: fa-run %s --raise --print-input | FileCheck %s
// RUN: fa-run %s --raise --loop-order=fa1 --block-r=16 --block-c=32 | FileCheck %s --check-prefix=EXEC

// Attention written in linalg (transpose, batch_matmul, scale, softmax,
// batch_matmul) on [B*H, N, D], raised to fa.attention, lowered by
// fa-cpu-pipeline and checked against the naive reference.
// CHECK: fa.attention %{{.*}} {scale = 1.250000e-01 : f32}
// CHECK: fa-run: PASS
// EXEC: fa-run: fa1 f32 B=1 Hq=3 Hkv=3 Nq=40 Nk=40 D=64 Dv=64 inputs=normal
// EXEC: fa-run: PASS
func.func @attn(%qm: memref<3x40x64xf32>, %km: memref<3x40x64xf32>, %vm: memref<3x40x64xf32>,
                %om: memref<3x40x64xf32>) {
  %q = bufferization.to_tensor %qm restrict : memref<3x40x64xf32> to tensor<3x40x64xf32>
  %k = bufferization.to_tensor %km restrict : memref<3x40x64xf32> to tensor<3x40x64xf32>
  %v = bufferization.to_tensor %vm restrict : memref<3x40x64xf32> to tensor<3x40x64xf32>
  %cst = arith.constant 0.000000e+00 : f32
  %scale = arith.constant 1.250000e-01 : f32
  %kt_init = tensor.empty() : tensor<3x64x40xf32>
  %kt = linalg.transpose ins(%k : tensor<3x40x64xf32>) outs(%kt_init : tensor<3x64x40xf32>) permutation = [0, 2, 1]
  %s_init = tensor.empty() : tensor<3x40x40xf32>
  %s_zero = linalg.fill ins(%cst : f32) outs(%s_init : tensor<3x40x40xf32>) -> tensor<3x40x40xf32>
  %s = linalg.batch_matmul ins(%q, %kt : tensor<3x40x64xf32>, tensor<3x64x40xf32>) outs(%s_zero : tensor<3x40x40xf32>) -> tensor<3x40x40xf32>
  %scaled = linalg.generic {indexing_maps = [affine_map<(d0, d1, d2) -> (d0, d1, d2)>, affine_map<(d0, d1, d2) -> (d0, d1, d2)>],
                            iterator_types = ["parallel", "parallel", "parallel"]}
      ins(%s : tensor<3x40x40xf32>) outs(%s_init : tensor<3x40x40xf32>) {
  ^bb0(%in: f32, %out: f32):
    %m = arith.mulf %in, %scale : f32
    linalg.yield %m : f32
  } -> tensor<3x40x40xf32>
  %p = linalg.softmax dimension(2) ins(%scaled : tensor<3x40x40xf32>) outs(%s_init : tensor<3x40x40xf32>) -> tensor<3x40x40xf32>
  %o_init = tensor.empty() : tensor<3x40x64xf32>
  %o_zero = linalg.fill ins(%cst : f32) outs(%o_init : tensor<3x40x64xf32>) -> tensor<3x40x64xf32>
  %o = linalg.batch_matmul ins(%p, %v : tensor<3x40x40xf32>, tensor<3x40x64xf32>) outs(%o_zero : tensor<3x40x64xf32>) -> tensor<3x40x64xf32>
  bufferization.materialize_in_destination %o in restrict writable %om : (tensor<3x40x64xf32>, memref<3x40x64xf32>) -> ()
  return
}
