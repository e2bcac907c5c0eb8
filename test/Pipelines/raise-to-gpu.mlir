// An ML compiler's module: one attention raised from linalg (torch-mlir's
// SDPA shape, no LSE) and one written as fa.attention with an LSE, of
// another head dim, in one function. Each becomes its own kernel; the
// raised one writes no LSE (its launch passes a null pointer there and the
// kernel computes no log2 of the row sums).
// RUN: fa-opt %s --fa-raise-attention --fa-sm90-kernel-pipeline | FileCheck %s
// RUN: fa-opt %s --fa-raise-attention --fa-sm80-kernel-pipeline | FileCheck %s --check-prefix=SM80
// RUN: fa-opt %s --fa-raise-attention --fa-sm90-pipeline | FileCheck %s --check-prefix=PTX

// CHECK-LABEL: func.func @two_layers
// CHECK: %[[NULL:.*]] = llvm.mlir.zero : !llvm.ptr<1>
// CHECK: gpu.launch_func  @fa_kernels::@fa3_sm90_d64_br192_bc128_s3_f16_persistent_q2_nolse blocks
// CHECK-SAME: %[[NULL]] : !llvm.ptr<1>
// CHECK: gpu.launch_func async [%{{.*}}] @fa_kernels::@fa3_sm90_d128_br128_bc128_s2_bf16_causal_persistent_q2 blocks
// CHECK: llvm.func @fa3_sm90_d128_br128_bc128_s2_bf16_causal_persistent_q2(
// CHECK-SAME: fagpu.writes_lse = true
// CHECK: llvm.inline_asm "lg2.approx.ftz.f32 $0, $1;"
// CHECK: llvm.func @fa3_sm90_d64_br192_bc128_s3_f16_persistent_q2_nolse(
// CHECK-SAME: fagpu.writes_lse = false
// CHECK-NOT: lg2.approx
// CHECK: llvm.return
// SM80: gpu.launch_func  @fa_kernels::@fa2_sm80_d64_br128_bc64_f16_nolse blocks
// SM80: gpu.launch_func @fa_kernels::@fa2_sm80_d128_br128_bc64_bf16_causal blocks
// PTX: gpu.binary @fa_kernels
func.func @two_layers(%q: tensor<8x128x64xf16>, %k: tensor<8x256x64xf16>, %v: tensor<8x256x64xf16>,
                      %q2: memref<2x8x300x128xbf16>, %k2: memref<2x2x300x128xbf16>, %v2: memref<2x2x300x128xbf16>,
                      %o2: memref<2x8x300x128xbf16>, %lse2: memref<2x8x300xf32>) -> tensor<8x128x64xf16> {
  %cst = arith.constant 0.000000e+00 : f16
  %scale = arith.constant 1.250000e-01 : f16
  %kt_init = tensor.empty() : tensor<8x64x256xf16>
  %kt = linalg.transpose ins(%k : tensor<8x256x64xf16>) outs(%kt_init : tensor<8x64x256xf16>) permutation = [0, 2, 1]
  %s_init = tensor.empty() : tensor<8x128x256xf16>
  %s_zero = linalg.fill ins(%cst : f16) outs(%s_init : tensor<8x128x256xf16>) -> tensor<8x128x256xf16>
  %s = linalg.batch_matmul ins(%q, %kt : tensor<8x128x64xf16>, tensor<8x64x256xf16>) outs(%s_zero : tensor<8x128x256xf16>) -> tensor<8x128x256xf16>
  %scaled = linalg.generic {indexing_maps = [affine_map<(d0, d1, d2) -> (d0, d1, d2)>, affine_map<(d0, d1, d2) -> (d0, d1, d2)>],
                            iterator_types = ["parallel", "parallel", "parallel"]}
      ins(%s : tensor<8x128x256xf16>) outs(%s_init : tensor<8x128x256xf16>) {
  ^bb0(%in: f16, %out: f16):
    %m = arith.mulf %in, %scale : f16
    linalg.yield %m : f16
  } -> tensor<8x128x256xf16>
  %p = linalg.softmax dimension(2) ins(%scaled : tensor<8x128x256xf16>) outs(%s_init : tensor<8x128x256xf16>) -> tensor<8x128x256xf16>
  %o_init = tensor.empty() : tensor<8x128x64xf16>
  %o_zero = linalg.fill ins(%cst : f16) outs(%o_init : tensor<8x128x64xf16>) -> tensor<8x128x64xf16>
  %o = linalg.batch_matmul ins(%p, %v : tensor<8x128x256xf16>, tensor<8x256x64xf16>) outs(%o_zero : tensor<8x128x64xf16>) -> tensor<8x128x64xf16>
  fa.attention %q2, %k2, %v2 outs(%o2, %lse2 : memref<2x8x300x128xbf16>, memref<2x8x300xf32>) {causal}
      : memref<2x8x300x128xbf16>, memref<2x2x300x128xbf16>, memref<2x2x300x128xbf16>
  return %o : tensor<8x128x64xf16>
}
