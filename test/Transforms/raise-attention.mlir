// RUN: fa-opt %s --split-input-file --fa-raise-attention | FileCheck %s
// Each candidate left as it is gets a remark saying why (expected-remark):
// RUN: fa-opt %s --split-input-file --fa-raise-attention --verify-diagnostics -o /dev/null

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
  %zero_f = arith.constant 0.000000e+00 : f32
  %cst = arith.constant 0.000000e+00 : f32
  %kt_init = tensor.empty() : tensor<2x64x4xf32>
  %kt = linalg.transpose ins(%k : tensor<2x4x64xf32>) outs(%kt_init : tensor<2x64x4xf32>) permutation = [0, 2, 1]
  %s_init = tensor.empty() : tensor<2x4x4xf32>
  %s_init_z12 = linalg.fill ins(%zero_f : f32) outs(%s_init : tensor<2x4x4xf32>) -> tensor<2x4x4xf32>
  %s = linalg.batch_matmul ins(%q, %kt : tensor<2x4x64xf32>, tensor<2x64x4xf32>) outs(%s_init_z12 : tensor<2x4x4xf32>) -> tensor<2x4x4xf32>
  %p = linalg.softmax dimension(1) ins(%s : tensor<2x4x4xf32>) outs(%s_init : tensor<2x4x4xf32>) -> tensor<2x4x4xf32>
  %o_init = tensor.empty() : tensor<2x4x64xf32>
  %o_init_z16 = linalg.fill ins(%zero_f : f32) outs(%o_init : tensor<2x4x64xf32>) -> tensor<2x4x64xf32>
  // expected-remark @+1 {{not raised: the softmax is over dim 1, not the keys (the last dim)}}
  %o = linalg.batch_matmul ins(%p, %v : tensor<2x4x4xf32>, tensor<2x4x64xf32>) outs(%o_init_z16 : tensor<2x4x64xf32>) -> tensor<2x4x64xf32>
  return %o : tensor<2x4x64xf32>
}

// -----

// Must not fire: an additive mask fa.attention cannot express (not causal).
// CHECK-LABEL: func @non_causal_mask
// CHECK-NOT: fa.attention
// CHECK: linalg.softmax
func.func @non_causal_mask(%q: tensor<1x2x64xf32>, %k: tensor<1x2x64xf32>, %v: tensor<1x2x64xf32>) -> tensor<1x2x64xf32> {
  %zero_f = arith.constant 0.000000e+00 : f32
  %mask = arith.constant dense<[[[0xFF800000, 0.0], [0.0, 0.0]]]> : tensor<1x2x2xf32>
  %kt_init = tensor.empty() : tensor<1x64x2xf32>
  %kt = linalg.transpose ins(%k : tensor<1x2x64xf32>) outs(%kt_init : tensor<1x64x2xf32>) permutation = [0, 2, 1]
  %s_init = tensor.empty() : tensor<1x2x2xf32>
  %s_init_z12 = linalg.fill ins(%zero_f : f32) outs(%s_init : tensor<1x2x2xf32>) -> tensor<1x2x2xf32>
  %s = linalg.batch_matmul ins(%q, %kt : tensor<1x2x64xf32>, tensor<1x64x2xf32>) outs(%s_init_z12 : tensor<1x2x2xf32>) -> tensor<1x2x2xf32>
  %masked = linalg.generic {indexing_maps = [affine_map<(d0, d1, d2) -> (d0, d1, d2)>, affine_map<(d0, d1, d2) -> (d0, d1, d2)>, affine_map<(d0, d1, d2) -> (d0, d1, d2)>],
                            iterator_types = ["parallel", "parallel", "parallel"]}
      ins(%s, %mask : tensor<1x2x2xf32>, tensor<1x2x2xf32>) outs(%s_init : tensor<1x2x2xf32>) {
  ^bb0(%in: f32, %m: f32, %out: f32):
    %r = arith.addf %in, %m : f32
    linalg.yield %r : f32
  } -> tensor<1x2x2xf32>
  %p = linalg.softmax dimension(2) ins(%masked : tensor<1x2x2xf32>) outs(%s_init : tensor<1x2x2xf32>) -> tensor<1x2x2xf32>
  %o_init = tensor.empty() : tensor<1x2x64xf32>
  %o_init_z23 = linalg.fill ins(%zero_f : f32) outs(%o_init : tensor<1x2x64xf32>) -> tensor<1x2x64xf32>
  // expected-remark @+1 {{not raised: the mask is not causal or a window: a constant mask that is not a function of j - i}}
  %o = linalg.batch_matmul ins(%p, %v : tensor<1x2x2xf32>, tensor<1x2x64xf32>) outs(%o_init_z23 : tensor<1x2x64xf32>) -> tensor<1x2x64xf32>
  return %o : tensor<1x2x64xf32>
}

// -----

// Must not fire: the left operand of P V is not a softmax (a plain exp).
// CHECK-LABEL: func @not_softmax
// CHECK-NOT: fa.attention
func.func @not_softmax(%q: tensor<1x2x64xf32>, %k: tensor<1x2x64xf32>, %v: tensor<1x2x64xf32>) -> tensor<1x2x64xf32> {
  %zero_f = arith.constant 0.000000e+00 : f32
  %kt_init = tensor.empty() : tensor<1x64x2xf32>
  %kt = linalg.transpose ins(%k : tensor<1x2x64xf32>) outs(%kt_init : tensor<1x64x2xf32>) permutation = [0, 2, 1]
  %s_init = tensor.empty() : tensor<1x2x2xf32>
  %s_init_z10 = linalg.fill ins(%zero_f : f32) outs(%s_init : tensor<1x2x2xf32>) -> tensor<1x2x2xf32>
  %s = linalg.batch_matmul ins(%q, %kt : tensor<1x2x64xf32>, tensor<1x64x2xf32>) outs(%s_init_z10 : tensor<1x2x2xf32>) -> tensor<1x2x2xf32>
  %e = linalg.exp ins(%s : tensor<1x2x2xf32>) outs(%s_init : tensor<1x2x2xf32>) -> tensor<1x2x2xf32>
  %o_init = tensor.empty() : tensor<1x2x64xf32>
  %o_init_z14 = linalg.fill ins(%zero_f : f32) outs(%o_init : tensor<1x2x64xf32>) -> tensor<1x2x64xf32>
  %o = linalg.batch_matmul ins(%e, %v : tensor<1x2x2xf32>, tensor<1x2x64xf32>) outs(%o_init_z14 : tensor<1x2x64xf32>) -> tensor<1x2x64xf32>
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
  %s_zero = linalg.fill ins(%cst : f32) outs(%s_init : tensor<2x4x4xf32>) -> tensor<2x4x4xf32>
  %s = linalg.batch_matmul ins(%q, %kt : tensor<2x4x64xf32>, tensor<2x64x4xf32>) outs(%s_zero : tensor<2x4x4xf32>) -> tensor<2x4x4xf32>
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
  %o_zero = linalg.fill ins(%cst : f32) outs(%o_init : tensor<2x4x64xf32>) -> tensor<2x4x64xf32>
  %o = linalg.batch_matmul ins(%p, %v : tensor<2x4x4xf32>, tensor<2x4x64xf32>) outs(%o_zero : tensor<2x4x64xf32>) -> tensor<2x4x64xf32>
  return %o : tensor<2x4x64xf32>
}

// -----

// Must not fire: a decomposed "softmax" whose row sum is over the wrong
// axis (dimensions = [1]) is not a softmax.
// CHECK-LABEL: func @decomposed_wrong_sum
// CHECK-NOT: fa.attention
func.func @decomposed_wrong_sum(%q: tensor<2x4x64xf32>, %k: tensor<2x4x64xf32>, %v: tensor<2x4x64xf32>) -> tensor<2x4x64xf32> {
  %zero_f = arith.constant 0.000000e+00 : f32
  %cst = arith.constant 0.000000e+00 : f32
  %ninf = arith.constant 0xFF800000 : f32
  %kt_init = tensor.empty() : tensor<2x64x4xf32>
  %kt = linalg.transpose ins(%k : tensor<2x4x64xf32>) outs(%kt_init : tensor<2x64x4xf32>) permutation = [0, 2, 1]
  %s_init = tensor.empty() : tensor<2x4x4xf32>
  %s_init_z13 = linalg.fill ins(%zero_f : f32) outs(%s_init : tensor<2x4x4xf32>) -> tensor<2x4x4xf32>
  %x = linalg.batch_matmul ins(%q, %kt : tensor<2x4x64xf32>, tensor<2x64x4xf32>) outs(%s_init_z13 : tensor<2x4x4xf32>) -> tensor<2x4x4xf32>
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
  %o_init_z44 = linalg.fill ins(%zero_f : f32) outs(%o_init : tensor<2x4x64xf32>) -> tensor<2x4x64xf32>
  // expected-remark @+1 {{not raised: the softmax's denominator is not the row sum of its numerator over the keys, from zero}}
  %o = linalg.batch_matmul ins(%p, %v : tensor<2x4x4xf32>, tensor<2x4x64xf32>) outs(%o_init_z44 : tensor<2x4x64xf32>) -> tensor<2x4x64xf32>
  return %o : tensor<2x4x64xf32>
}

// -----

// 4-D einsum form (torch-mlir's lowering of torch.einsum / matmul on
// [B, H, N, D] without collapsing): Q K^T as a linalg.generic contracting
// d, scale, linalg.softmax over the last dim, P V as a generic contracting
// j. No reshapes: the operands go to fa.attention as they are.
// CHECK-LABEL: func @einsum_4d
// CHECK-SAME: (%[[Q:.*]]: tensor<2x4x128x64xbf16>, %[[K:.*]]: tensor<2x4x256x64xbf16>, %[[V:.*]]: tensor<2x4x256x64xbf16>)
// CHECK-NEXT: %[[O:.*]] = fa.attention %[[Q]], %[[K]], %[[V]] {scale = 1.250000e-01 : f32} : tensor<2x4x128x64xbf16>, tensor<2x4x256x64xbf16>, tensor<2x4x256x64xbf16> -> tensor<2x4x128x64xbf16>
// CHECK-NEXT: return %[[O]]
#qk_q = affine_map<(b, h, i, j, d) -> (b, h, i, d)>
#qk_k = affine_map<(b, h, i, j, d) -> (b, h, j, d)>
#qk_s = affine_map<(b, h, i, j, d) -> (b, h, i, j)>
#pv_p = affine_map<(b, h, i, d, j) -> (b, h, i, j)>
#pv_v = affine_map<(b, h, i, d, j) -> (b, h, j, d)>
#pv_o = affine_map<(b, h, i, d, j) -> (b, h, i, d)>
#id4 = affine_map<(b, h, i, j) -> (b, h, i, j)>
func.func @einsum_4d(%q: tensor<2x4x128x64xbf16>, %k: tensor<2x4x256x64xbf16>, %v: tensor<2x4x256x64xbf16>) -> tensor<2x4x128x64xbf16> {
  %zero = arith.constant 0.000000e+00 : bf16
  %scale = arith.constant 1.250000e-01 : bf16
  %s_init = tensor.empty() : tensor<2x4x128x256xbf16>
  %s_zero = linalg.fill ins(%zero : bf16) outs(%s_init : tensor<2x4x128x256xbf16>) -> tensor<2x4x128x256xbf16>
  %s = linalg.generic {indexing_maps = [#qk_q, #qk_k, #qk_s], iterator_types = ["parallel", "parallel", "parallel", "parallel", "reduction"]}
      ins(%q, %k : tensor<2x4x128x64xbf16>, tensor<2x4x256x64xbf16>) outs(%s_zero : tensor<2x4x128x256xbf16>) {
  ^bb0(%a: bf16, %b: bf16, %acc: bf16):
    %m = arith.mulf %a, %b : bf16
    %r = arith.addf %acc, %m : bf16
    linalg.yield %r : bf16
  } -> tensor<2x4x128x256xbf16>
  %scaled = linalg.generic {indexing_maps = [#id4, #id4], iterator_types = ["parallel", "parallel", "parallel", "parallel"]}
      ins(%s : tensor<2x4x128x256xbf16>) outs(%s_init : tensor<2x4x128x256xbf16>) {
  ^bb0(%in: bf16, %out: bf16):
    %m = arith.mulf %in, %scale : bf16
    linalg.yield %m : bf16
  } -> tensor<2x4x128x256xbf16>
  %p = linalg.softmax dimension(3) ins(%scaled : tensor<2x4x128x256xbf16>) outs(%s_init : tensor<2x4x128x256xbf16>) -> tensor<2x4x128x256xbf16>
  %o_init = tensor.empty() : tensor<2x4x128x64xbf16>
  %o_zero = linalg.fill ins(%zero : bf16) outs(%o_init : tensor<2x4x128x64xbf16>) -> tensor<2x4x128x64xbf16>
  %o = linalg.generic {indexing_maps = [#pv_p, #pv_v, #pv_o], iterator_types = ["parallel", "parallel", "parallel", "parallel", "reduction"]}
      ins(%p, %v : tensor<2x4x128x256xbf16>, tensor<2x4x256x64xbf16>) outs(%o_zero : tensor<2x4x128x64xbf16>) {
  ^bb0(%a: bf16, %b: bf16, %acc: bf16):
    %m = arith.mulf %a, %b : bf16
    %r = arith.addf %acc, %m : bf16
    linalg.yield %r : bf16
  } -> tensor<2x4x128x64xbf16>
  return %o : tensor<2x4x128x64xbf16>
}

// -----

// Grouped-query attention stated in the einsum maps: K and V read head
// h floordiv 4 (8 query heads, 2 key/value heads); causal mask as a select
// on linalg.index (key <= query), applied before the scale (1 / sqrt(128)
// as the f16 constant 11.3125).
// CHECK-LABEL: func @gqa_einsum_select_mask
// CHECK-SAME: (%[[Q:.*]]: tensor<1x8x64x128xf16>, %[[K:.*]]: tensor<1x2x64x128xf16>, %[[V:.*]]: tensor<1x2x64x128xf16>)
// CHECK-NEXT: fa.attention %[[Q]], %[[K]], %[[V]] {causal, scale = 0.0883977934 : f32} : tensor<1x8x64x128xf16>, tensor<1x2x64x128xf16>, tensor<1x2x64x128xf16> -> tensor<1x8x64x128xf16>
#g_q = affine_map<(b, h, i, j, d) -> (b, h, i, d)>
#g_k = affine_map<(b, h, i, j, d) -> (b, h floordiv 4, j, d)>
#g_s = affine_map<(b, h, i, j, d) -> (b, h, i, j)>
#g_p = affine_map<(b, h, i, d, j) -> (b, h, i, j)>
#g_v = affine_map<(b, h, i, d, j) -> (b, h floordiv 4, j, d)>
#g_o = affine_map<(b, h, i, d, j) -> (b, h, i, d)>
#g_id = affine_map<(b, h, i, j) -> (b, h, i, j)>
func.func @gqa_einsum_select_mask(%q: tensor<1x8x64x128xf16>, %k: tensor<1x2x64x128xf16>, %v: tensor<1x2x64x128xf16>) -> tensor<1x8x64x128xf16> {
  %zero = arith.constant 0.000000e+00 : f16
  %ninf = arith.constant 0xFC00 : f16
  %sqrt_d = arith.constant 1.131370e+01 : f16
  %s_init = tensor.empty() : tensor<1x8x64x64xf16>
  %s_zero = linalg.fill ins(%zero : f16) outs(%s_init : tensor<1x8x64x64xf16>) -> tensor<1x8x64x64xf16>
  %s = linalg.generic {indexing_maps = [#g_q, #g_k, #g_s], iterator_types = ["parallel", "parallel", "parallel", "parallel", "reduction"]}
      ins(%q, %k : tensor<1x8x64x128xf16>, tensor<1x2x64x128xf16>) outs(%s_zero : tensor<1x8x64x64xf16>) {
  ^bb0(%a: f16, %b: f16, %acc: f16):
    %m = arith.mulf %a, %b : f16
    %r = arith.addf %acc, %m : f16
    linalg.yield %r : f16
  } -> tensor<1x8x64x64xf16>
  %masked = linalg.generic {indexing_maps = [#g_id, #g_id], iterator_types = ["parallel", "parallel", "parallel", "parallel"]}
      ins(%s : tensor<1x8x64x64xf16>) outs(%s_init : tensor<1x8x64x64xf16>) {
  ^bb0(%in: f16, %out: f16):
    %i = linalg.index 2 : index
    %j = linalg.index 3 : index
    %visible = arith.cmpi ule, %j, %i : index
    %r = arith.select %visible, %in, %ninf : f16
    linalg.yield %r : f16
  } -> tensor<1x8x64x64xf16>
  %scaled = linalg.generic {indexing_maps = [#g_id, #g_id], iterator_types = ["parallel", "parallel", "parallel", "parallel"]}
      ins(%masked : tensor<1x8x64x64xf16>) outs(%s_init : tensor<1x8x64x64xf16>) {
  ^bb0(%in: f16, %out: f16):
    %r = arith.divf %in, %sqrt_d : f16
    linalg.yield %r : f16
  } -> tensor<1x8x64x64xf16>
  %p = linalg.softmax dimension(3) ins(%scaled : tensor<1x8x64x64xf16>) outs(%s_init : tensor<1x8x64x64xf16>) -> tensor<1x8x64x64xf16>
  %o_init = tensor.empty() : tensor<1x8x64x128xf16>
  %o_zero = linalg.fill ins(%zero : f16) outs(%o_init : tensor<1x8x64x128xf16>) -> tensor<1x8x64x128xf16>
  %o = linalg.generic {indexing_maps = [#g_p, #g_v, #g_o], iterator_types = ["parallel", "parallel", "parallel", "parallel", "reduction"]}
      ins(%p, %v : tensor<1x8x64x64xf16>, tensor<1x2x64x128xf16>) outs(%o_zero : tensor<1x8x64x128xf16>) {
  ^bb0(%a: f16, %b: f16, %acc: f16):
    %m = arith.mulf %a, %b : f16
    %r = arith.addf %acc, %m : f16
    linalg.yield %r : f16
  } -> tensor<1x8x64x128xf16>
  return %o : tensor<1x8x64x128xf16>
}

// -----

// torch's repeat_interleave of K/V heads (expand + reshape: linalg.broadcast
// to [B, Hkv, G, N, D] collapsed back), a boolean causal mask applied with
// select (torch.where(mask, s, -inf), mask broadcast from [N, N]), the
// decomposed softmax over the last of 4 dims. The repeat is undone:
// fa.attention reads the 2 key/value heads directly.
// CHECK-LABEL: func @gqa_repeat_bool_mask
// CHECK-SAME: (%[[Q:.*]]: tensor<1x4x4x64xf32>, %[[K:.*]]: tensor<1x2x4x64xf32>, %[[V:.*]]: tensor<1x2x4x64xf32>)
// CHECK: fa.attention %[[Q]], %[[K]], %[[V]] {causal, scale = 1.250000e-01 : f32} : tensor<1x4x4x64xf32>, tensor<1x2x4x64xf32>, tensor<1x2x4x64xf32> -> tensor<1x4x4x64xf32>
// CHECK-NOT: linalg.softmax
#r_q = affine_map<(b, h, i, j, d) -> (b, h, i, d)>
#r_k = affine_map<(b, h, i, j, d) -> (b, h, j, d)>
#r_s = affine_map<(b, h, i, j, d) -> (b, h, i, j)>
#r_p = affine_map<(b, h, i, d, j) -> (b, h, i, j)>
#r_v = affine_map<(b, h, i, d, j) -> (b, h, j, d)>
#r_o = affine_map<(b, h, i, d, j) -> (b, h, i, d)>
#r_id = affine_map<(b, h, i, j) -> (b, h, i, j)>
#r_row = affine_map<(b, h, i, j) -> (b, h, i)>
#r_nn = affine_map<(b, h, i, j) -> (i, j)>
func.func @gqa_repeat_bool_mask(%q: tensor<1x4x4x64xf32>, %k: tensor<1x2x4x64xf32>, %v: tensor<1x2x4x64xf32>) -> tensor<1x4x4x64xf32> {
  %zero = arith.constant 0.000000e+00 : f32
  %ninf = arith.constant 0xFF800000 : f32
  %scale = arith.constant 1.250000e-01 : f32
  %mask = arith.constant dense<[[true, false, false, false], [true, true, false, false], [true, true, true, false], [true, true, true, true]]> : tensor<4x4xi1>
  %kb_init = tensor.empty() : tensor<1x2x2x4x64xf32>
  %kb = linalg.broadcast ins(%k : tensor<1x2x4x64xf32>) outs(%kb_init : tensor<1x2x2x4x64xf32>) dimensions = [2]
  %kr = tensor.collapse_shape %kb [[0], [1, 2], [3], [4]] : tensor<1x2x2x4x64xf32> into tensor<1x4x4x64xf32>
  %vb = linalg.broadcast ins(%v : tensor<1x2x4x64xf32>) outs(%kb_init : tensor<1x2x2x4x64xf32>) dimensions = [2]
  %vr = tensor.collapse_shape %vb [[0], [1, 2], [3], [4]] : tensor<1x2x2x4x64xf32> into tensor<1x4x4x64xf32>
  %s_init = tensor.empty() : tensor<1x4x4x4xf32>
  %s_zero = linalg.fill ins(%zero : f32) outs(%s_init : tensor<1x4x4x4xf32>) -> tensor<1x4x4x4xf32>
  %s = linalg.generic {indexing_maps = [#r_q, #r_k, #r_s], iterator_types = ["parallel", "parallel", "parallel", "parallel", "reduction"]}
      ins(%q, %kr : tensor<1x4x4x64xf32>, tensor<1x4x4x64xf32>) outs(%s_zero : tensor<1x4x4x4xf32>) {
  ^bb0(%a: f32, %b: f32, %acc: f32):
    %m = arith.mulf %a, %b : f32
    %r = arith.addf %acc, %m : f32
    linalg.yield %r : f32
  } -> tensor<1x4x4x4xf32>
  %scaled = linalg.generic {indexing_maps = [#r_id, #r_id], iterator_types = ["parallel", "parallel", "parallel", "parallel"]}
      ins(%s : tensor<1x4x4x4xf32>) outs(%s_init : tensor<1x4x4x4xf32>) {
  ^bb0(%in: f32, %out: f32):
    %m = arith.mulf %in, %scale : f32
    linalg.yield %m : f32
  } -> tensor<1x4x4x4xf32>
  %masked = linalg.generic {indexing_maps = [#r_id, #r_nn, #r_id], iterator_types = ["parallel", "parallel", "parallel", "parallel"]}
      ins(%scaled, %mask : tensor<1x4x4x4xf32>, tensor<4x4xi1>) outs(%s_init : tensor<1x4x4x4xf32>) {
  ^bb0(%in: f32, %keep: i1, %out: f32):
    %r = arith.select %keep, %in, %ninf : f32
    linalg.yield %r : f32
  } -> tensor<1x4x4x4xf32>
  %row_init = tensor.empty() : tensor<1x4x4xf32>
  %row_ninf = linalg.fill ins(%ninf : f32) outs(%row_init : tensor<1x4x4xf32>) -> tensor<1x4x4xf32>
  %max = linalg.reduce ins(%masked : tensor<1x4x4x4xf32>) outs(%row_ninf : tensor<1x4x4xf32>) dimensions = [3]
    (%in: f32, %acc: f32) {
      %r = arith.maxnumf %in, %acc : f32
      linalg.yield %r : f32
    }
  %e = linalg.generic {indexing_maps = [#r_id, #r_row, #r_id], iterator_types = ["parallel", "parallel", "parallel", "parallel"]}
      ins(%masked, %max : tensor<1x4x4x4xf32>, tensor<1x4x4xf32>) outs(%s_init : tensor<1x4x4x4xf32>) {
  ^bb0(%in: f32, %m: f32, %out: f32):
    %d = arith.subf %in, %m : f32
    %x = math.exp %d : f32
    linalg.yield %x : f32
  } -> tensor<1x4x4x4xf32>
  %row_zero = linalg.fill ins(%zero : f32) outs(%row_init : tensor<1x4x4xf32>) -> tensor<1x4x4xf32>
  %sum = linalg.reduce ins(%e : tensor<1x4x4x4xf32>) outs(%row_zero : tensor<1x4x4xf32>) dimensions = [3]
    (%in: f32, %acc: f32) {
      %r = arith.addf %in, %acc : f32
      linalg.yield %r : f32
    }
  %p = linalg.generic {indexing_maps = [#r_id, #r_row, #r_id], iterator_types = ["parallel", "parallel", "parallel", "parallel"]}
      ins(%e, %sum : tensor<1x4x4x4xf32>, tensor<1x4x4xf32>) outs(%s_init : tensor<1x4x4x4xf32>) {
  ^bb0(%in: f32, %l: f32, %out: f32):
    %r = arith.divf %in, %l : f32
    linalg.yield %r : f32
  } -> tensor<1x4x4x4xf32>
  %o_init = tensor.empty() : tensor<1x4x4x64xf32>
  %o_zero = linalg.fill ins(%zero : f32) outs(%o_init : tensor<1x4x4x64xf32>) -> tensor<1x4x4x64xf32>
  %o = linalg.generic {indexing_maps = [#r_p, #r_v, #r_o], iterator_types = ["parallel", "parallel", "parallel", "parallel", "reduction"]}
      ins(%p, %vr : tensor<1x4x4x4xf32>, tensor<1x4x4x64xf32>) outs(%o_zero : tensor<1x4x4x64xf32>) {
  ^bb0(%a: f32, %b: f32, %acc: f32):
    %m = arith.mulf %a, %b : f32
    %r = arith.addf %acc, %m : f32
    linalg.yield %r : f32
  } -> tensor<1x4x4x64xf32>
  return %o : tensor<1x4x4x64xf32>
}

// -----

// Must not fire: a strictly-lower mask (key < query) hides the diagonal,
// which fa.attention's causal mask keeps.
// CHECK-LABEL: func @strict_select_mask
// CHECK-NOT: fa.attention
// CHECK: linalg.softmax
#s_q = affine_map<(b, h, i, j, d) -> (b, h, i, d)>
#s_k = affine_map<(b, h, i, j, d) -> (b, h, j, d)>
#s_s = affine_map<(b, h, i, j, d) -> (b, h, i, j)>
#s_p = affine_map<(b, h, i, d, j) -> (b, h, i, j)>
#s_v = affine_map<(b, h, i, d, j) -> (b, h, j, d)>
#s_o = affine_map<(b, h, i, d, j) -> (b, h, i, d)>
#s_id = affine_map<(b, h, i, j) -> (b, h, i, j)>
func.func @strict_select_mask(%q: tensor<1x2x8x64xf32>, %k: tensor<1x2x8x64xf32>, %v: tensor<1x2x8x64xf32>) -> tensor<1x2x8x64xf32> {
  %zero_f = arith.constant 0.000000e+00 : f32
  %zero = arith.constant 0.000000e+00 : f32
  %ninf = arith.constant 0xFF800000 : f32
  %s_init = tensor.empty() : tensor<1x2x8x8xf32>
  %s_zero = linalg.fill ins(%zero_f : f32) outs(%s_init : tensor<1x2x8x8xf32>) -> tensor<1x2x8x8xf32>
  %s = linalg.generic {indexing_maps = [#s_q, #s_k, #s_s], iterator_types = ["parallel", "parallel", "parallel", "parallel", "reduction"]}
      ins(%q, %k : tensor<1x2x8x64xf32>, tensor<1x2x8x64xf32>) outs(%s_zero : tensor<1x2x8x8xf32>) {
  ^bb0(%a: f32, %b: f32, %acc: f32):
    %m = arith.mulf %a, %b : f32
    %r = arith.addf %acc, %m : f32
    linalg.yield %r : f32
  } -> tensor<1x2x8x8xf32>
  %masked = linalg.generic {indexing_maps = [#s_id, #s_id], iterator_types = ["parallel", "parallel", "parallel", "parallel"]}
      ins(%s : tensor<1x2x8x8xf32>) outs(%s_init : tensor<1x2x8x8xf32>) {
  ^bb0(%in: f32, %out: f32):
    %i = linalg.index 2 : index
    %j = linalg.index 3 : index
    %visible = arith.cmpi ult, %j, %i : index
    %r = arith.select %visible, %in, %ninf : f32
    linalg.yield %r : f32
  } -> tensor<1x2x8x8xf32>
  %p = linalg.softmax dimension(3) ins(%masked : tensor<1x2x8x8xf32>) outs(%s_init : tensor<1x2x8x8xf32>) -> tensor<1x2x8x8xf32>
  %o_init = tensor.empty() : tensor<1x2x8x64xf32>
  %o_zero = linalg.fill ins(%zero_f : f32) outs(%o_init : tensor<1x2x8x64xf32>) -> tensor<1x2x8x64xf32>
  // expected-remark @+1 {{not raised: the mask is not causal or a window: visible where j - i <= -1}}
  %o = linalg.generic {indexing_maps = [#s_p, #s_v, #s_o], iterator_types = ["parallel", "parallel", "parallel", "parallel", "reduction"]}
      ins(%p, %v : tensor<1x2x8x8xf32>, tensor<1x2x8x64xf32>) outs(%o_zero : tensor<1x2x8x64xf32>) {
  ^bb0(%a: f32, %b: f32, %acc: f32):
    %m = arith.mulf %a, %b : f32
    %r = arith.addf %acc, %m : f32
    linalg.yield %r : f32
  } -> tensor<1x2x8x64xf32>
  return %o : tensor<1x2x8x64xf32>
}

// -----

// The einsum reads its K operand as [.., D, Nk] ((b, h, d, j)): the
// argument is K^T, so fa.attention gets it transposed back.
// CHECK-LABEL: func @einsum_k_transposed
// CHECK-SAME: (%[[Q:.*]]: tensor<1x2x8x8xf32>, %[[KT:.*]]: tensor<1x2x8x8xf32>, %[[V:.*]]: tensor<1x2x8x8xf32>)
// CHECK: %[[K:.*]] = linalg.transpose ins(%[[KT]] : tensor<1x2x8x8xf32>) outs(%{{.*}} : tensor<1x2x8x8xf32>) permutation = [0, 1, 3, 2]
// CHECK: fa.attention %[[Q]], %[[K]], %[[V]] {scale = 1.000000e+00 : f32}
#w_q = affine_map<(b, h, i, j, d) -> (b, h, i, d)>
#w_k = affine_map<(b, h, i, j, d) -> (b, h, d, j)>
#w_s = affine_map<(b, h, i, j, d) -> (b, h, i, j)>
#w_p = affine_map<(b, h, i, d, j) -> (b, h, i, j)>
#w_v = affine_map<(b, h, i, d, j) -> (b, h, j, d)>
#w_o = affine_map<(b, h, i, d, j) -> (b, h, i, d)>
func.func @einsum_k_transposed(%q: tensor<1x2x8x8xf32>, %k: tensor<1x2x8x8xf32>, %v: tensor<1x2x8x8xf32>) -> tensor<1x2x8x8xf32> {
  %zero_f = arith.constant 0.000000e+00 : f32
  %s_init = tensor.empty() : tensor<1x2x8x8xf32>
  %zero = linalg.fill ins(%zero_f : f32) outs(%s_init : tensor<1x2x8x8xf32>) -> tensor<1x2x8x8xf32>
  %s = linalg.generic {indexing_maps = [#w_q, #w_k, #w_s], iterator_types = ["parallel", "parallel", "parallel", "parallel", "reduction"]}
      ins(%q, %k : tensor<1x2x8x8xf32>, tensor<1x2x8x8xf32>) outs(%zero : tensor<1x2x8x8xf32>) {
  ^bb0(%a: f32, %b: f32, %acc: f32):
    %m = arith.mulf %a, %b : f32
    %r = arith.addf %acc, %m : f32
    linalg.yield %r : f32
  } -> tensor<1x2x8x8xf32>
  %p = linalg.softmax dimension(3) ins(%s : tensor<1x2x8x8xf32>) outs(%s_init : tensor<1x2x8x8xf32>) -> tensor<1x2x8x8xf32>
  %o = linalg.generic {indexing_maps = [#w_p, #w_v, #w_o], iterator_types = ["parallel", "parallel", "parallel", "parallel", "reduction"]}
      ins(%p, %v : tensor<1x2x8x8xf32>, tensor<1x2x8x8xf32>) outs(%zero : tensor<1x2x8x8xf32>) {
  ^bb0(%a: f32, %b: f32, %acc: f32):
    %m = arith.mulf %a, %b : f32
    %r = arith.addf %acc, %m : f32
    linalg.yield %r : f32
  } -> tensor<1x2x8x8xf32>
  return %o : tensor<1x2x8x8xf32>
}

// -----

// Must not fire: the einsum reads K at the query position i, not at a key
// position: not Q K^T.
// CHECK-LABEL: func @einsum_wrong_contraction
// CHECK-NOT: fa.attention
#w_q2 = affine_map<(b, h, i, j, d) -> (b, h, i, d)>
#w_k2 = affine_map<(b, h, i, j, d) -> (b, h, i, d)>
#w_s2 = affine_map<(b, h, i, j, d) -> (b, h, i, j)>
#w_p2 = affine_map<(b, h, i, d, j) -> (b, h, i, j)>
#w_v2 = affine_map<(b, h, i, d, j) -> (b, h, j, d)>
#w_o2 = affine_map<(b, h, i, d, j) -> (b, h, i, d)>
func.func @einsum_wrong_contraction(%q: tensor<1x2x8x8xf32>, %k: tensor<1x2x8x8xf32>, %v: tensor<1x2x8x8xf32>) -> tensor<1x2x8x8xf32> {
  %zero_f = arith.constant 0.000000e+00 : f32
  %s_init = tensor.empty() : tensor<1x2x8x8xf32>
  %zero = linalg.fill ins(%zero_f : f32) outs(%s_init : tensor<1x2x8x8xf32>) -> tensor<1x2x8x8xf32>
  %s = linalg.generic {indexing_maps = [#w_q2, #w_k2, #w_s2], iterator_types = ["parallel", "parallel", "parallel", "parallel", "reduction"]}
      ins(%q, %k : tensor<1x2x8x8xf32>, tensor<1x2x8x8xf32>) outs(%zero : tensor<1x2x8x8xf32>) {
  ^bb0(%a: f32, %b: f32, %acc: f32):
    %m = arith.mulf %a, %b : f32
    %r = arith.addf %acc, %m : f32
    linalg.yield %r : f32
  } -> tensor<1x2x8x8xf32>
  %p = linalg.softmax dimension(3) ins(%s : tensor<1x2x8x8xf32>) outs(%s_init : tensor<1x2x8x8xf32>) -> tensor<1x2x8x8xf32>
  // expected-remark @+1 {{not raised: Q K^T does not contract the right operand over the reduced dim, with the left's batch dims}}
  %o = linalg.generic {indexing_maps = [#w_p2, #w_v2, #w_o2], iterator_types = ["parallel", "parallel", "parallel", "parallel", "reduction"]}
      ins(%p, %v : tensor<1x2x8x8xf32>, tensor<1x2x8x8xf32>) outs(%zero : tensor<1x2x8x8xf32>) {
  ^bb0(%a: f32, %b: f32, %acc: f32):
    %m = arith.mulf %a, %b : f32
    %r = arith.addf %acc, %m : f32
    linalg.yield %r : f32
  } -> tensor<1x2x8x8xf32>
  return %o : tensor<1x2x8x8xf32>
}

// -----

// Must not fire: Q K^T accumulated into a bias (not zero) is scores plus a
// bias, not attention's scores.
// CHECK-LABEL: func @scores_plus_bias
// CHECK-NOT: fa.attention
// CHECK: linalg.softmax
func.func @scores_plus_bias(%q: tensor<2x4x64xf32>, %k: tensor<2x4x64xf32>, %v: tensor<2x4x64xf32>, %bias: tensor<2x4x4xf32>) -> tensor<2x4x64xf32> {
  %cst = arith.constant 0.000000e+00 : f32
  %kt_init = tensor.empty() : tensor<2x64x4xf32>
  %kt = linalg.transpose ins(%k : tensor<2x4x64xf32>) outs(%kt_init : tensor<2x64x4xf32>) permutation = [0, 2, 1]
  %s = linalg.batch_matmul ins(%q, %kt : tensor<2x4x64xf32>, tensor<2x64x4xf32>) outs(%bias : tensor<2x4x4xf32>) -> tensor<2x4x4xf32>
  %s_init = tensor.empty() : tensor<2x4x4xf32>
  %p = linalg.softmax dimension(2) ins(%s : tensor<2x4x4xf32>) outs(%s_init : tensor<2x4x4xf32>) -> tensor<2x4x4xf32>
  %o_init = tensor.empty() : tensor<2x4x64xf32>
  %o_zero = linalg.fill ins(%cst : f32) outs(%o_init : tensor<2x4x64xf32>) -> tensor<2x4x64xf32>
  // expected-remark @+1 {{not raised: Q K^T does not accumulate from zero (a bias?)}}
  %o = linalg.batch_matmul ins(%p, %v : tensor<2x4x4xf32>, tensor<2x4x64xf32>) outs(%o_zero : tensor<2x4x64xf32>) -> tensor<2x4x64xf32>
  return %o : tensor<2x4x64xf32>
}

// -----

// Must not fire: "softmax plus one" (the row sum starts at 1: exp(x - m) /
// (1 + sum)) is not a softmax.
// CHECK-LABEL: func @softmax_plus_one
// CHECK-NOT: fa.attention
#sp_id = affine_map<(d0, d1, d2) -> (d0, d1, d2)>
#sp_row = affine_map<(d0, d1, d2) -> (d0, d1)>
func.func @softmax_plus_one(%q: tensor<2x4x64xf32>, %k: tensor<2x4x64xf32>, %v: tensor<2x4x64xf32>) -> tensor<2x4x64xf32> {
  %cst = arith.constant 0.000000e+00 : f32
  %one = arith.constant 1.000000e+00 : f32
  %ninf = arith.constant 0xFF800000 : f32
  %kt_init = tensor.empty() : tensor<2x64x4xf32>
  %kt = linalg.transpose ins(%k : tensor<2x4x64xf32>) outs(%kt_init : tensor<2x64x4xf32>) permutation = [0, 2, 1]
  %s_init = tensor.empty() : tensor<2x4x4xf32>
  %s_zero = linalg.fill ins(%cst : f32) outs(%s_init : tensor<2x4x4xf32>) -> tensor<2x4x4xf32>
  %s = linalg.batch_matmul ins(%q, %kt : tensor<2x4x64xf32>, tensor<2x64x4xf32>) outs(%s_zero : tensor<2x4x4xf32>) -> tensor<2x4x4xf32>
  %row_init = tensor.empty() : tensor<2x4xf32>
  %m_fill = linalg.fill ins(%ninf : f32) outs(%row_init : tensor<2x4xf32>) -> tensor<2x4xf32>
  %m = linalg.reduce ins(%s : tensor<2x4x4xf32>) outs(%m_fill : tensor<2x4xf32>) dimensions = [2]
    (%in: f32, %acc: f32) {
      %r = arith.maximumf %in, %acc : f32
      linalg.yield %r : f32
    }
  %e = linalg.generic {indexing_maps = [#sp_id, #sp_row, #sp_id], iterator_types = ["parallel", "parallel", "parallel"]}
      ins(%s, %m : tensor<2x4x4xf32>, tensor<2x4xf32>) outs(%s_init : tensor<2x4x4xf32>) {
  ^bb0(%a: f32, %b: f32, %out: f32):
    %d = arith.subf %a, %b : f32
    %y = math.exp %d : f32
    linalg.yield %y : f32
  } -> tensor<2x4x4xf32>
  %l_fill = linalg.fill ins(%one : f32) outs(%row_init : tensor<2x4xf32>) -> tensor<2x4xf32>
  %l = linalg.reduce ins(%e : tensor<2x4x4xf32>) outs(%l_fill : tensor<2x4xf32>) dimensions = [2]
    (%in: f32, %acc: f32) {
      %r = arith.addf %in, %acc : f32
      linalg.yield %r : f32
    }
  %p = linalg.generic {indexing_maps = [#sp_id, #sp_row, #sp_id], iterator_types = ["parallel", "parallel", "parallel"]}
      ins(%e, %l : tensor<2x4x4xf32>, tensor<2x4xf32>) outs(%s_init : tensor<2x4x4xf32>) {
  ^bb0(%a: f32, %b: f32, %out: f32):
    %r = arith.divf %a, %b : f32
    linalg.yield %r : f32
  } -> tensor<2x4x4xf32>
  %o_init = tensor.empty() : tensor<2x4x64xf32>
  %o_zero = linalg.fill ins(%cst : f32) outs(%o_init : tensor<2x4x64xf32>) -> tensor<2x4x64xf32>
  // expected-remark @+1 {{not raised: the softmax's denominator is not the row sum of its numerator over the keys, from zero}}
  %o = linalg.batch_matmul ins(%p, %v : tensor<2x4x4xf32>, tensor<2x4x64xf32>) outs(%o_zero : tensor<2x4x64xf32>) -> tensor<2x4x64xf32>
  return %o : tensor<2x4x64xf32>
}

// -----

// torch-mlir's decomposition of softmax keeps the reduced dim: the row max
// and sum are [B, H, N, 1], written and read through (b, h, i, 0).
// CHECK-LABEL: func @keepdim_softmax
// CHECK: fa.attention %{{.*}}, %{{.*}}, %{{.*}} {scale = 1.250000e-01 : f32} : tensor<1x2x8x64xf32>, tensor<1x2x8x64xf32>, tensor<1x2x8x64xf32> -> tensor<1x2x8x64xf32>
// CHECK-NOT: linalg.generic
#kd_q = affine_map<(b, h, i, j, d) -> (b, h, i, d)>
#kd_k = affine_map<(b, h, i, j, d) -> (b, h, j, d)>
#kd_s = affine_map<(b, h, i, j, d) -> (b, h, i, j)>
#kd_p = affine_map<(b, h, i, d, j) -> (b, h, i, j)>
#kd_v = affine_map<(b, h, i, d, j) -> (b, h, j, d)>
#kd_o = affine_map<(b, h, i, d, j) -> (b, h, i, d)>
#kd_id = affine_map<(b, h, i, j) -> (b, h, i, j)>
#kd_row = affine_map<(b, h, i, j) -> (b, h, i, 0)>
func.func @keepdim_softmax(%q: tensor<1x2x8x64xf32>, %k: tensor<1x2x8x64xf32>, %v: tensor<1x2x8x64xf32>) -> tensor<1x2x8x64xf32> {
  %zero = arith.constant 0.000000e+00 : f32
  %ninf = arith.constant 0xFF800000 : f32
  %scale = arith.constant 1.250000e-01 : f32
  %s_init = tensor.empty() : tensor<1x2x8x8xf32>
  %s_zero = linalg.fill ins(%zero : f32) outs(%s_init : tensor<1x2x8x8xf32>) -> tensor<1x2x8x8xf32>
  %s = linalg.generic {indexing_maps = [#kd_q, #kd_k, #kd_s], iterator_types = ["parallel", "parallel", "parallel", "parallel", "reduction"]}
      ins(%q, %k : tensor<1x2x8x64xf32>, tensor<1x2x8x64xf32>) outs(%s_zero : tensor<1x2x8x8xf32>) {
  ^bb0(%a: f32, %b: f32, %acc: f32):
    %m = arith.mulf %a, %b : f32
    %r = arith.addf %acc, %m : f32
    linalg.yield %r : f32
  } -> tensor<1x2x8x8xf32>
  %x = linalg.generic {indexing_maps = [#kd_id, #kd_id], iterator_types = ["parallel", "parallel", "parallel", "parallel"]}
      ins(%s : tensor<1x2x8x8xf32>) outs(%s_init : tensor<1x2x8x8xf32>) {
  ^bb0(%in: f32, %out: f32):
    %r = arith.mulf %in, %scale : f32
    linalg.yield %r : f32
  } -> tensor<1x2x8x8xf32>
  %row_init = tensor.empty() : tensor<1x2x8x1xf32>
  %m_fill = linalg.fill ins(%ninf : f32) outs(%row_init : tensor<1x2x8x1xf32>) -> tensor<1x2x8x1xf32>
  %mx = linalg.generic {indexing_maps = [#kd_id, #kd_row], iterator_types = ["parallel", "parallel", "parallel", "reduction"]}
      ins(%x : tensor<1x2x8x8xf32>) outs(%m_fill : tensor<1x2x8x1xf32>) {
  ^bb0(%in: f32, %acc: f32):
    %r = arith.maximumf %in, %acc : f32
    linalg.yield %r : f32
  } -> tensor<1x2x8x1xf32>
  %e = linalg.generic {indexing_maps = [#kd_id, #kd_row, #kd_id], iterator_types = ["parallel", "parallel", "parallel", "parallel"]}
      ins(%x, %mx : tensor<1x2x8x8xf32>, tensor<1x2x8x1xf32>) outs(%s_init : tensor<1x2x8x8xf32>) {
  ^bb0(%a: f32, %b: f32, %out: f32):
    %d = arith.subf %a, %b : f32
    %y = math.exp %d : f32
    linalg.yield %y : f32
  } -> tensor<1x2x8x8xf32>
  %l_fill = linalg.fill ins(%zero : f32) outs(%row_init : tensor<1x2x8x1xf32>) -> tensor<1x2x8x1xf32>
  %l = linalg.generic {indexing_maps = [#kd_id, #kd_row], iterator_types = ["parallel", "parallel", "parallel", "reduction"]}
      ins(%e : tensor<1x2x8x8xf32>) outs(%l_fill : tensor<1x2x8x1xf32>) {
  ^bb0(%in: f32, %acc: f32):
    %r = arith.addf %in, %acc : f32
    linalg.yield %r : f32
  } -> tensor<1x2x8x1xf32>
  %p = linalg.generic {indexing_maps = [#kd_id, #kd_row, #kd_id], iterator_types = ["parallel", "parallel", "parallel", "parallel"]}
      ins(%e, %l : tensor<1x2x8x8xf32>, tensor<1x2x8x1xf32>) outs(%s_init : tensor<1x2x8x8xf32>) {
  ^bb0(%a: f32, %b: f32, %out: f32):
    %r = arith.divf %a, %b : f32
    linalg.yield %r : f32
  } -> tensor<1x2x8x8xf32>
  %o_init = tensor.empty() : tensor<1x2x8x64xf32>
  %o_zero = linalg.fill ins(%zero : f32) outs(%o_init : tensor<1x2x8x64xf32>) -> tensor<1x2x8x64xf32>
  %o = linalg.generic {indexing_maps = [#kd_p, #kd_v, #kd_o], iterator_types = ["parallel", "parallel", "parallel", "parallel", "reduction"]}
      ins(%p, %v : tensor<1x2x8x8xf32>, tensor<1x2x8x64xf32>) outs(%o_zero : tensor<1x2x8x64xf32>) {
  ^bb0(%a: f32, %b: f32, %acc: f32):
    %m = arith.mulf %a, %b : f32
    %r = arith.addf %acc, %m : f32
    linalg.yield %r : f32
  } -> tensor<1x2x8x64xf32>
  return %o : tensor<1x2x8x64xf32>
}
