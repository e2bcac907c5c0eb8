// RUN: fa-opt %s --split-input-file --fa-raise-attention | FileCheck %s

// Shaped like torch-mlir's lowering of scaled_dot_product_attention on
// [B, H, N, D] after collapsing to [B*H, N, D]: transpose + batch_matmul,
// a multiply by the scale, linalg.softmax over the keys, batch_matmul.
// CHECK-LABEL: func @torch_mlir_like
// CHECK-SAME: (%[[Q:.*]]: tensor<8x128x64xf16>, %[[K:.*]]: tensor<8x256x64xf16>, %[[V:.*]]: tensor<8x256x64xf16>)
// CHECK-DAG: %[[Q4:.*]] = tensor.expand_shape %[[Q]] {{\[\[}}0, 1], [2], [3]] output_shape [1, 8, 128, 64]
// CHECK-DAG: %[[K4:.*]] = tensor.expand_shape %[[K]]
// CHECK-DAG: %[[V4:.*]] = tensor.expand_shape %[[V]]
// CHECK: %[[O4:.*]] = fa.attention %[[Q4]], %[[K4]], %[[V4]] {scale = 1.250000e-01 : f32} : tensor<1x8x128x64xf16>, tensor<1x8x256x64xf16>, tensor<1x8x256x64xf16> -> tensor<1x8x128x64xf16>
// CHECK: %[[O:.*]] = tensor.collapse_shape %[[O4]]
// CHECK: return %[[O]]
func.func @torch_mlir_like(%q: tensor<8x128x64xf16>, %k: tensor<8x256x64xf16>, %v: tensor<8x256x64xf16>) -> tensor<8x128x64xf16> {
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
  return %o : tensor<8x128x64xf16>
}

// -----

// Shaped like StableHLO -> linalg: division by sqrt(D) with a splat
// constant tensor and an additive causal mask constant; f32.
// CHECK-LABEL: func @stablehlo_like_causal
// CHECK: fa.attention %{{.*}}, %{{.*}}, %{{.*}} {causal, scale = 1.250000e-01 : f32} : tensor<1x2x4x64xf32>, tensor<1x2x4x64xf32>, tensor<1x2x4x64xf32> -> tensor<1x2x4x64xf32>
// CHECK-NOT: linalg.softmax
func.func @stablehlo_like_causal(%q: tensor<2x4x64xf32>, %k: tensor<2x4x64xf32>, %v: tensor<2x4x64xf32>) -> tensor<2x4x64xf32> {
  %cst = arith.constant 0.000000e+00 : f32
  %sqrt_d = arith.constant dense<8.000000e+00> : tensor<2x4x4xf32>
  %mask = arith.constant dense<[[[0.0, 0xFF800000, 0xFF800000, 0xFF800000], [0.0, 0.0, 0xFF800000, 0xFF800000], [0.0, 0.0, 0.0, 0xFF800000], [0.0, 0.0, 0.0, 0.0]],
                                [[0.0, 0xFF800000, 0xFF800000, 0xFF800000], [0.0, 0.0, 0xFF800000, 0xFF800000], [0.0, 0.0, 0.0, 0xFF800000], [0.0, 0.0, 0.0, 0.0]]]> : tensor<2x4x4xf32>
  %kt_init = tensor.empty() : tensor<2x64x4xf32>
  %kt = linalg.transpose ins(%k : tensor<2x4x64xf32>) outs(%kt_init : tensor<2x64x4xf32>) permutation = [0, 2, 1]
  %s_init = tensor.empty() : tensor<2x4x4xf32>
  %s_zero = linalg.fill ins(%cst : f32) outs(%s_init : tensor<2x4x4xf32>) -> tensor<2x4x4xf32>
  %s = linalg.batch_matmul ins(%q, %kt : tensor<2x4x64xf32>, tensor<2x64x4xf32>) outs(%s_zero : tensor<2x4x4xf32>) -> tensor<2x4x4xf32>
  %scaled = linalg.generic {indexing_maps = [affine_map<(d0, d1, d2) -> (d0, d1, d2)>, affine_map<(d0, d1, d2) -> (d0, d1, d2)>, affine_map<(d0, d1, d2) -> (d0, d1, d2)>],
                            iterator_types = ["parallel", "parallel", "parallel"]}
      ins(%s, %sqrt_d : tensor<2x4x4xf32>, tensor<2x4x4xf32>) outs(%s_init : tensor<2x4x4xf32>) {
  ^bb0(%in: f32, %d: f32, %out: f32):
    %r = arith.divf %in, %d : f32
    linalg.yield %r : f32
  } -> tensor<2x4x4xf32>
  %masked = linalg.generic {indexing_maps = [affine_map<(d0, d1, d2) -> (d0, d1, d2)>, affine_map<(d0, d1, d2) -> (d0, d1, d2)>, affine_map<(d0, d1, d2) -> (d0, d1, d2)>],
                            iterator_types = ["parallel", "parallel", "parallel"]}
      ins(%scaled, %mask : tensor<2x4x4xf32>, tensor<2x4x4xf32>) outs(%s_init : tensor<2x4x4xf32>) {
  ^bb0(%in: f32, %m: f32, %out: f32):
    %r = arith.addf %in, %m : f32
    linalg.yield %r : f32
  } -> tensor<2x4x4xf32>
  %p = linalg.softmax dimension(2) ins(%masked : tensor<2x4x4xf32>) outs(%s_init : tensor<2x4x4xf32>) -> tensor<2x4x4xf32>
  %o_init = tensor.empty() : tensor<2x4x64xf32>
  %o_zero = linalg.fill ins(%cst : f32) outs(%o_init : tensor<2x4x64xf32>) -> tensor<2x4x64xf32>
  %o = linalg.batch_matmul ins(%p, %v : tensor<2x4x4xf32>, tensor<2x4x64xf32>) outs(%o_zero : tensor<2x4x64xf32>) -> tensor<2x4x64xf32>
  return %o : tensor<2x4x64xf32>
}

// -----

// Must not fire: softmax over the query axis.
// CHECK-LABEL: func @softmax_wrong_axis
// CHECK-NOT: fa.attention
// CHECK: linalg.softmax dimension(1)
func.func @softmax_wrong_axis(%q: tensor<2x4x64xf32>, %k: tensor<2x4x64xf32>, %v: tensor<2x4x64xf32>) -> tensor<2x4x64xf32> {
  %cst = arith.constant 0.000000e+00 : f32
  %kt_init = tensor.empty() : tensor<2x64x4xf32>
  %kt = linalg.transpose ins(%k : tensor<2x4x64xf32>) outs(%kt_init : tensor<2x64x4xf32>) permutation = [0, 2, 1]
  %s_init = tensor.empty() : tensor<2x4x4xf32>
  %s = linalg.batch_matmul ins(%q, %kt : tensor<2x4x64xf32>, tensor<2x64x4xf32>) outs(%s_init : tensor<2x4x4xf32>) -> tensor<2x4x4xf32>
  %p = linalg.softmax dimension(1) ins(%s : tensor<2x4x4xf32>) outs(%s_init : tensor<2x4x4xf32>) -> tensor<2x4x4xf32>
  %o_init = tensor.empty() : tensor<2x4x64xf32>
  %o = linalg.batch_matmul ins(%p, %v : tensor<2x4x4xf32>, tensor<2x4x64xf32>) outs(%o_init : tensor<2x4x64xf32>) -> tensor<2x4x64xf32>
  return %o : tensor<2x4x64xf32>
}

// -----

// Must not fire: an additive mask fa.attention cannot express (not causal).
// CHECK-LABEL: func @non_causal_mask
// CHECK-NOT: fa.attention
// CHECK: linalg.softmax
func.func @non_causal_mask(%q: tensor<1x2x64xf32>, %k: tensor<1x2x64xf32>, %v: tensor<1x2x64xf32>) -> tensor<1x2x64xf32> {
  %mask = arith.constant dense<[[[0xFF800000, 0.0], [0.0, 0.0]]]> : tensor<1x2x2xf32>
  %kt_init = tensor.empty() : tensor<1x64x2xf32>
  %kt = linalg.transpose ins(%k : tensor<1x2x64xf32>) outs(%kt_init : tensor<1x64x2xf32>) permutation = [0, 2, 1]
  %s_init = tensor.empty() : tensor<1x2x2xf32>
  %s = linalg.batch_matmul ins(%q, %kt : tensor<1x2x64xf32>, tensor<1x64x2xf32>) outs(%s_init : tensor<1x2x2xf32>) -> tensor<1x2x2xf32>
  %masked = linalg.generic {indexing_maps = [affine_map<(d0, d1, d2) -> (d0, d1, d2)>, affine_map<(d0, d1, d2) -> (d0, d1, d2)>, affine_map<(d0, d1, d2) -> (d0, d1, d2)>],
                            iterator_types = ["parallel", "parallel", "parallel"]}
      ins(%s, %mask : tensor<1x2x2xf32>, tensor<1x2x2xf32>) outs(%s_init : tensor<1x2x2xf32>) {
  ^bb0(%in: f32, %m: f32, %out: f32):
    %r = arith.addf %in, %m : f32
    linalg.yield %r : f32
  } -> tensor<1x2x2xf32>
  %p = linalg.softmax dimension(2) ins(%masked : tensor<1x2x2xf32>) outs(%s_init : tensor<1x2x2xf32>) -> tensor<1x2x2xf32>
  %o_init = tensor.empty() : tensor<1x2x64xf32>
  %o = linalg.batch_matmul ins(%p, %v : tensor<1x2x2xf32>, tensor<1x2x64xf32>) outs(%o_init : tensor<1x2x64xf32>) -> tensor<1x2x64xf32>
  return %o : tensor<1x2x64xf32>
}

// -----

// Must not fire: the left operand of P V is not a softmax (a plain exp).
// CHECK-LABEL: func @not_softmax
// CHECK-NOT: fa.attention
func.func @not_softmax(%q: tensor<1x2x64xf32>, %k: tensor<1x2x64xf32>, %v: tensor<1x2x64xf32>) -> tensor<1x2x64xf32> {
  %kt_init = tensor.empty() : tensor<1x64x2xf32>
  %kt = linalg.transpose ins(%k : tensor<1x2x64xf32>) outs(%kt_init : tensor<1x64x2xf32>) permutation = [0, 2, 1]
  %s_init = tensor.empty() : tensor<1x2x2xf32>
  %s = linalg.batch_matmul ins(%q, %kt : tensor<1x2x64xf32>, tensor<1x64x2xf32>) outs(%s_init : tensor<1x2x2xf32>) -> tensor<1x2x2xf32>
  %e = linalg.exp ins(%s : tensor<1x2x2xf32>) outs(%s_init : tensor<1x2x2xf32>) -> tensor<1x2x2xf32>
  %o_init = tensor.empty() : tensor<1x2x64xf32>
  %o = linalg.batch_matmul ins(%e, %v : tensor<1x2x2xf32>, tensor<1x2x64xf32>) outs(%o_init : tensor<1x2x64xf32>) -> tensor<1x2x64xf32>
  return %o : tensor<1x2x64xf32>
}

// -----

// The decomposed softmax StableHLO -> linalg produces: row max (a
// reduction generic), exp(x - max), row sum (linalg.reduce), divide.
// CHECK-LABEL: func @decomposed_softmax
// CHECK: fa.attention %{{.*}}, %{{.*}}, %{{.*}} {scale = 1.250000e-01 : f32} : tensor<1x2x4x64xf32>
// CHECK-NOT: linalg.reduce
func.func @decomposed_softmax(%q: tensor<2x4x64xf32>, %k: tensor<2x4x64xf32>, %v: tensor<2x4x64xf32>) -> tensor<2x4x64xf32> {
  %cst = arith.constant 0.000000e+00 : f32
  %ninf = arith.constant 0xFF800000 : f32
  %scale = arith.constant 1.250000e-01 : f32
  %kt_init = tensor.empty() : tensor<2x64x4xf32>
  %kt = linalg.transpose ins(%k : tensor<2x4x64xf32>) outs(%kt_init : tensor<2x64x4xf32>) permutation = [0, 2, 1]
  %s_init = tensor.empty() : tensor<2x4x4xf32>
  %s = linalg.batch_matmul ins(%q, %kt : tensor<2x4x64xf32>, tensor<2x64x4xf32>) outs(%s_init : tensor<2x4x4xf32>) -> tensor<2x4x4xf32>
  %x = linalg.generic {indexing_maps = [affine_map<(d0, d1, d2) -> (d0, d1, d2)>, affine_map<(d0, d1, d2) -> (d0, d1, d2)>],
                       iterator_types = ["parallel", "parallel", "parallel"]}
      ins(%s : tensor<2x4x4xf32>) outs(%s_init : tensor<2x4x4xf32>) {
  ^bb0(%in: f32, %out: f32):
    %r = arith.mulf %in, %scale : f32
    linalg.yield %r : f32
  } -> tensor<2x4x4xf32>
  %row_init = tensor.empty() : tensor<2x4xf32>
  %m_fill = linalg.fill ins(%ninf : f32) outs(%row_init : tensor<2x4xf32>) -> tensor<2x4xf32>
  %m = linalg.generic {indexing_maps = [affine_map<(d0, d1, d2) -> (d0, d1, d2)>, affine_map<(d0, d1, d2) -> (d0, d1)>],
                       iterator_types = ["parallel", "parallel", "reduction"]}
      ins(%x : tensor<2x4x4xf32>) outs(%m_fill : tensor<2x4xf32>) {
  ^bb0(%in: f32, %acc: f32):
    %r = arith.maximumf %in, %acc : f32
    linalg.yield %r : f32
  } -> tensor<2x4xf32>
  %e = linalg.generic {indexing_maps = [affine_map<(d0, d1, d2) -> (d0, d1, d2)>, affine_map<(d0, d1, d2) -> (d0, d1)>, affine_map<(d0, d1, d2) -> (d0, d1, d2)>],
                       iterator_types = ["parallel", "parallel", "parallel"]}
      ins(%x, %m : tensor<2x4x4xf32>, tensor<2x4xf32>) outs(%s_init : tensor<2x4x4xf32>) {
  ^bb0(%a: f32, %b: f32, %out: f32):
    %d = arith.subf %a, %b : f32
    %y = math.exp %d : f32
    linalg.yield %y : f32
  } -> tensor<2x4x4xf32>
  %l_fill = linalg.fill ins(%cst : f32) outs(%row_init : tensor<2x4xf32>) -> tensor<2x4xf32>
  %l = linalg.reduce ins(%e : tensor<2x4x4xf32>) outs(%l_fill : tensor<2x4xf32>) dimensions = [2]
    (%in: f32, %acc: f32) {
      %r = arith.addf %in, %acc : f32
      linalg.yield %r : f32
    }
  %p = linalg.generic {indexing_maps = [affine_map<(d0, d1, d2) -> (d0, d1, d2)>, affine_map<(d0, d1, d2) -> (d0, d1)>, affine_map<(d0, d1, d2) -> (d0, d1, d2)>],
                       iterator_types = ["parallel", "parallel", "parallel"]}
      ins(%e, %l : tensor<2x4x4xf32>, tensor<2x4xf32>) outs(%s_init : tensor<2x4x4xf32>) {
  ^bb0(%a: f32, %b: f32, %out: f32):
    %r = arith.divf %a, %b : f32
    linalg.yield %r : f32
  } -> tensor<2x4x4xf32>
  %o_init = tensor.empty() : tensor<2x4x64xf32>
  %o = linalg.batch_matmul ins(%p, %v : tensor<2x4x4xf32>, tensor<2x4x64xf32>) outs(%o_init : tensor<2x4x64xf32>) -> tensor<2x4x64xf32>
  return %o : tensor<2x4x64xf32>
}

// -----

// Must not fire: a decomposed "softmax" whose row sum is over the wrong
// axis (dimensions = [1]) is not a softmax.
// CHECK-LABEL: func @decomposed_wrong_sum
// CHECK-NOT: fa.attention
func.func @decomposed_wrong_sum(%q: tensor<2x4x64xf32>, %k: tensor<2x4x64xf32>, %v: tensor<2x4x64xf32>) -> tensor<2x4x64xf32> {
  %cst = arith.constant 0.000000e+00 : f32
  %ninf = arith.constant 0xFF800000 : f32
  %kt_init = tensor.empty() : tensor<2x64x4xf32>
  %kt = linalg.transpose ins(%k : tensor<2x4x64xf32>) outs(%kt_init : tensor<2x64x4xf32>) permutation = [0, 2, 1]
  %s_init = tensor.empty() : tensor<2x4x4xf32>
  %x = linalg.batch_matmul ins(%q, %kt : tensor<2x4x64xf32>, tensor<2x64x4xf32>) outs(%s_init : tensor<2x4x4xf32>) -> tensor<2x4x4xf32>
  %row_init = tensor.empty() : tensor<2x4xf32>
  %m_fill = linalg.fill ins(%ninf : f32) outs(%row_init : tensor<2x4xf32>) -> tensor<2x4xf32>
  %m = linalg.reduce ins(%x : tensor<2x4x4xf32>) outs(%m_fill : tensor<2x4xf32>) dimensions = [2]
    (%in: f32, %acc: f32) {
      %r = arith.maximumf %in, %acc : f32
      linalg.yield %r : f32
    }
  %e = linalg.generic {indexing_maps = [affine_map<(d0, d1, d2) -> (d0, d1, d2)>, affine_map<(d0, d1, d2) -> (d0, d1)>, affine_map<(d0, d1, d2) -> (d0, d1, d2)>],
                       iterator_types = ["parallel", "parallel", "parallel"]}
      ins(%x, %m : tensor<2x4x4xf32>, tensor<2x4xf32>) outs(%s_init : tensor<2x4x4xf32>) {
  ^bb0(%a: f32, %b: f32, %out: f32):
    %d = arith.subf %a, %b : f32
    %y = math.exp %d : f32
    linalg.yield %y : f32
  } -> tensor<2x4x4xf32>
  %l_fill = linalg.fill ins(%cst : f32) outs(%row_init : tensor<2x4xf32>) -> tensor<2x4xf32>
  %l = linalg.reduce ins(%e : tensor<2x4x4xf32>) outs(%l_fill : tensor<2x4xf32>) dimensions = [1]
    (%in: f32, %acc: f32) {
      %r = arith.addf %in, %acc : f32
      linalg.yield %r : f32
    }
  %p = linalg.generic {indexing_maps = [affine_map<(d0, d1, d2) -> (d0, d1, d2)>, affine_map<(d0, d1, d2) -> (d0, d1)>, affine_map<(d0, d1, d2) -> (d0, d1, d2)>],
                       iterator_types = ["parallel", "parallel", "parallel"]}
      ins(%e, %l : tensor<2x4x4xf32>, tensor<2x4xf32>) outs(%s_init : tensor<2x4x4xf32>) {
  ^bb0(%a: f32, %b: f32, %out: f32):
    %r = arith.divf %a, %b : f32
    linalg.yield %r : f32
  } -> tensor<2x4x4xf32>
  %o_init = tensor.empty() : tensor<2x4x64xf32>
  %o = linalg.batch_matmul ins(%p, %v : tensor<2x4x4xf32>, tensor<2x4x64xf32>) outs(%o_init : tensor<2x4x64xf32>) -> tensor<2x4x64xf32>
  return %o : tensor<2x4x64xf32>
}
