// fa-raise-attention on the forms front ends emit (torch-mlir, torch.export
// of Hugging Face models, StableHLO -> linalg), each with a near miss that
// must not be raised and gets a remark saying why.
// RUN: fa-opt %s --split-input-file --fa-raise-attention | FileCheck %s
// RUN: fa-opt %s --split-input-file --fa-raise-attention --verify-diagnostics -o /dev/null

// Mixed precision as torch's eager attention writes it (HF Llama:
// softmax(s, dtype=float32).to(q.dtype)): f16 scores converted to f32 by
// arith.extf, the scale and the decomposed softmax in f32, P converted back
// to f16 by arith.truncf. The raised op keeps the f16 inputs and output; the
// kernel accumulates in f32.
// CHECK-LABEL: func @mixed_extf_truncf
// CHECK: fa.attention %{{.*}}, %{{.*}}, %{{.*}} {scale = 1.250000e-01 : f32} : tensor<1x2x8x64xf16>, tensor<1x2x8x64xf16>, tensor<1x2x8x64xf16> -> tensor<1x2x8x64xf16>
// CHECK-NOT: linalg.generic
func.func @mixed_extf_truncf(%q: tensor<2x8x64xf16>, %k: tensor<2x8x64xf16>, %v: tensor<2x8x64xf16>) -> tensor<2x8x64xf16> {
  %e1 = tensor.empty() : tensor<2x64x8xf16>
  %t2 = linalg.transpose ins(%k : tensor<2x8x64xf16>) outs(%e1 : tensor<2x64x8xf16>) permutation = [0, 2, 1]
  %zc3 = arith.constant 0.000000e+00 : f16
  %e4 = tensor.empty() : tensor<2x8x8xf16>
  %z5 = linalg.fill ins(%zc3 : f16) outs(%e4 : tensor<2x8x8xf16>) -> tensor<2x8x8xf16>
  %mm6 = linalg.batch_matmul ins(%q, %t2 : tensor<2x8x64xf16>, tensor<2x64x8xf16>) outs(%z5 : tensor<2x8x8xf16>) -> tensor<2x8x8xf16>
  %e7 = tensor.empty() : tensor<2x8x8xf32>
  %g8 = linalg.generic {indexing_maps = [affine_map<(d0, d1, d2) -> (d0, d1, d2)>, affine_map<(d0, d1, d2) -> (d0, d1, d2)>], iterator_types = ["parallel", "parallel", "parallel"]}
      ins(%mm6 : tensor<2x8x8xf16>) outs(%e7 : tensor<2x8x8xf32>) {
    ^bb0(%a0: f16, %out: f32):
    %r = arith.extf %a0 : f16 to f32
      linalg.yield %r : f32
    } -> tensor<2x8x8xf32>
  %s649 = arith.constant 1.250000e-01 : f64
  %e10 = tensor.empty() : tensor<2x8x8xf32>
  %g11 = linalg.generic {indexing_maps = [affine_map<(d0, d1, d2) -> (d0, d1, d2)>, affine_map<(d0, d1, d2) -> (d0, d1, d2)>], iterator_types = ["parallel", "parallel", "parallel"]}
      ins(%g8 : tensor<2x8x8xf32>) outs(%e10 : tensor<2x8x8xf32>) {
    ^bb0(%a0: f32, %out: f32):
    %c = arith.truncf %s649 : f64 to f32
    %r = arith.mulf %a0, %c : f32
      linalg.yield %r : f32
    } -> tensor<2x8x8xf32>
  %ninf12 = arith.constant 0xFF800000 : f32
  %e13 = tensor.empty() : tensor<2x8x1xf32>
  %mf14 = linalg.fill ins(%ninf12 : f32) outs(%e13 : tensor<2x8x1xf32>) -> tensor<2x8x1xf32>
  %g15 = linalg.generic {indexing_maps = [affine_map<(d0, d1, d2) -> (d0, d1, d2)>, affine_map<(d0, d1, d2) -> (d0, d1, 0)>], iterator_types = ["parallel", "parallel", "reduction"]}
      ins(%g11 : tensor<2x8x8xf32>) outs(%mf14 : tensor<2x8x1xf32>) {
    ^bb0(%a0: f32, %out: f32):
    %r = arith.maximumf %a0, %out : f32
      linalg.yield %r : f32
    } -> tensor<2x8x1xf32>
  %e16 = tensor.empty() : tensor<2x8x8xf32>
  %g17 = linalg.generic {indexing_maps = [affine_map<(d0, d1, d2) -> (d0, d1, d2)>, affine_map<(d0, d1, d2) -> (d0, d1, 0)>, affine_map<(d0, d1, d2) -> (d0, d1, d2)>], iterator_types = ["parallel", "parallel", "parallel"]}
      ins(%g11, %g15 : tensor<2x8x8xf32>, tensor<2x8x1xf32>) outs(%e16 : tensor<2x8x8xf32>) {
    ^bb0(%a0: f32, %a1: f32, %out: f32):
    %r = arith.subf %a0, %a1 : f32
      linalg.yield %r : f32
    } -> tensor<2x8x8xf32>
  %e18 = tensor.empty() : tensor<2x8x8xf32>
  %g19 = linalg.generic {indexing_maps = [affine_map<(d0, d1, d2) -> (d0, d1, d2)>, affine_map<(d0, d1, d2) -> (d0, d1, d2)>], iterator_types = ["parallel", "parallel", "parallel"]}
      ins(%g17 : tensor<2x8x8xf32>) outs(%e18 : tensor<2x8x8xf32>) {
    ^bb0(%a0: f32, %out: f32):
    %r = math.exp %a0 : f32
      linalg.yield %r : f32
    } -> tensor<2x8x8xf32>
  %zc20 = arith.constant 0.000000e+00 : f32
  %e21 = tensor.empty() : tensor<2x8x1xf32>
  %z22 = linalg.fill ins(%zc20 : f32) outs(%e21 : tensor<2x8x1xf32>) -> tensor<2x8x1xf32>
  %g23 = linalg.generic {indexing_maps = [affine_map<(d0, d1, d2) -> (d0, d1, d2)>, affine_map<(d0, d1, d2) -> (d0, d1, 0)>], iterator_types = ["parallel", "parallel", "reduction"]}
      ins(%g19 : tensor<2x8x8xf32>) outs(%z22 : tensor<2x8x1xf32>) {
    ^bb0(%a0: f32, %out: f32):
    %r = arith.addf %a0, %out : f32
      linalg.yield %r : f32
    } -> tensor<2x8x1xf32>
  %e24 = tensor.empty() : tensor<2x8x8xf32>
  %g25 = linalg.generic {indexing_maps = [affine_map<(d0, d1, d2) -> (d0, d1, d2)>, affine_map<(d0, d1, d2) -> (d0, d1, 0)>, affine_map<(d0, d1, d2) -> (d0, d1, d2)>], iterator_types = ["parallel", "parallel", "parallel"]}
      ins(%g19, %g23 : tensor<2x8x8xf32>, tensor<2x8x1xf32>) outs(%e24 : tensor<2x8x8xf32>) {
    ^bb0(%a0: f32, %a1: f32, %out: f32):
    %r = arith.divf %a0, %a1 : f32
      linalg.yield %r : f32
    } -> tensor<2x8x8xf32>
  %e26 = tensor.empty() : tensor<2x8x8xf16>
  %g27 = linalg.generic {indexing_maps = [affine_map<(d0, d1, d2) -> (d0, d1, d2)>, affine_map<(d0, d1, d2) -> (d0, d1, d2)>], iterator_types = ["parallel", "parallel", "parallel"]}
      ins(%g25 : tensor<2x8x8xf32>) outs(%e26 : tensor<2x8x8xf16>) {
    ^bb0(%a0: f32, %out: f16):
    %r = arith.truncf %a0 : f32 to f16
      linalg.yield %r : f16
    } -> tensor<2x8x8xf16>
  %zc28 = arith.constant 0.000000e+00 : f16
  %e29 = tensor.empty() : tensor<2x8x64xf16>
  %z30 = linalg.fill ins(%zc28 : f16) outs(%e29 : tensor<2x8x64xf16>) -> tensor<2x8x64xf16>
  %mm31 = linalg.batch_matmul ins(%g27, %v : tensor<2x8x8xf16>, tensor<2x8x64xf16>) outs(%z30 : tensor<2x8x64xf16>) -> tensor<2x8x64xf16>
  return %mm31 : tensor<2x8x64xf16>
}

// -----

// Must not fire: P V accumulates f16 x f16 into an f32 O that is returned
// as f32; fa.attention writes O in f16, which would round it.
// CHECK-LABEL: func @mixed_o_kept_f32
// CHECK-NOT: fa.attention
func.func @mixed_o_kept_f32(%q: tensor<2x8x64xf16>, %k: tensor<2x8x64xf16>, %v: tensor<2x8x64xf16>) -> tensor<2x8x64xf32> {
  %e1 = tensor.empty() : tensor<2x64x8xf16>
  %t2 = linalg.transpose ins(%k : tensor<2x8x64xf16>) outs(%e1 : tensor<2x64x8xf16>) permutation = [0, 2, 1]
  %zc3 = arith.constant 0.000000e+00 : f16
  %e4 = tensor.empty() : tensor<2x8x8xf16>
  %z5 = linalg.fill ins(%zc3 : f16) outs(%e4 : tensor<2x8x8xf16>) -> tensor<2x8x8xf16>
  %mm6 = linalg.batch_matmul ins(%q, %t2 : tensor<2x8x64xf16>, tensor<2x64x8xf16>) outs(%z5 : tensor<2x8x8xf16>) -> tensor<2x8x8xf16>
  %e7 = tensor.empty() : tensor<2x8x8xf32>
  %g8 = linalg.generic {indexing_maps = [affine_map<(d0, d1, d2) -> (d0, d1, d2)>, affine_map<(d0, d1, d2) -> (d0, d1, d2)>], iterator_types = ["parallel", "parallel", "parallel"]}
      ins(%mm6 : tensor<2x8x8xf16>) outs(%e7 : tensor<2x8x8xf32>) {
    ^bb0(%a0: f16, %out: f32):
    %r = arith.extf %a0 : f16 to f32
      linalg.yield %r : f32
    } -> tensor<2x8x8xf32>
  %s649 = arith.constant 1.250000e-01 : f64
  %e10 = tensor.empty() : tensor<2x8x8xf32>
  %g11 = linalg.generic {indexing_maps = [affine_map<(d0, d1, d2) -> (d0, d1, d2)>, affine_map<(d0, d1, d2) -> (d0, d1, d2)>], iterator_types = ["parallel", "parallel", "parallel"]}
      ins(%g8 : tensor<2x8x8xf32>) outs(%e10 : tensor<2x8x8xf32>) {
    ^bb0(%a0: f32, %out: f32):
    %c = arith.truncf %s649 : f64 to f32
    %r = arith.mulf %a0, %c : f32
      linalg.yield %r : f32
    } -> tensor<2x8x8xf32>
  %ninf12 = arith.constant 0xFF800000 : f32
  %e13 = tensor.empty() : tensor<2x8x1xf32>
  %mf14 = linalg.fill ins(%ninf12 : f32) outs(%e13 : tensor<2x8x1xf32>) -> tensor<2x8x1xf32>
  %g15 = linalg.generic {indexing_maps = [affine_map<(d0, d1, d2) -> (d0, d1, d2)>, affine_map<(d0, d1, d2) -> (d0, d1, 0)>], iterator_types = ["parallel", "parallel", "reduction"]}
      ins(%g11 : tensor<2x8x8xf32>) outs(%mf14 : tensor<2x8x1xf32>) {
    ^bb0(%a0: f32, %out: f32):
    %r = arith.maximumf %a0, %out : f32
      linalg.yield %r : f32
    } -> tensor<2x8x1xf32>
  %e16 = tensor.empty() : tensor<2x8x8xf32>
  %g17 = linalg.generic {indexing_maps = [affine_map<(d0, d1, d2) -> (d0, d1, d2)>, affine_map<(d0, d1, d2) -> (d0, d1, 0)>, affine_map<(d0, d1, d2) -> (d0, d1, d2)>], iterator_types = ["parallel", "parallel", "parallel"]}
      ins(%g11, %g15 : tensor<2x8x8xf32>, tensor<2x8x1xf32>) outs(%e16 : tensor<2x8x8xf32>) {
    ^bb0(%a0: f32, %a1: f32, %out: f32):
    %r = arith.subf %a0, %a1 : f32
      linalg.yield %r : f32
    } -> tensor<2x8x8xf32>
  %e18 = tensor.empty() : tensor<2x8x8xf32>
  %g19 = linalg.generic {indexing_maps = [affine_map<(d0, d1, d2) -> (d0, d1, d2)>, affine_map<(d0, d1, d2) -> (d0, d1, d2)>], iterator_types = ["parallel", "parallel", "parallel"]}
      ins(%g17 : tensor<2x8x8xf32>) outs(%e18 : tensor<2x8x8xf32>) {
    ^bb0(%a0: f32, %out: f32):
    %r = math.exp %a0 : f32
      linalg.yield %r : f32
    } -> tensor<2x8x8xf32>
  %zc20 = arith.constant 0.000000e+00 : f32
  %e21 = tensor.empty() : tensor<2x8x1xf32>
  %z22 = linalg.fill ins(%zc20 : f32) outs(%e21 : tensor<2x8x1xf32>) -> tensor<2x8x1xf32>
  %g23 = linalg.generic {indexing_maps = [affine_map<(d0, d1, d2) -> (d0, d1, d2)>, affine_map<(d0, d1, d2) -> (d0, d1, 0)>], iterator_types = ["parallel", "parallel", "reduction"]}
      ins(%g19 : tensor<2x8x8xf32>) outs(%z22 : tensor<2x8x1xf32>) {
    ^bb0(%a0: f32, %out: f32):
    %r = arith.addf %a0, %out : f32
      linalg.yield %r : f32
    } -> tensor<2x8x1xf32>
  %e24 = tensor.empty() : tensor<2x8x8xf32>
  %g25 = linalg.generic {indexing_maps = [affine_map<(d0, d1, d2) -> (d0, d1, d2)>, affine_map<(d0, d1, d2) -> (d0, d1, 0)>, affine_map<(d0, d1, d2) -> (d0, d1, d2)>], iterator_types = ["parallel", "parallel", "parallel"]}
      ins(%g19, %g23 : tensor<2x8x8xf32>, tensor<2x8x1xf32>) outs(%e24 : tensor<2x8x8xf32>) {
    ^bb0(%a0: f32, %a1: f32, %out: f32):
    %r = arith.divf %a0, %a1 : f32
      linalg.yield %r : f32
    } -> tensor<2x8x8xf32>
  %e26 = tensor.empty() : tensor<2x8x8xf16>
  %g27 = linalg.generic {indexing_maps = [affine_map<(d0, d1, d2) -> (d0, d1, d2)>, affine_map<(d0, d1, d2) -> (d0, d1, d2)>], iterator_types = ["parallel", "parallel", "parallel"]}
      ins(%g25 : tensor<2x8x8xf32>) outs(%e26 : tensor<2x8x8xf16>) {
    ^bb0(%a0: f32, %out: f16):
    %r = arith.truncf %a0 : f32 to f16
      linalg.yield %r : f16
    } -> tensor<2x8x8xf16>
  %zc28 = arith.constant 0.000000e+00 : f32
  %e29 = tensor.empty() : tensor<2x8x64xf32>
  %z30 = linalg.fill ins(%zc28 : f32) outs(%e29 : tensor<2x8x64xf32>) -> tensor<2x8x64xf32>
  // expected-remark @+1 {{not raised: O is kept in f32, not converted to the inputs' f16 (fa.attention writes O in its inputs' type)}}
  %mm31 = linalg.batch_matmul ins(%g27, %v : tensor<2x8x8xf16>, tensor<2x8x64xf16>) outs(%z30 : tensor<2x8x64xf32>) -> tensor<2x8x64xf32>
  return %mm31 : tensor<2x8x64xf32>
}

// -----

// f16 x f16 -> f32 contractions (a matmul with an f32 accumulator, as
// StableHLO's preferred_element_type or IREE write them), Q K^T as
// batch_matmul with transposed-B indexing maps (how MLIR 22 spells the
// removed linalg.batch_matmul_transpose_b), a divide by sqrt(D), softmax
// in f32, P and O truncated to f16. The raised op has f16 I/O and replaces
// O's truncation.
// CHECK-LABEL: func @f32_accumulate_transpose_b
// CHECK-SAME: (%[[Q:.*]]: tensor<4x16x32xf16>, %[[K:.*]]: tensor<4x16x32xf16>, %[[V:.*]]: tensor<4x16x32xf16>)
// CHECK: %[[O:.*]] = fa.attention %{{.*}}, %{{.*}}, %{{.*}} {scale = 1.250000e-01 : f32} : tensor<1x4x16x32xf16>, tensor<1x4x16x32xf16>, tensor<1x4x16x32xf16> -> tensor<1x4x16x32xf16>
// CHECK: %[[O3:.*]] = tensor.collapse_shape %[[O]]
// CHECK-NEXT: return %[[O3]] : tensor<4x16x32xf16>
func.func @f32_accumulate_transpose_b(%q: tensor<4x16x32xf16>, %k: tensor<4x16x32xf16>, %v: tensor<4x16x32xf16>) -> tensor<4x16x32xf16> {
  %zc1 = arith.constant 0.000000e+00 : f32
  %e2 = tensor.empty() : tensor<4x16x16xf32>
  %z3 = linalg.fill ins(%zc1 : f32) outs(%e2 : tensor<4x16x16xf32>) -> tensor<4x16x16xf32>
  %mm4 = linalg.batch_matmul indexing_maps = [affine_map<(d0, d1, d2, d3) -> (d0, d1, d3)>, affine_map<(d0, d1, d2, d3) -> (d0, d2, d3)>, affine_map<(d0, d1, d2, d3) -> (d0, d1, d2)>] ins(%q, %k : tensor<4x16x32xf16>, tensor<4x16x32xf16>) outs(%z3 : tensor<4x16x16xf32>) -> tensor<4x16x16xf32>
  %s5 = arith.constant 8.000000e+00 : f32
  %e6 = tensor.empty() : tensor<4x16x16xf32>
  %g7 = linalg.generic {indexing_maps = [affine_map<(d0, d1, d2) -> (d0, d1, d2)>, affine_map<(d0, d1, d2) -> (d0, d1, d2)>], iterator_types = ["parallel", "parallel", "parallel"]}
      ins(%mm4 : tensor<4x16x16xf32>) outs(%e6 : tensor<4x16x16xf32>) {
    ^bb0(%a0: f32, %out: f32):
    %r = arith.divf %a0, %s5 : f32
      linalg.yield %r : f32
    } -> tensor<4x16x16xf32>
  %e8 = tensor.empty() : tensor<4x16x16xf32>
  %sm9 = linalg.softmax dimension(2) ins(%g7 : tensor<4x16x16xf32>) outs(%e8 : tensor<4x16x16xf32>) -> tensor<4x16x16xf32>
  %e10 = tensor.empty() : tensor<4x16x16xf16>
  %g11 = linalg.generic {indexing_maps = [affine_map<(d0, d1, d2) -> (d0, d1, d2)>, affine_map<(d0, d1, d2) -> (d0, d1, d2)>], iterator_types = ["parallel", "parallel", "parallel"]}
      ins(%sm9 : tensor<4x16x16xf32>) outs(%e10 : tensor<4x16x16xf16>) {
    ^bb0(%a0: f32, %out: f16):
    %r = arith.truncf %a0 : f32 to f16
      linalg.yield %r : f16
    } -> tensor<4x16x16xf16>
  %zc12 = arith.constant 0.000000e+00 : f32
  %e13 = tensor.empty() : tensor<4x16x32xf32>
  %z14 = linalg.fill ins(%zc12 : f32) outs(%e13 : tensor<4x16x32xf32>) -> tensor<4x16x32xf32>
  %mm15 = linalg.batch_matmul ins(%g11, %v : tensor<4x16x16xf16>, tensor<4x16x32xf16>) outs(%z14 : tensor<4x16x32xf32>) -> tensor<4x16x32xf32>
  %e16 = tensor.empty() : tensor<4x16x32xf16>
  %g17 = linalg.generic {indexing_maps = [affine_map<(d0, d1, d2) -> (d0, d1, d2)>, affine_map<(d0, d1, d2) -> (d0, d1, d2)>], iterator_types = ["parallel", "parallel", "parallel"]}
      ins(%mm15 : tensor<4x16x32xf32>) outs(%e16 : tensor<4x16x32xf16>) {
    ^bb0(%a0: f32, %out: f16):
    %r = arith.truncf %a0 : f32 to f16
      linalg.yield %r : f16
    } -> tensor<4x16x32xf16>
  return %g17 : tensor<4x16x32xf16>
}

// -----

// Must not fire: K is bf16 while Q and V are f16 (one f32 accumulation
// of two input types); fa.attention takes one element type.
// CHECK-LABEL: func @f32_accumulate_mixed_inputs
// CHECK-NOT: fa.attention
func.func @f32_accumulate_mixed_inputs(%q: tensor<4x16x32xf16>, %k: tensor<4x16x32xbf16>, %v: tensor<4x16x32xf16>) -> tensor<4x16x32xf16> {
  %zc1 = arith.constant 0.000000e+00 : f32
  %e2 = tensor.empty() : tensor<4x16x16xf32>
  %z3 = linalg.fill ins(%zc1 : f32) outs(%e2 : tensor<4x16x16xf32>) -> tensor<4x16x16xf32>
  %mm4 = linalg.batch_matmul indexing_maps = [affine_map<(d0, d1, d2, d3) -> (d0, d1, d3)>, affine_map<(d0, d1, d2, d3) -> (d0, d2, d3)>, affine_map<(d0, d1, d2, d3) -> (d0, d1, d2)>] ins(%q, %k : tensor<4x16x32xf16>, tensor<4x16x32xbf16>) outs(%z3 : tensor<4x16x16xf32>) -> tensor<4x16x16xf32>
  %s5 = arith.constant 8.000000e+00 : f32
  %e6 = tensor.empty() : tensor<4x16x16xf32>
  %g7 = linalg.generic {indexing_maps = [affine_map<(d0, d1, d2) -> (d0, d1, d2)>, affine_map<(d0, d1, d2) -> (d0, d1, d2)>], iterator_types = ["parallel", "parallel", "parallel"]}
      ins(%mm4 : tensor<4x16x16xf32>) outs(%e6 : tensor<4x16x16xf32>) {
    ^bb0(%a0: f32, %out: f32):
    %r = arith.divf %a0, %s5 : f32
      linalg.yield %r : f32
    } -> tensor<4x16x16xf32>
  %e8 = tensor.empty() : tensor<4x16x16xf32>
  %sm9 = linalg.softmax dimension(2) ins(%g7 : tensor<4x16x16xf32>) outs(%e8 : tensor<4x16x16xf32>) -> tensor<4x16x16xf32>
  %e10 = tensor.empty() : tensor<4x16x16xf16>
  %g11 = linalg.generic {indexing_maps = [affine_map<(d0, d1, d2) -> (d0, d1, d2)>, affine_map<(d0, d1, d2) -> (d0, d1, d2)>], iterator_types = ["parallel", "parallel", "parallel"]}
      ins(%sm9 : tensor<4x16x16xf32>) outs(%e10 : tensor<4x16x16xf16>) {
    ^bb0(%a0: f32, %out: f16):
    %r = arith.truncf %a0 : f32 to f16
      linalg.yield %r : f16
    } -> tensor<4x16x16xf16>
  %zc12 = arith.constant 0.000000e+00 : f32
  %e13 = tensor.empty() : tensor<4x16x32xf32>
  %z14 = linalg.fill ins(%zc12 : f32) outs(%e13 : tensor<4x16x32xf32>) -> tensor<4x16x32xf32>
  // expected-remark @+1 {{not raised: Q, K and V do not have one element type}}
  %mm15 = linalg.batch_matmul ins(%g11, %v : tensor<4x16x16xf16>, tensor<4x16x32xf16>) outs(%z14 : tensor<4x16x32xf32>) -> tensor<4x16x32xf32>
  %e16 = tensor.empty() : tensor<4x16x32xf16>
  %g17 = linalg.generic {indexing_maps = [affine_map<(d0, d1, d2) -> (d0, d1, d2)>, affine_map<(d0, d1, d2) -> (d0, d1, d2)>], iterator_types = ["parallel", "parallel", "parallel"]}
      ins(%mm15 : tensor<4x16x32xf32>) outs(%e16 : tensor<4x16x32xf16>) {
    ^bb0(%a0: f32, %out: f16):
    %r = arith.truncf %a0 : f32 to f16
      linalg.yield %r : f16
    } -> tensor<4x16x32xf16>
  return %g17 : tensor<4x16x32xf16>
}

// -----

// torch-mlir's decomposition of scaled_dot_product_attention(is_causal=True)
// on [B, H, N, D]: K transposed in 4-D, each matmul as collapse_shape to
// [B*H, ..] + batch_matmul + expand_shape, the scale an f64 constant
// truncated in the body, the mask torch.ones(N, N, bool).tril() (aten.tril
// on linalg.index, i64 positions) negated and applied by masked_fill(-inf),
// softmax as amax / sub / exp / sum / div with keep-dim row statistics.
// Raised on the [B, H, N, D] tensors, with no reshapes left.
// CHECK-LABEL: func @torch_sdpa_causal
// CHECK-SAME: (%[[Q:.*]]: tensor<1x2x8x16xf16>, %[[K:.*]]: tensor<1x2x8x16xf16>, %[[V:.*]]: tensor<1x2x8x16xf16>)
// CHECK-NEXT: %[[O:.*]] = fa.attention %[[Q]], %[[K]], %[[V]] {causal, scale = 2.500000e-01 : f32} : tensor<1x2x8x16xf16>, tensor<1x2x8x16xf16>, tensor<1x2x8x16xf16> -> tensor<1x2x8x16xf16>
// CHECK-NEXT: return %[[O]]
func.func @torch_sdpa_causal(%q: tensor<1x2x8x16xf16>, %k: tensor<1x2x8x16xf16>, %v: tensor<1x2x8x16xf16>) -> tensor<1x2x8x16xf16> {
  %e1 = tensor.empty() : tensor<1x2x16x8xf16>
  %t2 = linalg.transpose ins(%k : tensor<1x2x8x16xf16>) outs(%e1 : tensor<1x2x16x8xf16>) permutation = [0, 1, 3, 2]
  %c3 = tensor.collapse_shape %q [[0, 1], [2], [3]] : tensor<1x2x8x16xf16> into tensor<2x8x16xf16>
  %c4 = tensor.collapse_shape %t2 [[0, 1], [2], [3]] : tensor<1x2x16x8xf16> into tensor<2x16x8xf16>
  %zc5 = arith.constant 0.000000e+00 : f16
  %e6 = tensor.empty() : tensor<2x8x8xf16>
  %z7 = linalg.fill ins(%zc5 : f16) outs(%e6 : tensor<2x8x8xf16>) -> tensor<2x8x8xf16>
  %mm8 = linalg.batch_matmul ins(%c3, %c4 : tensor<2x8x16xf16>, tensor<2x16x8xf16>) outs(%z7 : tensor<2x8x8xf16>) -> tensor<2x8x8xf16>
  %x9 = tensor.expand_shape %mm8 [[0, 1], [2], [3]] output_shape [1, 2, 8, 8] : tensor<2x8x8xf16> into tensor<1x2x8x8xf16>
  %s6410 = arith.constant 2.500000e-01 : f64
  %e11 = tensor.empty() : tensor<1x2x8x8xf16>
  %g12 = linalg.generic {indexing_maps = [affine_map<(d0, d1, d2, d3) -> (d0, d1, d2, d3)>, affine_map<(d0, d1, d2, d3) -> (d0, d1, d2, d3)>], iterator_types = ["parallel", "parallel", "parallel", "parallel"]}
      ins(%x9 : tensor<1x2x8x8xf16>) outs(%e11 : tensor<1x2x8x8xf16>) {
    ^bb0(%a0: f16, %out: f16):
    %c = arith.truncf %s6410 : f64 to f16
    %r = arith.mulf %a0, %c : f16
      linalg.yield %r : f16
    } -> tensor<1x2x8x8xf16>
  %true13 = arith.constant true
  %e14 = tensor.empty() : tensor<8x8xi1>
  %ones15 = linalg.fill ins(%true13 : i1) outs(%e14 : tensor<8x8xi1>) -> tensor<8x8xi1>
  %diag16 = arith.constant 0 : i64
  %e17 = tensor.empty() : tensor<8x8xi1>
  // tril
  %g18 = linalg.generic {indexing_maps = [affine_map<(d0, d1) -> (d0, d1)>, affine_map<(d0, d1) -> (d0, d1)>], iterator_types = ["parallel", "parallel"]}
      ins(%ones15 : tensor<8x8xi1>) outs(%e17 : tensor<8x8xi1>) {
    ^bb0(%a0: i1, %out: i1):
    %i = linalg.index 0 : index
    %j = linalg.index 1 : index
    %i64 = arith.index_cast %i : index to i64
    %j64 = arith.index_cast %j : index to i64
    %d = arith.subi %j64, %i64 : i64
    %keep = arith.cmpi sle, %d, %diag16 : i64
    %false = arith.constant false
    %r = arith.select %keep, %a0, %false : i1
      linalg.yield %r : i1
    } -> tensor<8x8xi1>
  %e19 = tensor.empty() : tensor<8x8xi1>
  // logical_not
  %g20 = linalg.generic {indexing_maps = [affine_map<(d0, d1) -> (d0, d1)>, affine_map<(d0, d1) -> (d0, d1)>], iterator_types = ["parallel", "parallel"]}
      ins(%g18 : tensor<8x8xi1>) outs(%e19 : tensor<8x8xi1>) {
    ^bb0(%a0: i1, %out: i1):
    %true = arith.constant true
    %r = arith.xori %a0, %true : i1
      linalg.yield %r : i1
    } -> tensor<8x8xi1>
  %ninf6421 = arith.constant 0xFFF0000000000000 : f64
  %e22 = tensor.empty() : tensor<1x2x8x8xf16>
  // masked_fill(logical_not(mask), -inf)
  %g23 = linalg.generic {indexing_maps = [affine_map<(d0, d1, d2, d3) -> (d0, d1, d2, d3)>, affine_map<(d0, d1, d2, d3) -> (d2, d3)>, affine_map<(d0, d1, d2, d3) -> (d0, d1, d2, d3)>], iterator_types = ["parallel", "parallel", "parallel", "parallel"]}
      ins(%g12, %g20 : tensor<1x2x8x8xf16>, tensor<8x8xi1>) outs(%e22 : tensor<1x2x8x8xf16>) {
    ^bb0(%a0: f16, %a1: i1, %out: f16):
    %c = arith.truncf %ninf6421 : f64 to f16
    %r = arith.select %a1, %c, %a0 : f16
      linalg.yield %r : f16
    } -> tensor<1x2x8x8xf16>
  %ninf24 = arith.constant 0xFC00 : f16
  %e25 = tensor.empty() : tensor<1x2x8x1xf16>
  %mf26 = linalg.fill ins(%ninf24 : f16) outs(%e25 : tensor<1x2x8x1xf16>) -> tensor<1x2x8x1xf16>
  %g27 = linalg.generic {indexing_maps = [affine_map<(d0, d1, d2, d3) -> (d0, d1, d2, d3)>, affine_map<(d0, d1, d2, d3) -> (d0, d1, d2, 0)>], iterator_types = ["parallel", "parallel", "parallel", "reduction"]}
      ins(%g23 : tensor<1x2x8x8xf16>) outs(%mf26 : tensor<1x2x8x1xf16>) {
    ^bb0(%a0: f16, %out: f16):
    %r = arith.maximumf %a0, %out : f16
      linalg.yield %r : f16
    } -> tensor<1x2x8x1xf16>
  %e28 = tensor.empty() : tensor<1x2x8x8xf16>
  %g29 = linalg.generic {indexing_maps = [affine_map<(d0, d1, d2, d3) -> (d0, d1, d2, d3)>, affine_map<(d0, d1, d2, d3) -> (d0, d1, d2, 0)>, affine_map<(d0, d1, d2, d3) -> (d0, d1, d2, d3)>], iterator_types = ["parallel", "parallel", "parallel", "parallel"]}
      ins(%g23, %g27 : tensor<1x2x8x8xf16>, tensor<1x2x8x1xf16>) outs(%e28 : tensor<1x2x8x8xf16>) {
    ^bb0(%a0: f16, %a1: f16, %out: f16):
    %r = arith.subf %a0, %a1 : f16
      linalg.yield %r : f16
    } -> tensor<1x2x8x8xf16>
  %e30 = tensor.empty() : tensor<1x2x8x8xf16>
  %g31 = linalg.generic {indexing_maps = [affine_map<(d0, d1, d2, d3) -> (d0, d1, d2, d3)>, affine_map<(d0, d1, d2, d3) -> (d0, d1, d2, d3)>], iterator_types = ["parallel", "parallel", "parallel", "parallel"]}
      ins(%g29 : tensor<1x2x8x8xf16>) outs(%e30 : tensor<1x2x8x8xf16>) {
    ^bb0(%a0: f16, %out: f16):
    %r = math.exp %a0 : f16
      linalg.yield %r : f16
    } -> tensor<1x2x8x8xf16>
  %zc32 = arith.constant 0.000000e+00 : f16
  %e33 = tensor.empty() : tensor<1x2x8x1xf16>
  %z34 = linalg.fill ins(%zc32 : f16) outs(%e33 : tensor<1x2x8x1xf16>) -> tensor<1x2x8x1xf16>
  %g35 = linalg.generic {indexing_maps = [affine_map<(d0, d1, d2, d3) -> (d0, d1, d2, d3)>, affine_map<(d0, d1, d2, d3) -> (d0, d1, d2, 0)>], iterator_types = ["parallel", "parallel", "parallel", "reduction"]}
      ins(%g31 : tensor<1x2x8x8xf16>) outs(%z34 : tensor<1x2x8x1xf16>) {
    ^bb0(%a0: f16, %out: f16):
    %r = arith.addf %a0, %out : f16
      linalg.yield %r : f16
    } -> tensor<1x2x8x1xf16>
  %e36 = tensor.empty() : tensor<1x2x8x8xf16>
  %g37 = linalg.generic {indexing_maps = [affine_map<(d0, d1, d2, d3) -> (d0, d1, d2, d3)>, affine_map<(d0, d1, d2, d3) -> (d0, d1, d2, 0)>, affine_map<(d0, d1, d2, d3) -> (d0, d1, d2, d3)>], iterator_types = ["parallel", "parallel", "parallel", "parallel"]}
      ins(%g31, %g35 : tensor<1x2x8x8xf16>, tensor<1x2x8x1xf16>) outs(%e36 : tensor<1x2x8x8xf16>) {
    ^bb0(%a0: f16, %a1: f16, %out: f16):
    %r = arith.divf %a0, %a1 : f16
      linalg.yield %r : f16
    } -> tensor<1x2x8x8xf16>
  %c38 = tensor.collapse_shape %g37 [[0, 1], [2], [3]] : tensor<1x2x8x8xf16> into tensor<2x8x8xf16>
  %c39 = tensor.collapse_shape %v [[0, 1], [2], [3]] : tensor<1x2x8x16xf16> into tensor<2x8x16xf16>
  %zc40 = arith.constant 0.000000e+00 : f16
  %e41 = tensor.empty() : tensor<2x8x16xf16>
  %z42 = linalg.fill ins(%zc40 : f16) outs(%e41 : tensor<2x8x16xf16>) -> tensor<2x8x16xf16>
  %mm43 = linalg.batch_matmul ins(%c38, %c39 : tensor<2x8x8xf16>, tensor<2x8x16xf16>) outs(%z42 : tensor<2x8x16xf16>) -> tensor<2x8x16xf16>
  %x44 = tensor.expand_shape %mm43 [[0, 1], [2], [3]] output_shape [1, 2, 8, 16] : tensor<2x8x16xf16> into tensor<1x2x8x16xf16>
  return %x44 : tensor<1x2x8x16xf16>
}

// -----

// Must not fire: tril(-1) hides the diagonal (strictly lower): not causal.
// CHECK-LABEL: func @torch_sdpa_tril_minus_one
// CHECK-NOT: fa.attention
func.func @torch_sdpa_tril_minus_one(%q: tensor<1x2x8x16xf16>, %k: tensor<1x2x8x16xf16>, %v: tensor<1x2x8x16xf16>) -> tensor<1x2x8x16xf16> {
  %e1 = tensor.empty() : tensor<1x2x16x8xf16>
  %t2 = linalg.transpose ins(%k : tensor<1x2x8x16xf16>) outs(%e1 : tensor<1x2x16x8xf16>) permutation = [0, 1, 3, 2]
  %c3 = tensor.collapse_shape %q [[0, 1], [2], [3]] : tensor<1x2x8x16xf16> into tensor<2x8x16xf16>
  %c4 = tensor.collapse_shape %t2 [[0, 1], [2], [3]] : tensor<1x2x16x8xf16> into tensor<2x16x8xf16>
  %zc5 = arith.constant 0.000000e+00 : f16
  %e6 = tensor.empty() : tensor<2x8x8xf16>
  %z7 = linalg.fill ins(%zc5 : f16) outs(%e6 : tensor<2x8x8xf16>) -> tensor<2x8x8xf16>
  %mm8 = linalg.batch_matmul ins(%c3, %c4 : tensor<2x8x16xf16>, tensor<2x16x8xf16>) outs(%z7 : tensor<2x8x8xf16>) -> tensor<2x8x8xf16>
  %x9 = tensor.expand_shape %mm8 [[0, 1], [2], [3]] output_shape [1, 2, 8, 8] : tensor<2x8x8xf16> into tensor<1x2x8x8xf16>
  %s6410 = arith.constant 2.500000e-01 : f64
  %e11 = tensor.empty() : tensor<1x2x8x8xf16>
  %g12 = linalg.generic {indexing_maps = [affine_map<(d0, d1, d2, d3) -> (d0, d1, d2, d3)>, affine_map<(d0, d1, d2, d3) -> (d0, d1, d2, d3)>], iterator_types = ["parallel", "parallel", "parallel", "parallel"]}
      ins(%x9 : tensor<1x2x8x8xf16>) outs(%e11 : tensor<1x2x8x8xf16>) {
    ^bb0(%a0: f16, %out: f16):
    %c = arith.truncf %s6410 : f64 to f16
    %r = arith.mulf %a0, %c : f16
      linalg.yield %r : f16
    } -> tensor<1x2x8x8xf16>
  %true13 = arith.constant true
  %e14 = tensor.empty() : tensor<8x8xi1>
  %ones15 = linalg.fill ins(%true13 : i1) outs(%e14 : tensor<8x8xi1>) -> tensor<8x8xi1>
  %diag16 = arith.constant -1 : i64
  %e17 = tensor.empty() : tensor<8x8xi1>
  // tril
  %g18 = linalg.generic {indexing_maps = [affine_map<(d0, d1) -> (d0, d1)>, affine_map<(d0, d1) -> (d0, d1)>], iterator_types = ["parallel", "parallel"]}
      ins(%ones15 : tensor<8x8xi1>) outs(%e17 : tensor<8x8xi1>) {
    ^bb0(%a0: i1, %out: i1):
    %i = linalg.index 0 : index
    %j = linalg.index 1 : index
    %i64 = arith.index_cast %i : index to i64
    %j64 = arith.index_cast %j : index to i64
    %d = arith.subi %j64, %i64 : i64
    %keep = arith.cmpi sle, %d, %diag16 : i64
    %false = arith.constant false
    %r = arith.select %keep, %a0, %false : i1
      linalg.yield %r : i1
    } -> tensor<8x8xi1>
  %e19 = tensor.empty() : tensor<8x8xi1>
  // logical_not
  %g20 = linalg.generic {indexing_maps = [affine_map<(d0, d1) -> (d0, d1)>, affine_map<(d0, d1) -> (d0, d1)>], iterator_types = ["parallel", "parallel"]}
      ins(%g18 : tensor<8x8xi1>) outs(%e19 : tensor<8x8xi1>) {
    ^bb0(%a0: i1, %out: i1):
    %true = arith.constant true
    %r = arith.xori %a0, %true : i1
      linalg.yield %r : i1
    } -> tensor<8x8xi1>
  %ninf6421 = arith.constant 0xFFF0000000000000 : f64
  %e22 = tensor.empty() : tensor<1x2x8x8xf16>
  // masked_fill(logical_not(mask), -inf)
  %g23 = linalg.generic {indexing_maps = [affine_map<(d0, d1, d2, d3) -> (d0, d1, d2, d3)>, affine_map<(d0, d1, d2, d3) -> (d2, d3)>, affine_map<(d0, d1, d2, d3) -> (d0, d1, d2, d3)>], iterator_types = ["parallel", "parallel", "parallel", "parallel"]}
      ins(%g12, %g20 : tensor<1x2x8x8xf16>, tensor<8x8xi1>) outs(%e22 : tensor<1x2x8x8xf16>) {
    ^bb0(%a0: f16, %a1: i1, %out: f16):
    %c = arith.truncf %ninf6421 : f64 to f16
    %r = arith.select %a1, %c, %a0 : f16
      linalg.yield %r : f16
    } -> tensor<1x2x8x8xf16>
  %ninf24 = arith.constant 0xFC00 : f16
  %e25 = tensor.empty() : tensor<1x2x8x1xf16>
  %mf26 = linalg.fill ins(%ninf24 : f16) outs(%e25 : tensor<1x2x8x1xf16>) -> tensor<1x2x8x1xf16>
  %g27 = linalg.generic {indexing_maps = [affine_map<(d0, d1, d2, d3) -> (d0, d1, d2, d3)>, affine_map<(d0, d1, d2, d3) -> (d0, d1, d2, 0)>], iterator_types = ["parallel", "parallel", "parallel", "reduction"]}
      ins(%g23 : tensor<1x2x8x8xf16>) outs(%mf26 : tensor<1x2x8x1xf16>) {
    ^bb0(%a0: f16, %out: f16):
    %r = arith.maximumf %a0, %out : f16
      linalg.yield %r : f16
    } -> tensor<1x2x8x1xf16>
  %e28 = tensor.empty() : tensor<1x2x8x8xf16>
  %g29 = linalg.generic {indexing_maps = [affine_map<(d0, d1, d2, d3) -> (d0, d1, d2, d3)>, affine_map<(d0, d1, d2, d3) -> (d0, d1, d2, 0)>, affine_map<(d0, d1, d2, d3) -> (d0, d1, d2, d3)>], iterator_types = ["parallel", "parallel", "parallel", "parallel"]}
      ins(%g23, %g27 : tensor<1x2x8x8xf16>, tensor<1x2x8x1xf16>) outs(%e28 : tensor<1x2x8x8xf16>) {
    ^bb0(%a0: f16, %a1: f16, %out: f16):
    %r = arith.subf %a0, %a1 : f16
      linalg.yield %r : f16
    } -> tensor<1x2x8x8xf16>
  %e30 = tensor.empty() : tensor<1x2x8x8xf16>
  %g31 = linalg.generic {indexing_maps = [affine_map<(d0, d1, d2, d3) -> (d0, d1, d2, d3)>, affine_map<(d0, d1, d2, d3) -> (d0, d1, d2, d3)>], iterator_types = ["parallel", "parallel", "parallel", "parallel"]}
      ins(%g29 : tensor<1x2x8x8xf16>) outs(%e30 : tensor<1x2x8x8xf16>) {
    ^bb0(%a0: f16, %out: f16):
    %r = math.exp %a0 : f16
      linalg.yield %r : f16
    } -> tensor<1x2x8x8xf16>
  %zc32 = arith.constant 0.000000e+00 : f16
  %e33 = tensor.empty() : tensor<1x2x8x1xf16>
  %z34 = linalg.fill ins(%zc32 : f16) outs(%e33 : tensor<1x2x8x1xf16>) -> tensor<1x2x8x1xf16>
  %g35 = linalg.generic {indexing_maps = [affine_map<(d0, d1, d2, d3) -> (d0, d1, d2, d3)>, affine_map<(d0, d1, d2, d3) -> (d0, d1, d2, 0)>], iterator_types = ["parallel", "parallel", "parallel", "reduction"]}
      ins(%g31 : tensor<1x2x8x8xf16>) outs(%z34 : tensor<1x2x8x1xf16>) {
    ^bb0(%a0: f16, %out: f16):
    %r = arith.addf %a0, %out : f16
      linalg.yield %r : f16
    } -> tensor<1x2x8x1xf16>
  %e36 = tensor.empty() : tensor<1x2x8x8xf16>
  %g37 = linalg.generic {indexing_maps = [affine_map<(d0, d1, d2, d3) -> (d0, d1, d2, d3)>, affine_map<(d0, d1, d2, d3) -> (d0, d1, d2, 0)>, affine_map<(d0, d1, d2, d3) -> (d0, d1, d2, d3)>], iterator_types = ["parallel", "parallel", "parallel", "parallel"]}
      ins(%g31, %g35 : tensor<1x2x8x8xf16>, tensor<1x2x8x1xf16>) outs(%e36 : tensor<1x2x8x8xf16>) {
    ^bb0(%a0: f16, %a1: f16, %out: f16):
    %r = arith.divf %a0, %a1 : f16
      linalg.yield %r : f16
    } -> tensor<1x2x8x8xf16>
  %c38 = tensor.collapse_shape %g37 [[0, 1], [2], [3]] : tensor<1x2x8x8xf16> into tensor<2x8x8xf16>
  %c39 = tensor.collapse_shape %v [[0, 1], [2], [3]] : tensor<1x2x8x16xf16> into tensor<2x8x16xf16>
  %zc40 = arith.constant 0.000000e+00 : f16
  %e41 = tensor.empty() : tensor<2x8x16xf16>
  %z42 = linalg.fill ins(%zc40 : f16) outs(%e41 : tensor<2x8x16xf16>) -> tensor<2x8x16xf16>
  // expected-remark @+1 {{not raised: the mask is not causal or a window: visible where j - i <= -1}}
  %mm43 = linalg.batch_matmul ins(%c38, %c39 : tensor<2x8x8xf16>, tensor<2x8x16xf16>) outs(%z42 : tensor<2x8x16xf16>) -> tensor<2x8x16xf16>
  %x44 = tensor.expand_shape %mm43 [[0, 1], [2], [3]] output_shape [1, 2, 8, 16] : tensor<2x8x16xf16> into tensor<1x2x8x16xf16>
  return %x44 : tensor<1x2x8x16xf16>
}

// -----

// One head on [N, D]: linalg.matmul with transposed-B maps (matmul_transpose_b)
// for Q K^T, the scale 1/sqrt(32) as f64, linalg.softmax, and a plain
// linalg.matmul whose V went through two transposes. Raised on [1, 1, N, D].
// CHECK-LABEL: func @matmul_2d
// CHECK-SAME: (%[[Q:.*]]: tensor<8x32xf32>, %[[K:.*]]: tensor<8x32xf32>, %[[V:.*]]: tensor<8x32xf32>)
// CHECK-DAG: %[[Q4:.*]] = tensor.expand_shape %[[Q]] {{\[\[}}0, 1, 2], [3]] output_shape [1, 1, 8, 32]
// CHECK-DAG: %[[K4:.*]] = tensor.expand_shape %[[K]]
// CHECK-DAG: %[[V4:.*]] = tensor.expand_shape %[[V]]
// CHECK: %[[O4:.*]] = fa.attention %[[Q4]], %[[K4]], %[[V4]] {scale = 0.176776692 : f32} : tensor<1x1x8x32xf32>, tensor<1x1x8x32xf32>, tensor<1x1x8x32xf32> -> tensor<1x1x8x32xf32>
// CHECK: tensor.collapse_shape %[[O4]] {{\[\[}}0, 1, 2], [3]] : tensor<1x1x8x32xf32> into tensor<8x32xf32>
func.func @matmul_2d(%q: tensor<8x32xf32>, %k: tensor<8x32xf32>, %v: tensor<8x32xf32>) -> tensor<8x32xf32> {
  %zc1 = arith.constant 0.000000e+00 : f32
  %e2 = tensor.empty() : tensor<8x8xf32>
  %z3 = linalg.fill ins(%zc1 : f32) outs(%e2 : tensor<8x8xf32>) -> tensor<8x8xf32>
  %mm4 = linalg.matmul indexing_maps = [affine_map<(d0, d1, d2) -> (d0, d2)>, affine_map<(d0, d1, d2) -> (d1, d2)>, affine_map<(d0, d1, d2) -> (d0, d1)>] ins(%q, %k : tensor<8x32xf32>, tensor<8x32xf32>) outs(%z3 : tensor<8x8xf32>) -> tensor<8x8xf32>
  %s645 = arith.constant 0.17677669529663687 : f64
  %e6 = tensor.empty() : tensor<8x8xf32>
  %g7 = linalg.generic {indexing_maps = [affine_map<(d0, d1) -> (d0, d1)>, affine_map<(d0, d1) -> (d0, d1)>], iterator_types = ["parallel", "parallel"]}
      ins(%mm4 : tensor<8x8xf32>) outs(%e6 : tensor<8x8xf32>) {
    ^bb0(%a0: f32, %out: f32):
    %c = arith.truncf %s645 : f64 to f32
    %r = arith.mulf %a0, %c : f32
      linalg.yield %r : f32
    } -> tensor<8x8xf32>
  %e8 = tensor.empty() : tensor<8x8xf32>
  %sm9 = linalg.softmax dimension(1) ins(%g7 : tensor<8x8xf32>) outs(%e8 : tensor<8x8xf32>) -> tensor<8x8xf32>
  %e10 = tensor.empty() : tensor<32x8xf32>
  %t11 = linalg.transpose ins(%v : tensor<8x32xf32>) outs(%e10 : tensor<32x8xf32>) permutation = [1, 0]
  %e12 = tensor.empty() : tensor<8x32xf32>
  %t13 = linalg.transpose ins(%t11 : tensor<32x8xf32>) outs(%e12 : tensor<8x32xf32>) permutation = [1, 0]
  %zc14 = arith.constant 0.000000e+00 : f32
  %e15 = tensor.empty() : tensor<8x32xf32>
  %z16 = linalg.fill ins(%zc14 : f32) outs(%e15 : tensor<8x32xf32>) -> tensor<8x32xf32>
  %mm17 = linalg.matmul ins(%sm9, %t13 : tensor<8x8xf32>, tensor<8x32xf32>) outs(%z16 : tensor<8x32xf32>) -> tensor<8x32xf32>
  return %mm17 : tensor<8x32xf32>
}

// -----

// Must not fire: the softmax normalises over the queries (dim 0).
// CHECK-LABEL: func @matmul_2d_softmax_over_queries
// CHECK-NOT: fa.attention
func.func @matmul_2d_softmax_over_queries(%q: tensor<8x32xf32>, %k: tensor<8x32xf32>, %v: tensor<8x32xf32>) -> tensor<8x32xf32> {
  %zc1 = arith.constant 0.000000e+00 : f32
  %e2 = tensor.empty() : tensor<8x8xf32>
  %z3 = linalg.fill ins(%zc1 : f32) outs(%e2 : tensor<8x8xf32>) -> tensor<8x8xf32>
  %mm4 = linalg.matmul indexing_maps = [affine_map<(d0, d1, d2) -> (d0, d2)>, affine_map<(d0, d1, d2) -> (d1, d2)>, affine_map<(d0, d1, d2) -> (d0, d1)>] ins(%q, %k : tensor<8x32xf32>, tensor<8x32xf32>) outs(%z3 : tensor<8x8xf32>) -> tensor<8x8xf32>
  %s645 = arith.constant 0.17677669529663687 : f64
  %e6 = tensor.empty() : tensor<8x8xf32>
  %g7 = linalg.generic {indexing_maps = [affine_map<(d0, d1) -> (d0, d1)>, affine_map<(d0, d1) -> (d0, d1)>], iterator_types = ["parallel", "parallel"]}
      ins(%mm4 : tensor<8x8xf32>) outs(%e6 : tensor<8x8xf32>) {
    ^bb0(%a0: f32, %out: f32):
    %c = arith.truncf %s645 : f64 to f32
    %r = arith.mulf %a0, %c : f32
      linalg.yield %r : f32
    } -> tensor<8x8xf32>
  %e8 = tensor.empty() : tensor<8x8xf32>
  %sm9 = linalg.softmax dimension(0) ins(%g7 : tensor<8x8xf32>) outs(%e8 : tensor<8x8xf32>) -> tensor<8x8xf32>
  %e10 = tensor.empty() : tensor<32x8xf32>
  %t11 = linalg.transpose ins(%v : tensor<8x32xf32>) outs(%e10 : tensor<32x8xf32>) permutation = [1, 0]
  %e12 = tensor.empty() : tensor<8x32xf32>
  %t13 = linalg.transpose ins(%t11 : tensor<32x8xf32>) outs(%e12 : tensor<8x32xf32>) permutation = [1, 0]
  %zc14 = arith.constant 0.000000e+00 : f32
  %e15 = tensor.empty() : tensor<8x32xf32>
  %z16 = linalg.fill ins(%zc14 : f32) outs(%e15 : tensor<8x32xf32>) -> tensor<8x32xf32>
  // expected-remark @+1 {{not raised: the softmax is over dim 0, not the keys (the last dim)}}
  %mm17 = linalg.matmul ins(%sm9, %t13 : tensor<8x8xf32>, tensor<8x32xf32>) outs(%z16 : tensor<8x32xf32>) -> tensor<8x32xf32>
  return %mm17 : tensor<8x32xf32>
}

// -----

// The scale folded into Q and into K^T, sqrt(scale) each (PyTorch's math
// SDPA: q * sqrt(s) @ (k^T * sqrt(s))): the raised op takes the unscaled
// tensors and scale = 0.5 * 0.5.
// CHECK-LABEL: func @scale_in_q_and_k
// CHECK-SAME: (%[[Q:.*]]: tensor<2x8x16xf32>, %[[K:.*]]: tensor<2x8x16xf32>, %[[V:.*]]: tensor<2x8x16xf32>)
// CHECK-DAG: %[[Q4:.*]] = tensor.expand_shape %[[Q]]
// CHECK-DAG: %[[K4:.*]] = tensor.expand_shape %[[K]]
// CHECK: fa.attention %[[Q4]], %[[K4]], %{{.*}} {scale = 2.500000e-01 : f32}
// CHECK-NOT: linalg.generic
func.func @scale_in_q_and_k(%q: tensor<2x8x16xf32>, %k: tensor<2x8x16xf32>, %v: tensor<2x8x16xf32>) -> tensor<2x8x16xf32> {
  %s641 = arith.constant 5.000000e-01 : f64
  %e2 = tensor.empty() : tensor<2x8x16xf32>
  %g3 = linalg.generic {indexing_maps = [affine_map<(d0, d1, d2) -> (d0, d1, d2)>, affine_map<(d0, d1, d2) -> (d0, d1, d2)>], iterator_types = ["parallel", "parallel", "parallel"]}
      ins(%q : tensor<2x8x16xf32>) outs(%e2 : tensor<2x8x16xf32>) {
    ^bb0(%a0: f32, %out: f32):
    %c = arith.truncf %s641 : f64 to f32
    %r = arith.mulf %a0, %c : f32
      linalg.yield %r : f32
    } -> tensor<2x8x16xf32>
  %e4 = tensor.empty() : tensor<2x16x8xf32>
  %t5 = linalg.transpose ins(%k : tensor<2x8x16xf32>) outs(%e4 : tensor<2x16x8xf32>) permutation = [0, 2, 1]
  %s646 = arith.constant 5.000000e-01 : f64
  %e7 = tensor.empty() : tensor<2x16x8xf32>
  %g8 = linalg.generic {indexing_maps = [affine_map<(d0, d1, d2) -> (d0, d1, d2)>, affine_map<(d0, d1, d2) -> (d0, d1, d2)>], iterator_types = ["parallel", "parallel", "parallel"]}
      ins(%t5 : tensor<2x16x8xf32>) outs(%e7 : tensor<2x16x8xf32>) {
    ^bb0(%a0: f32, %out: f32):
    %c = arith.truncf %s646 : f64 to f32
    %r = arith.mulf %a0, %c : f32
      linalg.yield %r : f32
    } -> tensor<2x16x8xf32>
  %zc9 = arith.constant 0.000000e+00 : f32
  %e10 = tensor.empty() : tensor<2x8x8xf32>
  %z11 = linalg.fill ins(%zc9 : f32) outs(%e10 : tensor<2x8x8xf32>) -> tensor<2x8x8xf32>
  %mm12 = linalg.batch_matmul ins(%g3, %g8 : tensor<2x8x16xf32>, tensor<2x16x8xf32>) outs(%z11 : tensor<2x8x8xf32>) -> tensor<2x8x8xf32>
  %e13 = tensor.empty() : tensor<2x8x8xf32>
  %sm14 = linalg.softmax dimension(2) ins(%mm12 : tensor<2x8x8xf32>) outs(%e13 : tensor<2x8x8xf32>) -> tensor<2x8x8xf32>
  %zc15 = arith.constant 0.000000e+00 : f32
  %e16 = tensor.empty() : tensor<2x8x16xf32>
  %z17 = linalg.fill ins(%zc15 : f32) outs(%e16 : tensor<2x8x16xf32>) -> tensor<2x8x16xf32>
  %mm18 = linalg.batch_matmul ins(%sm14, %v : tensor<2x8x8xf32>, tensor<2x8x16xf32>) outs(%z17 : tensor<2x8x16xf32>) -> tensor<2x8x16xf32>
  return %mm18 : tensor<2x8x16xf32>
}

// -----

// Must not fold: Q * Q is not a scale. The attention is still raised, on
// the squared tensor, with only K's factor.
// CHECK-LABEL: func @q_squared_not_a_scale
// CHECK: %[[Q2:.*]] = linalg.generic
// CHECK: arith.mulf %[[IN:.*]], %[[IN]]
// CHECK: %[[Q4:.*]] = tensor.expand_shape %[[Q2]]
// CHECK: fa.attention %[[Q4]], %{{.*}}, %{{.*}} {scale = 5.000000e-01 : f32}
func.func @q_squared_not_a_scale(%q: tensor<2x8x16xf32>, %k: tensor<2x8x16xf32>, %v: tensor<2x8x16xf32>) -> tensor<2x8x16xf32> {
  %e1 = tensor.empty() : tensor<2x8x16xf32>
  %g2 = linalg.generic {indexing_maps = [affine_map<(d0, d1, d2) -> (d0, d1, d2)>, affine_map<(d0, d1, d2) -> (d0, d1, d2)>], iterator_types = ["parallel", "parallel", "parallel"]}
      ins(%q : tensor<2x8x16xf32>) outs(%e1 : tensor<2x8x16xf32>) {
    ^bb0(%a0: f32, %out: f32):
    %r = arith.mulf %a0, %a0 : f32
      linalg.yield %r : f32
    } -> tensor<2x8x16xf32>
  %e3 = tensor.empty() : tensor<2x16x8xf32>
  %t4 = linalg.transpose ins(%k : tensor<2x8x16xf32>) outs(%e3 : tensor<2x16x8xf32>) permutation = [0, 2, 1]
  %s645 = arith.constant 5.000000e-01 : f64
  %e6 = tensor.empty() : tensor<2x16x8xf32>
  %g7 = linalg.generic {indexing_maps = [affine_map<(d0, d1, d2) -> (d0, d1, d2)>, affine_map<(d0, d1, d2) -> (d0, d1, d2)>], iterator_types = ["parallel", "parallel", "parallel"]}
      ins(%t4 : tensor<2x16x8xf32>) outs(%e6 : tensor<2x16x8xf32>) {
    ^bb0(%a0: f32, %out: f32):
    %c = arith.truncf %s645 : f64 to f32
    %r = arith.mulf %a0, %c : f32
      linalg.yield %r : f32
    } -> tensor<2x16x8xf32>
  %zc8 = arith.constant 0.000000e+00 : f32
  %e9 = tensor.empty() : tensor<2x8x8xf32>
  %z10 = linalg.fill ins(%zc8 : f32) outs(%e9 : tensor<2x8x8xf32>) -> tensor<2x8x8xf32>
  %mm11 = linalg.batch_matmul ins(%g2, %g7 : tensor<2x8x16xf32>, tensor<2x16x8xf32>) outs(%z10 : tensor<2x8x8xf32>) -> tensor<2x8x8xf32>
  %e12 = tensor.empty() : tensor<2x8x8xf32>
  %sm13 = linalg.softmax dimension(2) ins(%mm11 : tensor<2x8x8xf32>) outs(%e12 : tensor<2x8x8xf32>) -> tensor<2x8x8xf32>
  %zc14 = arith.constant 0.000000e+00 : f32
  %e15 = tensor.empty() : tensor<2x8x16xf32>
  %z16 = linalg.fill ins(%zc14 : f32) outs(%e15 : tensor<2x8x16xf32>) -> tensor<2x8x16xf32>
  %mm17 = linalg.batch_matmul ins(%sm13, %v : tensor<2x8x8xf32>, tensor<2x8x16xf32>) outs(%z16 : tensor<2x8x16xf32>) -> tensor<2x8x16xf32>
  return %mm17 : tensor<2x8x16xf32>
}

// -----

// One generic fusing the scale and a causal mask on linalg.index (i64
// positions, "hide where j > i"), between 4-D expand/collapse around
// transposed-B batch_matmuls.
// CHECK-LABEL: func @fused_scale_index_mask
// CHECK-NEXT: %[[O:.*]] = fa.attention %arg0, %arg1, %arg2 {causal, scale = 2.500000e-01 : f32} : tensor<1x4x8x16xf32>, tensor<1x4x8x16xf32>, tensor<1x4x8x16xf32> -> tensor<1x4x8x16xf32>
// CHECK-NEXT: return %[[O]]
func.func @fused_scale_index_mask(%q: tensor<1x4x8x16xf32>, %k: tensor<1x4x8x16xf32>, %v: tensor<1x4x8x16xf32>) -> tensor<1x4x8x16xf32> {
  %c1 = tensor.collapse_shape %q [[0, 1], [2], [3]] : tensor<1x4x8x16xf32> into tensor<4x8x16xf32>
  %c2 = tensor.collapse_shape %k [[0, 1], [2], [3]] : tensor<1x4x8x16xf32> into tensor<4x8x16xf32>
  %zc3 = arith.constant 0.000000e+00 : f32
  %e4 = tensor.empty() : tensor<4x8x8xf32>
  %z5 = linalg.fill ins(%zc3 : f32) outs(%e4 : tensor<4x8x8xf32>) -> tensor<4x8x8xf32>
  %mm6 = linalg.batch_matmul indexing_maps = [affine_map<(d0, d1, d2, d3) -> (d0, d1, d3)>, affine_map<(d0, d1, d2, d3) -> (d0, d2, d3)>, affine_map<(d0, d1, d2, d3) -> (d0, d1, d2)>] ins(%c1, %c2 : tensor<4x8x16xf32>, tensor<4x8x16xf32>) outs(%z5 : tensor<4x8x8xf32>) -> tensor<4x8x8xf32>
  %x7 = tensor.expand_shape %mm6 [[0, 1], [2], [3]] output_shape [1, 4, 8, 8] : tensor<4x8x8xf32> into tensor<1x4x8x8xf32>
  %ninf8 = arith.constant 0xFF800000 : f32
  %s9 = arith.constant 2.500000e-01 : f32
  %e10 = tensor.empty() : tensor<1x4x8x8xf32>
  %g11 = linalg.generic {indexing_maps = [affine_map<(d0, d1, d2, d3) -> (d0, d1, d2, d3)>, affine_map<(d0, d1, d2, d3) -> (d0, d1, d2, d3)>], iterator_types = ["parallel", "parallel", "parallel", "parallel"]}
      ins(%x7 : tensor<1x4x8x8xf32>) outs(%e10 : tensor<1x4x8x8xf32>) {
    ^bb0(%a0: f32, %out: f32):
    %i = linalg.index 2 : index
    %j = linalg.index 3 : index
    %i64 = arith.index_cast %i : index to i64
    %j64 = arith.index_cast %j : index to i64
    %hidden = arith.cmpi sgt, %j64, %i64 : i64
    %x = arith.mulf %a0, %s9 : f32
    %r = arith.select %hidden, %ninf8, %x : f32
      linalg.yield %r : f32
    } -> tensor<1x4x8x8xf32>
  %e12 = tensor.empty() : tensor<1x4x8x8xf32>
  %sm13 = linalg.softmax dimension(3) ins(%g11 : tensor<1x4x8x8xf32>) outs(%e12 : tensor<1x4x8x8xf32>) -> tensor<1x4x8x8xf32>
  %c14 = tensor.collapse_shape %sm13 [[0, 1], [2], [3]] : tensor<1x4x8x8xf32> into tensor<4x8x8xf32>
  %c15 = tensor.collapse_shape %v [[0, 1], [2], [3]] : tensor<1x4x8x16xf32> into tensor<4x8x16xf32>
  %zc16 = arith.constant 0.000000e+00 : f32
  %e17 = tensor.empty() : tensor<4x8x16xf32>
  %z18 = linalg.fill ins(%zc16 : f32) outs(%e17 : tensor<4x8x16xf32>) -> tensor<4x8x16xf32>
  %mm19 = linalg.batch_matmul ins(%c14, %c15 : tensor<4x8x8xf32>, tensor<4x8x16xf32>) outs(%z18 : tensor<4x8x16xf32>) -> tensor<4x8x16xf32>
  %x20 = tensor.expand_shape %mm19 [[0, 1], [2], [3]] output_shape [1, 4, 8, 16] : tensor<4x8x16xf32> into tensor<1x4x8x16xf32>
  return %x20 : tensor<1x4x8x16xf32>
}

// -----

// Must not fire: the "mask" compares the key position with the head index.
// CHECK-LABEL: func @index_mask_on_heads
// CHECK-NOT: fa.attention
func.func @index_mask_on_heads(%q: tensor<1x4x8x16xf32>, %k: tensor<1x4x8x16xf32>, %v: tensor<1x4x8x16xf32>) -> tensor<1x4x8x16xf32> {
  %c1 = tensor.collapse_shape %q [[0, 1], [2], [3]] : tensor<1x4x8x16xf32> into tensor<4x8x16xf32>
  %c2 = tensor.collapse_shape %k [[0, 1], [2], [3]] : tensor<1x4x8x16xf32> into tensor<4x8x16xf32>
  %zc3 = arith.constant 0.000000e+00 : f32
  %e4 = tensor.empty() : tensor<4x8x8xf32>
  %z5 = linalg.fill ins(%zc3 : f32) outs(%e4 : tensor<4x8x8xf32>) -> tensor<4x8x8xf32>
  %mm6 = linalg.batch_matmul indexing_maps = [affine_map<(d0, d1, d2, d3) -> (d0, d1, d3)>, affine_map<(d0, d1, d2, d3) -> (d0, d2, d3)>, affine_map<(d0, d1, d2, d3) -> (d0, d1, d2)>] ins(%c1, %c2 : tensor<4x8x16xf32>, tensor<4x8x16xf32>) outs(%z5 : tensor<4x8x8xf32>) -> tensor<4x8x8xf32>
  %x7 = tensor.expand_shape %mm6 [[0, 1], [2], [3]] output_shape [1, 4, 8, 8] : tensor<4x8x8xf32> into tensor<1x4x8x8xf32>
  %ninf8 = arith.constant 0xFF800000 : f32
  %s9 = arith.constant 2.500000e-01 : f32
  %e10 = tensor.empty() : tensor<1x4x8x8xf32>
  %g11 = linalg.generic {indexing_maps = [affine_map<(d0, d1, d2, d3) -> (d0, d1, d2, d3)>, affine_map<(d0, d1, d2, d3) -> (d0, d1, d2, d3)>], iterator_types = ["parallel", "parallel", "parallel", "parallel"]}
      ins(%x7 : tensor<1x4x8x8xf32>) outs(%e10 : tensor<1x4x8x8xf32>) {
    ^bb0(%a0: f32, %out: f32):
    %i = linalg.index 1 : index
    %j = linalg.index 3 : index
    %i64 = arith.index_cast %i : index to i64
    %j64 = arith.index_cast %j : index to i64
    %hidden = arith.cmpi sgt, %j64, %i64 : i64
    %x = arith.mulf %a0, %s9 : f32
    %r = arith.select %hidden, %ninf8, %x : f32
      linalg.yield %r : f32
    } -> tensor<1x4x8x8xf32>
  %e12 = tensor.empty() : tensor<1x4x8x8xf32>
  %sm13 = linalg.softmax dimension(3) ins(%g11 : tensor<1x4x8x8xf32>) outs(%e12 : tensor<1x4x8x8xf32>) -> tensor<1x4x8x8xf32>
  %c14 = tensor.collapse_shape %sm13 [[0, 1], [2], [3]] : tensor<1x4x8x8xf32> into tensor<4x8x8xf32>
  %c15 = tensor.collapse_shape %v [[0, 1], [2], [3]] : tensor<1x4x8x16xf32> into tensor<4x8x16xf32>
  %zc16 = arith.constant 0.000000e+00 : f32
  %e17 = tensor.empty() : tensor<4x8x16xf32>
  %z18 = linalg.fill ins(%zc16 : f32) outs(%e17 : tensor<4x8x16xf32>) -> tensor<4x8x16xf32>
  // expected-remark @+1 {{not raised: the mask depends on the batch or head index}}
  %mm19 = linalg.batch_matmul ins(%c14, %c15 : tensor<4x8x8xf32>, tensor<4x8x16xf32>) outs(%z18 : tensor<4x8x16xf32>) -> tensor<4x8x16xf32>
  %x20 = tensor.expand_shape %mm19 [[0, 1], [2], [3]] output_shape [1, 4, 8, 16] : tensor<4x8x16xf32> into tensor<1x4x8x16xf32>
  return %x20 : tensor<1x4x8x16xf32>
}

// -----

// GPT-2 style: a registered 0/1 tril buffer [1, 1, N, N] (a constant),
// `bias == 0` by arith.cmpf on the f64 scalar, masked_fill(-inf), the mask
// broadcast over batch and heads with (0, 0, d2, d3); divide by sqrt(D).
// CHECK-LABEL: func @constant_tril_buffer
// CHECK-NEXT: %[[O:.*]] = fa.attention %arg0, %arg1, %arg2 {causal, scale = 2.500000e-01 : f32} : tensor<1x2x4x16xf32>
// CHECK-NEXT: return %[[O]]
func.func @constant_tril_buffer(%q: tensor<1x2x4x16xf32>, %k: tensor<1x2x4x16xf32>, %v: tensor<1x2x4x16xf32>) -> tensor<1x2x4x16xf32> {
  %bias1 = arith.constant dense<[[[[1.000000e+00, 0.000000e+00, 0.000000e+00, 0.000000e+00], [1.000000e+00, 1.000000e+00, 0.000000e+00, 0.000000e+00], [1.000000e+00, 1.000000e+00, 1.000000e+00, 0.000000e+00], [1.000000e+00, 1.000000e+00, 1.000000e+00, 1.000000e+00]]]]> : tensor<1x1x4x4xf32>
  %e2 = tensor.empty() : tensor<1x2x16x4xf32>
  %t3 = linalg.transpose ins(%k : tensor<1x2x4x16xf32>) outs(%e2 : tensor<1x2x16x4xf32>) permutation = [0, 1, 3, 2]
  %c4 = tensor.collapse_shape %q [[0, 1], [2], [3]] : tensor<1x2x4x16xf32> into tensor<2x4x16xf32>
  %c5 = tensor.collapse_shape %t3 [[0, 1], [2], [3]] : tensor<1x2x16x4xf32> into tensor<2x16x4xf32>
  %zc6 = arith.constant 0.000000e+00 : f32
  %e7 = tensor.empty() : tensor<2x4x4xf32>
  %z8 = linalg.fill ins(%zc6 : f32) outs(%e7 : tensor<2x4x4xf32>) -> tensor<2x4x4xf32>
  %mm9 = linalg.batch_matmul ins(%c4, %c5 : tensor<2x4x16xf32>, tensor<2x16x4xf32>) outs(%z8 : tensor<2x4x4xf32>) -> tensor<2x4x4xf32>
  %x10 = tensor.expand_shape %mm9 [[0, 1], [2], [3]] output_shape [1, 2, 4, 4] : tensor<2x4x4xf32> into tensor<1x2x4x4xf32>
  %s6411 = arith.constant 4.0 : f64
  %e12 = tensor.empty() : tensor<1x2x4x4xf32>
  %g13 = linalg.generic {indexing_maps = [affine_map<(d0, d1, d2, d3) -> (d0, d1, d2, d3)>, affine_map<(d0, d1, d2, d3) -> (d0, d1, d2, d3)>], iterator_types = ["parallel", "parallel", "parallel", "parallel"]}
      ins(%x10 : tensor<1x2x4x4xf32>) outs(%e12 : tensor<1x2x4x4xf32>) {
    ^bb0(%a0: f32, %out: f32):
    %c = arith.truncf %s6411 : f64 to f32
    %r = arith.divf %a0, %c : f32
      linalg.yield %r : f32
    } -> tensor<1x2x4x4xf32>
  %zero6414 = arith.constant 0.000000e+00 : f64
  %e15 = tensor.empty() : tensor<1x1x4x4xi1>
  // bias == 0
  %g16 = linalg.generic {indexing_maps = [affine_map<(d0, d1, d2, d3) -> (d0, d1, d2, d3)>, affine_map<(d0, d1, d2, d3) -> (d0, d1, d2, d3)>], iterator_types = ["parallel", "parallel", "parallel", "parallel"]}
      ins(%bias1 : tensor<1x1x4x4xf32>) outs(%e15 : tensor<1x1x4x4xi1>) {
    ^bb0(%a0: f32, %out: i1):
    %c = arith.truncf %zero6414 : f64 to f32
    %r = arith.cmpf oeq, %a0, %c : f32
      linalg.yield %r : i1
    } -> tensor<1x1x4x4xi1>
  %ninf6417 = arith.constant 0xFFF0000000000000 : f64
  %e18 = tensor.empty() : tensor<1x2x4x4xf32>
  // masked_fill(bias == 0, -inf)
  %g19 = linalg.generic {indexing_maps = [affine_map<(d0, d1, d2, d3) -> (d0, d1, d2, d3)>, affine_map<(d0, d1, d2, d3) -> (0, 0, d2, d3)>, affine_map<(d0, d1, d2, d3) -> (d0, d1, d2, d3)>], iterator_types = ["parallel", "parallel", "parallel", "parallel"]}
      ins(%g13, %g16 : tensor<1x2x4x4xf32>, tensor<1x1x4x4xi1>) outs(%e18 : tensor<1x2x4x4xf32>) {
    ^bb0(%a0: f32, %a1: i1, %out: f32):
    %c = arith.truncf %ninf6417 : f64 to f32
    %r = arith.select %a1, %c, %a0 : f32
      linalg.yield %r : f32
    } -> tensor<1x2x4x4xf32>
  %ninf20 = arith.constant 0xFF800000 : f32
  %e21 = tensor.empty() : tensor<1x2x4x1xf32>
  %mf22 = linalg.fill ins(%ninf20 : f32) outs(%e21 : tensor<1x2x4x1xf32>) -> tensor<1x2x4x1xf32>
  %g23 = linalg.generic {indexing_maps = [affine_map<(d0, d1, d2, d3) -> (d0, d1, d2, d3)>, affine_map<(d0, d1, d2, d3) -> (d0, d1, d2, 0)>], iterator_types = ["parallel", "parallel", "parallel", "reduction"]}
      ins(%g19 : tensor<1x2x4x4xf32>) outs(%mf22 : tensor<1x2x4x1xf32>) {
    ^bb0(%a0: f32, %out: f32):
    %r = arith.maximumf %a0, %out : f32
      linalg.yield %r : f32
    } -> tensor<1x2x4x1xf32>
  %e24 = tensor.empty() : tensor<1x2x4x4xf32>
  %g25 = linalg.generic {indexing_maps = [affine_map<(d0, d1, d2, d3) -> (d0, d1, d2, d3)>, affine_map<(d0, d1, d2, d3) -> (d0, d1, d2, 0)>, affine_map<(d0, d1, d2, d3) -> (d0, d1, d2, d3)>], iterator_types = ["parallel", "parallel", "parallel", "parallel"]}
      ins(%g19, %g23 : tensor<1x2x4x4xf32>, tensor<1x2x4x1xf32>) outs(%e24 : tensor<1x2x4x4xf32>) {
    ^bb0(%a0: f32, %a1: f32, %out: f32):
    %r = arith.subf %a0, %a1 : f32
      linalg.yield %r : f32
    } -> tensor<1x2x4x4xf32>
  %e26 = tensor.empty() : tensor<1x2x4x4xf32>
  %g27 = linalg.generic {indexing_maps = [affine_map<(d0, d1, d2, d3) -> (d0, d1, d2, d3)>, affine_map<(d0, d1, d2, d3) -> (d0, d1, d2, d3)>], iterator_types = ["parallel", "parallel", "parallel", "parallel"]}
      ins(%g25 : tensor<1x2x4x4xf32>) outs(%e26 : tensor<1x2x4x4xf32>) {
    ^bb0(%a0: f32, %out: f32):
    %r = math.exp %a0 : f32
      linalg.yield %r : f32
    } -> tensor<1x2x4x4xf32>
  %zc28 = arith.constant 0.000000e+00 : f32
  %e29 = tensor.empty() : tensor<1x2x4x1xf32>
  %z30 = linalg.fill ins(%zc28 : f32) outs(%e29 : tensor<1x2x4x1xf32>) -> tensor<1x2x4x1xf32>
  %g31 = linalg.generic {indexing_maps = [affine_map<(d0, d1, d2, d3) -> (d0, d1, d2, d3)>, affine_map<(d0, d1, d2, d3) -> (d0, d1, d2, 0)>], iterator_types = ["parallel", "parallel", "parallel", "reduction"]}
      ins(%g27 : tensor<1x2x4x4xf32>) outs(%z30 : tensor<1x2x4x1xf32>) {
    ^bb0(%a0: f32, %out: f32):
    %r = arith.addf %a0, %out : f32
      linalg.yield %r : f32
    } -> tensor<1x2x4x1xf32>
  %e32 = tensor.empty() : tensor<1x2x4x4xf32>
  %g33 = linalg.generic {indexing_maps = [affine_map<(d0, d1, d2, d3) -> (d0, d1, d2, d3)>, affine_map<(d0, d1, d2, d3) -> (d0, d1, d2, 0)>, affine_map<(d0, d1, d2, d3) -> (d0, d1, d2, d3)>], iterator_types = ["parallel", "parallel", "parallel", "parallel"]}
      ins(%g27, %g31 : tensor<1x2x4x4xf32>, tensor<1x2x4x1xf32>) outs(%e32 : tensor<1x2x4x4xf32>) {
    ^bb0(%a0: f32, %a1: f32, %out: f32):
    %r = arith.divf %a0, %a1 : f32
      linalg.yield %r : f32
    } -> tensor<1x2x4x4xf32>
  %c34 = tensor.collapse_shape %g33 [[0, 1], [2], [3]] : tensor<1x2x4x4xf32> into tensor<2x4x4xf32>
  %c35 = tensor.collapse_shape %v [[0, 1], [2], [3]] : tensor<1x2x4x16xf32> into tensor<2x4x16xf32>
  %zc36 = arith.constant 0.000000e+00 : f32
  %e37 = tensor.empty() : tensor<2x4x16xf32>
  %z38 = linalg.fill ins(%zc36 : f32) outs(%e37 : tensor<2x4x16xf32>) -> tensor<2x4x16xf32>
  %mm39 = linalg.batch_matmul ins(%c34, %c35 : tensor<2x4x4xf32>, tensor<2x4x16xf32>) outs(%z38 : tensor<2x4x16xf32>) -> tensor<2x4x16xf32>
  %x40 = tensor.expand_shape %mm39 [[0, 1], [2], [3]] output_shape [1, 2, 4, 16] : tensor<2x4x16xf32> into tensor<1x2x4x16xf32>
  return %x40 : tensor<1x2x4x16xf32>
}

// -----

// Not causal: the buffer is not a triangle (key 0 hidden from query 2). Its
// masked_fill is raised as what it is, a mask_mod reading the computed
// boolean tensor (hidden where true, so negated), not as `causal`.
// CHECK-LABEL: func @constant_buffer_not_causal
// CHECK: fa.attention %arg0, %arg1, %arg2 captures(%{{.*}} : tensor<1x1x4x4xi1>) {scale = 2.500000e-01 : f32}
// CHECK-SAME: mask_mod {
// CHECK: arith.xori
func.func @constant_buffer_not_causal(%q: tensor<1x2x4x16xf32>, %k: tensor<1x2x4x16xf32>, %v: tensor<1x2x4x16xf32>) -> tensor<1x2x4x16xf32> {
  %bias1 = arith.constant dense<[[[[1.000000e+00, 0.000000e+00, 0.000000e+00, 0.000000e+00], [1.000000e+00, 1.000000e+00, 0.000000e+00, 0.000000e+00], [0.000000e+00, 1.000000e+00, 1.000000e+00, 0.000000e+00], [1.000000e+00, 1.000000e+00, 1.000000e+00, 1.000000e+00]]]]> : tensor<1x1x4x4xf32>
  %e2 = tensor.empty() : tensor<1x2x16x4xf32>
  %t3 = linalg.transpose ins(%k : tensor<1x2x4x16xf32>) outs(%e2 : tensor<1x2x16x4xf32>) permutation = [0, 1, 3, 2]
  %c4 = tensor.collapse_shape %q [[0, 1], [2], [3]] : tensor<1x2x4x16xf32> into tensor<2x4x16xf32>
  %c5 = tensor.collapse_shape %t3 [[0, 1], [2], [3]] : tensor<1x2x16x4xf32> into tensor<2x16x4xf32>
  %zc6 = arith.constant 0.000000e+00 : f32
  %e7 = tensor.empty() : tensor<2x4x4xf32>
  %z8 = linalg.fill ins(%zc6 : f32) outs(%e7 : tensor<2x4x4xf32>) -> tensor<2x4x4xf32>
  %mm9 = linalg.batch_matmul ins(%c4, %c5 : tensor<2x4x16xf32>, tensor<2x16x4xf32>) outs(%z8 : tensor<2x4x4xf32>) -> tensor<2x4x4xf32>
  %x10 = tensor.expand_shape %mm9 [[0, 1], [2], [3]] output_shape [1, 2, 4, 4] : tensor<2x4x4xf32> into tensor<1x2x4x4xf32>
  %s6411 = arith.constant 4.0 : f64
  %e12 = tensor.empty() : tensor<1x2x4x4xf32>
  %g13 = linalg.generic {indexing_maps = [affine_map<(d0, d1, d2, d3) -> (d0, d1, d2, d3)>, affine_map<(d0, d1, d2, d3) -> (d0, d1, d2, d3)>], iterator_types = ["parallel", "parallel", "parallel", "parallel"]}
      ins(%x10 : tensor<1x2x4x4xf32>) outs(%e12 : tensor<1x2x4x4xf32>) {
    ^bb0(%a0: f32, %out: f32):
    %c = arith.truncf %s6411 : f64 to f32
    %r = arith.divf %a0, %c : f32
      linalg.yield %r : f32
    } -> tensor<1x2x4x4xf32>
  %zero6414 = arith.constant 0.000000e+00 : f64
  %e15 = tensor.empty() : tensor<1x1x4x4xi1>
  // bias == 0
  %g16 = linalg.generic {indexing_maps = [affine_map<(d0, d1, d2, d3) -> (d0, d1, d2, d3)>, affine_map<(d0, d1, d2, d3) -> (d0, d1, d2, d3)>], iterator_types = ["parallel", "parallel", "parallel", "parallel"]}
      ins(%bias1 : tensor<1x1x4x4xf32>) outs(%e15 : tensor<1x1x4x4xi1>) {
    ^bb0(%a0: f32, %out: i1):
    %c = arith.truncf %zero6414 : f64 to f32
    %r = arith.cmpf oeq, %a0, %c : f32
      linalg.yield %r : i1
    } -> tensor<1x1x4x4xi1>
  %ninf6417 = arith.constant 0xFFF0000000000000 : f64
  %e18 = tensor.empty() : tensor<1x2x4x4xf32>
  // masked_fill(bias == 0, -inf)
  %g19 = linalg.generic {indexing_maps = [affine_map<(d0, d1, d2, d3) -> (d0, d1, d2, d3)>, affine_map<(d0, d1, d2, d3) -> (0, 0, d2, d3)>, affine_map<(d0, d1, d2, d3) -> (d0, d1, d2, d3)>], iterator_types = ["parallel", "parallel", "parallel", "parallel"]}
      ins(%g13, %g16 : tensor<1x2x4x4xf32>, tensor<1x1x4x4xi1>) outs(%e18 : tensor<1x2x4x4xf32>) {
    ^bb0(%a0: f32, %a1: i1, %out: f32):
    %c = arith.truncf %ninf6417 : f64 to f32
    %r = arith.select %a1, %c, %a0 : f32
      linalg.yield %r : f32
    } -> tensor<1x2x4x4xf32>
  %ninf20 = arith.constant 0xFF800000 : f32
  %e21 = tensor.empty() : tensor<1x2x4x1xf32>
  %mf22 = linalg.fill ins(%ninf20 : f32) outs(%e21 : tensor<1x2x4x1xf32>) -> tensor<1x2x4x1xf32>
  %g23 = linalg.generic {indexing_maps = [affine_map<(d0, d1, d2, d3) -> (d0, d1, d2, d3)>, affine_map<(d0, d1, d2, d3) -> (d0, d1, d2, 0)>], iterator_types = ["parallel", "parallel", "parallel", "reduction"]}
      ins(%g19 : tensor<1x2x4x4xf32>) outs(%mf22 : tensor<1x2x4x1xf32>) {
    ^bb0(%a0: f32, %out: f32):
    %r = arith.maximumf %a0, %out : f32
      linalg.yield %r : f32
    } -> tensor<1x2x4x1xf32>
  %e24 = tensor.empty() : tensor<1x2x4x4xf32>
  %g25 = linalg.generic {indexing_maps = [affine_map<(d0, d1, d2, d3) -> (d0, d1, d2, d3)>, affine_map<(d0, d1, d2, d3) -> (d0, d1, d2, 0)>, affine_map<(d0, d1, d2, d3) -> (d0, d1, d2, d3)>], iterator_types = ["parallel", "parallel", "parallel", "parallel"]}
      ins(%g19, %g23 : tensor<1x2x4x4xf32>, tensor<1x2x4x1xf32>) outs(%e24 : tensor<1x2x4x4xf32>) {
    ^bb0(%a0: f32, %a1: f32, %out: f32):
    %r = arith.subf %a0, %a1 : f32
      linalg.yield %r : f32
    } -> tensor<1x2x4x4xf32>
  %e26 = tensor.empty() : tensor<1x2x4x4xf32>
  %g27 = linalg.generic {indexing_maps = [affine_map<(d0, d1, d2, d3) -> (d0, d1, d2, d3)>, affine_map<(d0, d1, d2, d3) -> (d0, d1, d2, d3)>], iterator_types = ["parallel", "parallel", "parallel", "parallel"]}
      ins(%g25 : tensor<1x2x4x4xf32>) outs(%e26 : tensor<1x2x4x4xf32>) {
    ^bb0(%a0: f32, %out: f32):
    %r = math.exp %a0 : f32
      linalg.yield %r : f32
    } -> tensor<1x2x4x4xf32>
  %zc28 = arith.constant 0.000000e+00 : f32
  %e29 = tensor.empty() : tensor<1x2x4x1xf32>
  %z30 = linalg.fill ins(%zc28 : f32) outs(%e29 : tensor<1x2x4x1xf32>) -> tensor<1x2x4x1xf32>
  %g31 = linalg.generic {indexing_maps = [affine_map<(d0, d1, d2, d3) -> (d0, d1, d2, d3)>, affine_map<(d0, d1, d2, d3) -> (d0, d1, d2, 0)>], iterator_types = ["parallel", "parallel", "parallel", "reduction"]}
      ins(%g27 : tensor<1x2x4x4xf32>) outs(%z30 : tensor<1x2x4x1xf32>) {
    ^bb0(%a0: f32, %out: f32):
    %r = arith.addf %a0, %out : f32
      linalg.yield %r : f32
    } -> tensor<1x2x4x1xf32>
  %e32 = tensor.empty() : tensor<1x2x4x4xf32>
  %g33 = linalg.generic {indexing_maps = [affine_map<(d0, d1, d2, d3) -> (d0, d1, d2, d3)>, affine_map<(d0, d1, d2, d3) -> (d0, d1, d2, 0)>, affine_map<(d0, d1, d2, d3) -> (d0, d1, d2, d3)>], iterator_types = ["parallel", "parallel", "parallel", "parallel"]}
      ins(%g27, %g31 : tensor<1x2x4x4xf32>, tensor<1x2x4x1xf32>) outs(%e32 : tensor<1x2x4x4xf32>) {
    ^bb0(%a0: f32, %a1: f32, %out: f32):
    %r = arith.divf %a0, %a1 : f32
      linalg.yield %r : f32
    } -> tensor<1x2x4x4xf32>
  %c34 = tensor.collapse_shape %g33 [[0, 1], [2], [3]] : tensor<1x2x4x4xf32> into tensor<2x4x4xf32>
  %c35 = tensor.collapse_shape %v [[0, 1], [2], [3]] : tensor<1x2x4x16xf32> into tensor<2x4x16xf32>
  %zc36 = arith.constant 0.000000e+00 : f32
  %e37 = tensor.empty() : tensor<2x4x16xf32>
  %z38 = linalg.fill ins(%zc36 : f32) outs(%e37 : tensor<2x4x16xf32>) -> tensor<2x4x16xf32>
  %mm39 = linalg.batch_matmul ins(%c34, %c35 : tensor<2x4x4xf32>, tensor<2x4x16xf32>) outs(%z38 : tensor<2x4x16xf32>) -> tensor<2x4x16xf32>
  %x40 = tensor.expand_shape %mm39 [[0, 1], [2], [3]] output_shape [1, 2, 4, 16] : tensor<2x4x16xf32> into tensor<1x2x4x16xf32>
  return %x40 : tensor<1x2x4x16xf32>
}

// -----

// Hugging Face's causal mask: a constant [1, 1, N, N] that is 0 on and
// below the diagonal and torch.finfo(f16).min (-65504, 0xFBFF) above, added
// to f16 scores from an einsum generic; softmax in f32 between extf and
// truncf. finfo.min acts as -inf here (exp underflows to exactly 0).
// CHECK-LABEL: func @hf_finfo_min_mask
// CHECK-NEXT: %[[O:.*]] = fa.attention %arg0, %arg1, %arg2 {causal, scale = 2.500000e-01 : f32} : tensor<1x2x4x16xf16>
// CHECK-NEXT: return %[[O]]
func.func @hf_finfo_min_mask(%q: tensor<1x2x4x16xf16>, %k: tensor<1x2x4x16xf16>, %v: tensor<1x2x4x16xf16>) -> tensor<1x2x4x16xf16> {
  %mask1 = arith.constant dense<[[[[0.000000e+00, 0xFBFF, 0xFBFF, 0xFBFF], [0.000000e+00, 0.000000e+00, 0xFBFF, 0xFBFF], [0.000000e+00, 0.000000e+00, 0.000000e+00, 0xFBFF], [0.000000e+00, 0.000000e+00, 0.000000e+00, 0.000000e+00]]]]> : tensor<1x1x4x4xf16>
  %zc2 = arith.constant 0.000000e+00 : f16
  %e3 = tensor.empty() : tensor<1x2x4x4xf16>
  %z4 = linalg.fill ins(%zc2 : f16) outs(%e3 : tensor<1x2x4x4xf16>) -> tensor<1x2x4x4xf16>
  %qk5 = linalg.generic {indexing_maps = [affine_map<(b, h, i, j, d) -> (b, h, i, d)>, affine_map<(b, h, i, j, d) -> (b, h, j, d)>, affine_map<(b, h, i, j, d) -> (b, h, i, j)>], iterator_types = ["parallel", "parallel", "parallel", "parallel", "reduction"]}
      ins(%q, %k : tensor<1x2x4x16xf16>, tensor<1x2x4x16xf16>) outs(%z4 : tensor<1x2x4x4xf16>) {
    ^bb0(%a: f16, %b: f16, %acc: f16):
      %m = arith.mulf %a, %b : f16
      %r = arith.addf %acc, %m : f16
      linalg.yield %r : f16
    } -> tensor<1x2x4x4xf16>
  %s646 = arith.constant 2.500000e-01 : f64
  %e7 = tensor.empty() : tensor<1x2x4x4xf16>
  %g8 = linalg.generic {indexing_maps = [affine_map<(d0, d1, d2, d3) -> (d0, d1, d2, d3)>, affine_map<(d0, d1, d2, d3) -> (d0, d1, d2, d3)>], iterator_types = ["parallel", "parallel", "parallel", "parallel"]}
      ins(%qk5 : tensor<1x2x4x4xf16>) outs(%e7 : tensor<1x2x4x4xf16>) {
    ^bb0(%a0: f16, %out: f16):
    %c = arith.truncf %s646 : f64 to f16
    %r = arith.mulf %a0, %c : f16
      linalg.yield %r : f16
    } -> tensor<1x2x4x4xf16>
  %e9 = tensor.empty() : tensor<1x2x4x4xf16>
  // s + causal_mask
  %g10 = linalg.generic {indexing_maps = [affine_map<(d0, d1, d2, d3) -> (d0, d1, d2, d3)>, affine_map<(d0, d1, d2, d3) -> (0, 0, d2, d3)>, affine_map<(d0, d1, d2, d3) -> (d0, d1, d2, d3)>], iterator_types = ["parallel", "parallel", "parallel", "parallel"]}
      ins(%g8, %mask1 : tensor<1x2x4x4xf16>, tensor<1x1x4x4xf16>) outs(%e9 : tensor<1x2x4x4xf16>) {
    ^bb0(%a0: f16, %a1: f16, %out: f16):
    %r = arith.addf %a0, %a1 : f16
      linalg.yield %r : f16
    } -> tensor<1x2x4x4xf16>
  %e11 = tensor.empty() : tensor<1x2x4x4xf32>
  %g12 = linalg.generic {indexing_maps = [affine_map<(d0, d1, d2, d3) -> (d0, d1, d2, d3)>, affine_map<(d0, d1, d2, d3) -> (d0, d1, d2, d3)>], iterator_types = ["parallel", "parallel", "parallel", "parallel"]}
      ins(%g10 : tensor<1x2x4x4xf16>) outs(%e11 : tensor<1x2x4x4xf32>) {
    ^bb0(%a0: f16, %out: f32):
    %r = arith.extf %a0 : f16 to f32
      linalg.yield %r : f32
    } -> tensor<1x2x4x4xf32>
  %e13 = tensor.empty() : tensor<1x2x4x4xf32>
  %sm14 = linalg.softmax dimension(3) ins(%g12 : tensor<1x2x4x4xf32>) outs(%e13 : tensor<1x2x4x4xf32>) -> tensor<1x2x4x4xf32>
  %e15 = tensor.empty() : tensor<1x2x4x4xf16>
  %g16 = linalg.generic {indexing_maps = [affine_map<(d0, d1, d2, d3) -> (d0, d1, d2, d3)>, affine_map<(d0, d1, d2, d3) -> (d0, d1, d2, d3)>], iterator_types = ["parallel", "parallel", "parallel", "parallel"]}
      ins(%sm14 : tensor<1x2x4x4xf32>) outs(%e15 : tensor<1x2x4x4xf16>) {
    ^bb0(%a0: f32, %out: f16):
    %r = arith.truncf %a0 : f32 to f16
      linalg.yield %r : f16
    } -> tensor<1x2x4x4xf16>
  %zc17 = arith.constant 0.000000e+00 : f16
  %e18 = tensor.empty() : tensor<1x2x4x16xf16>
  %z19 = linalg.fill ins(%zc17 : f16) outs(%e18 : tensor<1x2x4x16xf16>) -> tensor<1x2x4x16xf16>
  %pv20 = linalg.generic {indexing_maps = [affine_map<(b, h, i, d, j) -> (b, h, i, j)>, affine_map<(b, h, i, d, j) -> (b, h, j, d)>, affine_map<(b, h, i, d, j) -> (b, h, i, d)>], iterator_types = ["parallel", "parallel", "parallel", "parallel", "reduction"]}
      ins(%g16, %v : tensor<1x2x4x4xf16>, tensor<1x2x4x16xf16>) outs(%z19 : tensor<1x2x4x16xf16>) {
    ^bb0(%a: f16, %b: f16, %acc: f16):
      %m = arith.mulf %a, %b : f16
      %r = arith.addf %acc, %m : f16
      linalg.yield %r : f16
    } -> tensor<1x2x4x16xf16>
  return %pv20 : tensor<1x2x4x16xf16>
}

// -----

// Must not fire: -10000 (old BERT masks) does not hide a key: exp(-10000 +
// s - m) is not 0 for large scores, and fa.attention cannot express it.
// CHECK-LABEL: func @additive_minus_1e4
// CHECK-NOT: fa.attention
func.func @additive_minus_1e4(%q: tensor<1x2x4x16xf16>, %k: tensor<1x2x4x16xf16>, %v: tensor<1x2x4x16xf16>) -> tensor<1x2x4x16xf16> {
  %mask1 = arith.constant dense<[[[[0.000000e+00, -1.000000e+04, -1.000000e+04, -1.000000e+04], [0.000000e+00, 0.000000e+00, -1.000000e+04, -1.000000e+04], [0.000000e+00, 0.000000e+00, 0.000000e+00, -1.000000e+04], [0.000000e+00, 0.000000e+00, 0.000000e+00, 0.000000e+00]]]]> : tensor<1x1x4x4xf16>
  %zc2 = arith.constant 0.000000e+00 : f16
  %e3 = tensor.empty() : tensor<1x2x4x4xf16>
  %z4 = linalg.fill ins(%zc2 : f16) outs(%e3 : tensor<1x2x4x4xf16>) -> tensor<1x2x4x4xf16>
  %qk5 = linalg.generic {indexing_maps = [affine_map<(b, h, i, j, d) -> (b, h, i, d)>, affine_map<(b, h, i, j, d) -> (b, h, j, d)>, affine_map<(b, h, i, j, d) -> (b, h, i, j)>], iterator_types = ["parallel", "parallel", "parallel", "parallel", "reduction"]}
      ins(%q, %k : tensor<1x2x4x16xf16>, tensor<1x2x4x16xf16>) outs(%z4 : tensor<1x2x4x4xf16>) {
    ^bb0(%a: f16, %b: f16, %acc: f16):
      %m = arith.mulf %a, %b : f16
      %r = arith.addf %acc, %m : f16
      linalg.yield %r : f16
    } -> tensor<1x2x4x4xf16>
  %s646 = arith.constant 2.500000e-01 : f64
  %e7 = tensor.empty() : tensor<1x2x4x4xf16>
  %g8 = linalg.generic {indexing_maps = [affine_map<(d0, d1, d2, d3) -> (d0, d1, d2, d3)>, affine_map<(d0, d1, d2, d3) -> (d0, d1, d2, d3)>], iterator_types = ["parallel", "parallel", "parallel", "parallel"]}
      ins(%qk5 : tensor<1x2x4x4xf16>) outs(%e7 : tensor<1x2x4x4xf16>) {
    ^bb0(%a0: f16, %out: f16):
    %c = arith.truncf %s646 : f64 to f16
    %r = arith.mulf %a0, %c : f16
      linalg.yield %r : f16
    } -> tensor<1x2x4x4xf16>
  %e9 = tensor.empty() : tensor<1x2x4x4xf16>
  // s + causal_mask
  %g10 = linalg.generic {indexing_maps = [affine_map<(d0, d1, d2, d3) -> (d0, d1, d2, d3)>, affine_map<(d0, d1, d2, d3) -> (0, 0, d2, d3)>, affine_map<(d0, d1, d2, d3) -> (d0, d1, d2, d3)>], iterator_types = ["parallel", "parallel", "parallel", "parallel"]}
      ins(%g8, %mask1 : tensor<1x2x4x4xf16>, tensor<1x1x4x4xf16>) outs(%e9 : tensor<1x2x4x4xf16>) {
    ^bb0(%a0: f16, %a1: f16, %out: f16):
    %r = arith.addf %a0, %a1 : f16
      linalg.yield %r : f16
    } -> tensor<1x2x4x4xf16>
  %e11 = tensor.empty() : tensor<1x2x4x4xf32>
  %g12 = linalg.generic {indexing_maps = [affine_map<(d0, d1, d2, d3) -> (d0, d1, d2, d3)>, affine_map<(d0, d1, d2, d3) -> (d0, d1, d2, d3)>], iterator_types = ["parallel", "parallel", "parallel", "parallel"]}
      ins(%g10 : tensor<1x2x4x4xf16>) outs(%e11 : tensor<1x2x4x4xf32>) {
    ^bb0(%a0: f16, %out: f32):
    %r = arith.extf %a0 : f16 to f32
      linalg.yield %r : f32
    } -> tensor<1x2x4x4xf32>
  %e13 = tensor.empty() : tensor<1x2x4x4xf32>
  %sm14 = linalg.softmax dimension(3) ins(%g12 : tensor<1x2x4x4xf32>) outs(%e13 : tensor<1x2x4x4xf32>) -> tensor<1x2x4x4xf32>
  %e15 = tensor.empty() : tensor<1x2x4x4xf16>
  %g16 = linalg.generic {indexing_maps = [affine_map<(d0, d1, d2, d3) -> (d0, d1, d2, d3)>, affine_map<(d0, d1, d2, d3) -> (d0, d1, d2, d3)>], iterator_types = ["parallel", "parallel", "parallel", "parallel"]}
      ins(%sm14 : tensor<1x2x4x4xf32>) outs(%e15 : tensor<1x2x4x4xf16>) {
    ^bb0(%a0: f32, %out: f16):
    %r = arith.truncf %a0 : f32 to f16
      linalg.yield %r : f16
    } -> tensor<1x2x4x4xf16>
  %zc17 = arith.constant 0.000000e+00 : f16
  %e18 = tensor.empty() : tensor<1x2x4x16xf16>
  %z19 = linalg.fill ins(%zc17 : f16) outs(%e18 : tensor<1x2x4x16xf16>) -> tensor<1x2x4x16xf16>
  // expected-remark @+1 {{not raised: the mask adds 0.0 and -10000.0, not 0 where visible and -inf where hidden}}
  %pv20 = linalg.generic {indexing_maps = [affine_map<(b, h, i, d, j) -> (b, h, i, j)>, affine_map<(b, h, i, d, j) -> (b, h, j, d)>, affine_map<(b, h, i, d, j) -> (b, h, i, d)>], iterator_types = ["parallel", "parallel", "parallel", "parallel", "reduction"]}
      ins(%g16, %v : tensor<1x2x4x4xf16>, tensor<1x2x4x16xf16>) outs(%z19 : tensor<1x2x4x16xf16>) {
    ^bb0(%a: f16, %b: f16, %acc: f16):
      %m = arith.mulf %a, %b : f16
      %r = arith.addf %acc, %m : f16
      linalg.yield %r : f16
    } -> tensor<1x2x4x16xf16>
  return %pv20 : tensor<1x2x4x16xf16>
}

// -----

// A causal sliding window (Mistral): keep j <= i and i - j < 4, two index
// comparisons and'ed; bf16 x bf16 -> f32 contractions, no scale.
// CHECK-LABEL: func @causal_sliding_window
// CHECK-NEXT: %[[O:.*]] = fa.attention %arg0, %arg1, %arg2 {causal, scale = 1.000000e+00 : f32, window = 4 : i64} : tensor<1x2x16x32xbf16>
// CHECK-NEXT: return %[[O]]
func.func @causal_sliding_window(%q: tensor<1x2x16x32xbf16>, %k: tensor<1x2x16x32xbf16>, %v: tensor<1x2x16x32xbf16>) -> tensor<1x2x16x32xbf16> {
  %c1 = tensor.collapse_shape %q [[0, 1], [2], [3]] : tensor<1x2x16x32xbf16> into tensor<2x16x32xbf16>
  %c2 = tensor.collapse_shape %k [[0, 1], [2], [3]] : tensor<1x2x16x32xbf16> into tensor<2x16x32xbf16>
  %zc3 = arith.constant 0.000000e+00 : f32
  %e4 = tensor.empty() : tensor<2x16x16xf32>
  %z5 = linalg.fill ins(%zc3 : f32) outs(%e4 : tensor<2x16x16xf32>) -> tensor<2x16x16xf32>
  %mm6 = linalg.batch_matmul indexing_maps = [affine_map<(d0, d1, d2, d3) -> (d0, d1, d3)>, affine_map<(d0, d1, d2, d3) -> (d0, d2, d3)>, affine_map<(d0, d1, d2, d3) -> (d0, d1, d2)>] ins(%c1, %c2 : tensor<2x16x32xbf16>, tensor<2x16x32xbf16>) outs(%z5 : tensor<2x16x16xf32>) -> tensor<2x16x16xf32>
  %x7 = tensor.expand_shape %mm6 [[0, 1], [2], [3]] output_shape [1, 2, 16, 16] : tensor<2x16x16xf32> into tensor<1x2x16x16xf32>
  %ninf8 = arith.constant 0xFF800000 : f32
  %w9 = arith.constant 4 : index
  %e10 = tensor.empty() : tensor<1x2x16x16xf32>
  // sliding window
  %g11 = linalg.generic {indexing_maps = [affine_map<(d0, d1, d2, d3) -> (d0, d1, d2, d3)>, affine_map<(d0, d1, d2, d3) -> (d0, d1, d2, d3)>], iterator_types = ["parallel", "parallel", "parallel", "parallel"]}
      ins(%x7 : tensor<1x2x16x16xf32>) outs(%e10 : tensor<1x2x16x16xf32>) {
    ^bb0(%a0: f32, %out: f32):
    %i = linalg.index 2 : index
    %j = linalg.index 3 : index
    %causal = arith.cmpi ule, %j, %i : index
    %d = arith.subi %i, %j : index
    %near = arith.cmpi slt, %d, %w9 : index
    %keep = arith.andi %causal, %near : i1
    %r = arith.select %keep, %a0, %ninf8 : f32
      linalg.yield %r : f32
    } -> tensor<1x2x16x16xf32>
  %e12 = tensor.empty() : tensor<1x2x16x16xf32>
  %sm13 = linalg.softmax dimension(3) ins(%g11 : tensor<1x2x16x16xf32>) outs(%e12 : tensor<1x2x16x16xf32>) -> tensor<1x2x16x16xf32>
  %e14 = tensor.empty() : tensor<1x2x16x16xbf16>
  %g15 = linalg.generic {indexing_maps = [affine_map<(d0, d1, d2, d3) -> (d0, d1, d2, d3)>, affine_map<(d0, d1, d2, d3) -> (d0, d1, d2, d3)>], iterator_types = ["parallel", "parallel", "parallel", "parallel"]}
      ins(%sm13 : tensor<1x2x16x16xf32>) outs(%e14 : tensor<1x2x16x16xbf16>) {
    ^bb0(%a0: f32, %out: bf16):
    %r = arith.truncf %a0 : f32 to bf16
      linalg.yield %r : bf16
    } -> tensor<1x2x16x16xbf16>
  %c16 = tensor.collapse_shape %g15 [[0, 1], [2], [3]] : tensor<1x2x16x16xbf16> into tensor<2x16x16xbf16>
  %c17 = tensor.collapse_shape %v [[0, 1], [2], [3]] : tensor<1x2x16x32xbf16> into tensor<2x16x32xbf16>
  %zc18 = arith.constant 0.000000e+00 : f32
  %e19 = tensor.empty() : tensor<2x16x32xf32>
  %z20 = linalg.fill ins(%zc18 : f32) outs(%e19 : tensor<2x16x32xf32>) -> tensor<2x16x32xf32>
  %mm21 = linalg.batch_matmul ins(%c16, %c17 : tensor<2x16x16xbf16>, tensor<2x16x32xbf16>) outs(%z20 : tensor<2x16x32xf32>) -> tensor<2x16x32xf32>
  %x22 = tensor.expand_shape %mm21 [[0, 1], [2], [3]] output_shape [1, 2, 16, 32] : tensor<2x16x32xf32> into tensor<1x2x16x32xf32>
  %e23 = tensor.empty() : tensor<1x2x16x32xbf16>
  %g24 = linalg.generic {indexing_maps = [affine_map<(d0, d1, d2, d3) -> (d0, d1, d2, d3)>, affine_map<(d0, d1, d2, d3) -> (d0, d1, d2, d3)>], iterator_types = ["parallel", "parallel", "parallel", "parallel"]}
      ins(%x22 : tensor<1x2x16x32xf32>) outs(%e23 : tensor<1x2x16x32xbf16>) {
    ^bb0(%a0: f32, %out: bf16):
    %r = arith.truncf %a0 : f32 to bf16
      linalg.yield %r : bf16
    } -> tensor<1x2x16x32xbf16>
  return %g24 : tensor<1x2x16x32xbf16>
}

// -----

// Must not fire: a band that is not symmetric around the diagonal
// (-1 <= j - i <= 2) is neither causal nor a window.
// CHECK-LABEL: func @asymmetric_band
// CHECK-NOT: fa.attention
func.func @asymmetric_band(%q: tensor<1x2x16x32xbf16>, %k: tensor<1x2x16x32xbf16>, %v: tensor<1x2x16x32xbf16>) -> tensor<1x2x16x32xbf16> {
  %c1 = tensor.collapse_shape %q [[0, 1], [2], [3]] : tensor<1x2x16x32xbf16> into tensor<2x16x32xbf16>
  %c2 = tensor.collapse_shape %k [[0, 1], [2], [3]] : tensor<1x2x16x32xbf16> into tensor<2x16x32xbf16>
  %zc3 = arith.constant 0.000000e+00 : f32
  %e4 = tensor.empty() : tensor<2x16x16xf32>
  %z5 = linalg.fill ins(%zc3 : f32) outs(%e4 : tensor<2x16x16xf32>) -> tensor<2x16x16xf32>
  %mm6 = linalg.batch_matmul indexing_maps = [affine_map<(d0, d1, d2, d3) -> (d0, d1, d3)>, affine_map<(d0, d1, d2, d3) -> (d0, d2, d3)>, affine_map<(d0, d1, d2, d3) -> (d0, d1, d2)>] ins(%c1, %c2 : tensor<2x16x32xbf16>, tensor<2x16x32xbf16>) outs(%z5 : tensor<2x16x16xf32>) -> tensor<2x16x16xf32>
  %x7 = tensor.expand_shape %mm6 [[0, 1], [2], [3]] output_shape [1, 2, 16, 16] : tensor<2x16x16xf32> into tensor<1x2x16x16xf32>
  %ninf8 = arith.constant 0xFF800000 : f32
  %w9 = arith.constant 4 : index
  %e10 = tensor.empty() : tensor<1x2x16x16xf32>
  // sliding window
  %g11 = linalg.generic {indexing_maps = [affine_map<(d0, d1, d2, d3) -> (d0, d1, d2, d3)>, affine_map<(d0, d1, d2, d3) -> (d0, d1, d2, d3)>], iterator_types = ["parallel", "parallel", "parallel", "parallel"]}
      ins(%x7 : tensor<1x2x16x16xf32>) outs(%e10 : tensor<1x2x16x16xf32>) {
    ^bb0(%a0: f32, %out: f32):
    %i = linalg.index 2 : index
    %j = linalg.index 3 : index
    %two = arith.constant 2 : index
    %jm = arith.subi %j, %two : index
    %upper = arith.cmpi sle, %jm, %i : index
    %d = arith.subi %i, %j : index
    %one = arith.constant 1 : index
    %lower = arith.cmpi sle, %d, %one : index
    %keep = arith.andi %upper, %lower : i1
    %r = arith.select %keep, %a0, %ninf8 : f32
      linalg.yield %r : f32
    } -> tensor<1x2x16x16xf32>
  %e12 = tensor.empty() : tensor<1x2x16x16xf32>
  %sm13 = linalg.softmax dimension(3) ins(%g11 : tensor<1x2x16x16xf32>) outs(%e12 : tensor<1x2x16x16xf32>) -> tensor<1x2x16x16xf32>
  %e14 = tensor.empty() : tensor<1x2x16x16xbf16>
  %g15 = linalg.generic {indexing_maps = [affine_map<(d0, d1, d2, d3) -> (d0, d1, d2, d3)>, affine_map<(d0, d1, d2, d3) -> (d0, d1, d2, d3)>], iterator_types = ["parallel", "parallel", "parallel", "parallel"]}
      ins(%sm13 : tensor<1x2x16x16xf32>) outs(%e14 : tensor<1x2x16x16xbf16>) {
    ^bb0(%a0: f32, %out: bf16):
    %r = arith.truncf %a0 : f32 to bf16
      linalg.yield %r : bf16
    } -> tensor<1x2x16x16xbf16>
  %c16 = tensor.collapse_shape %g15 [[0, 1], [2], [3]] : tensor<1x2x16x16xbf16> into tensor<2x16x16xbf16>
  %c17 = tensor.collapse_shape %v [[0, 1], [2], [3]] : tensor<1x2x16x32xbf16> into tensor<2x16x32xbf16>
  %zc18 = arith.constant 0.000000e+00 : f32
  %e19 = tensor.empty() : tensor<2x16x32xf32>
  %z20 = linalg.fill ins(%zc18 : f32) outs(%e19 : tensor<2x16x32xf32>) -> tensor<2x16x32xf32>
  // expected-remark @+1 {{not raised: the mask is not causal or a window: visible where j - i <= 2 and i - j <= 1}}
  %mm21 = linalg.batch_matmul ins(%c16, %c17 : tensor<2x16x16xbf16>, tensor<2x16x32xbf16>) outs(%z20 : tensor<2x16x32xf32>) -> tensor<2x16x32xf32>
  %x22 = tensor.expand_shape %mm21 [[0, 1], [2], [3]] output_shape [1, 2, 16, 32] : tensor<2x16x32xf32> into tensor<1x2x16x32xf32>
  %e23 = tensor.empty() : tensor<1x2x16x32xbf16>
  %g24 = linalg.generic {indexing_maps = [affine_map<(d0, d1, d2, d3) -> (d0, d1, d2, d3)>, affine_map<(d0, d1, d2, d3) -> (d0, d1, d2, d3)>], iterator_types = ["parallel", "parallel", "parallel", "parallel"]}
      ins(%x22 : tensor<1x2x16x32xf32>) outs(%e23 : tensor<1x2x16x32xbf16>) {
    ^bb0(%a0: f32, %out: bf16):
    %r = arith.truncf %a0 : f32 to bf16
      linalg.yield %r : bf16
    } -> tensor<1x2x16x32xbf16>
  return %g24 : tensor<1x2x16x32xbf16>
}

// -----

// Flax's dot_product_attention through StableHLO -> linalg: Q, K, V and O
// in [B, N, H, D] read and written directly by dot_general einsums, the
// query divided by sqrt(D) (the scale folded into Q), make_causal_mask as an
// i1 tensor from iota comparisons, where(mask, w, finfo(f32).min), softmax
// with row statistics without keep-dim. The raised op gets [B, H, N, D]
// transposes of the arguments and its O is transposed back.
// CHECK-LABEL: func @flax_bnhd_einsum
// CHECK-SAME: (%[[Q:.*]]: tensor<2x8x4x32xf32>, %[[K:.*]]: tensor<2x8x4x32xf32>, %[[V:.*]]: tensor<2x8x4x32xf32>)
// CHECK-DAG: %[[QT:.*]] = linalg.transpose ins(%[[Q]] : tensor<2x8x4x32xf32>) outs(%{{.*}} : tensor<2x4x8x32xf32>) permutation = [0, 2, 1, 3]
// CHECK-DAG: %[[KT:.*]] = linalg.transpose ins(%[[K]] : tensor<2x8x4x32xf32>) outs(%{{.*}} : tensor<2x4x8x32xf32>) permutation = [0, 2, 1, 3]
// CHECK-DAG: %[[VT:.*]] = linalg.transpose ins(%[[V]] : tensor<2x8x4x32xf32>) outs(%{{.*}} : tensor<2x4x8x32xf32>) permutation = [0, 2, 1, 3]
// CHECK: %[[O:.*]] = fa.attention %[[QT]], %[[KT]], %[[VT]] {causal, scale = 0.176776692 : f32} : tensor<2x4x8x32xf32>, tensor<2x4x8x32xf32>, tensor<2x4x8x32xf32> -> tensor<2x4x8x32xf32>
// CHECK: %[[OT:.*]] = linalg.transpose ins(%[[O]] : tensor<2x4x8x32xf32>) outs(%{{.*}} : tensor<2x8x4x32xf32>) permutation = [0, 2, 1, 3]
// CHECK-NEXT: return %[[OT]]
func.func @flax_bnhd_einsum(%q: tensor<2x8x4x32xf32>, %k: tensor<2x8x4x32xf32>, %v: tensor<2x8x4x32xf32>) -> tensor<2x8x4x32xf32> {
  %sqrt_d1 = arith.constant 5.65685415 : f32
  %e2 = tensor.empty() : tensor<2x8x4x32xf32>
  // query / sqrt(depth)
  %g3 = linalg.generic {indexing_maps = [affine_map<(d0, d1, d2, d3) -> (d0, d1, d2, d3)>, affine_map<(d0, d1, d2, d3) -> (d0, d1, d2, d3)>], iterator_types = ["parallel", "parallel", "parallel", "parallel"]}
      ins(%q : tensor<2x8x4x32xf32>) outs(%e2 : tensor<2x8x4x32xf32>) {
    ^bb0(%a0: f32, %out: f32):
    %r = arith.divf %a0, %sqrt_d1 : f32
      linalg.yield %r : f32
    } -> tensor<2x8x4x32xf32>
  %zc4 = arith.constant 0.000000e+00 : f32
  %e5 = tensor.empty() : tensor<2x4x8x8xf32>
  %z6 = linalg.fill ins(%zc4 : f32) outs(%e5 : tensor<2x4x8x8xf32>) -> tensor<2x4x8x8xf32>
  // einsum('bqhd,bkhd->bhqk'): dot_general reading [B, N, H, D]
  %qk7 = linalg.generic {indexing_maps = [affine_map<(b, h, q, k, d) -> (b, q, h, d)>, affine_map<(b, h, q, k, d) -> (b, k, h, d)>, affine_map<(b, h, q, k, d) -> (b, h, q, k)>], iterator_types = ["parallel", "parallel", "parallel", "parallel", "reduction"]}
      ins(%g3, %k : tensor<2x8x4x32xf32>, tensor<2x8x4x32xf32>) outs(%z6 : tensor<2x4x8x8xf32>) {
    ^bb0(%a: f32, %b: f32, %acc: f32):
      %m = arith.mulf %a, %b : f32
      %r = arith.addf %acc, %m : f32
      linalg.yield %r : f32
    } -> tensor<2x4x8x8xf32>
  %e8 = tensor.empty() : tensor<1x1x8x8xi1>
  // make_causal_mask: greater_equal(iota_q, iota_k)
  %causal9 = linalg.generic {indexing_maps = [affine_map<(d0, d1, d2, d3) -> (d0, d1, d2, d3)>], iterator_types = ["parallel", "parallel", "parallel", "parallel"]} outs(%e8 : tensor<1x1x8x8xi1>) {
    ^bb0(%out: i1):
      %i = linalg.index 2 : index
      %j = linalg.index 3 : index
      %r = arith.cmpi sge, %i, %j : index
      linalg.yield %r : i1
    } -> tensor<1x1x8x8xi1>
  %big_neg10 = arith.constant -3.40282347E+38 : f32
  %e11 = tensor.empty() : tensor<2x4x8x8xf32>
  // where(mask, w, finfo.min)
  %g12 = linalg.generic {indexing_maps = [affine_map<(d0, d1, d2, d3) -> (d0, d1, d2, d3)>, affine_map<(d0, d1, d2, d3) -> (0, 0, d2, d3)>, affine_map<(d0, d1, d2, d3) -> (d0, d1, d2, d3)>], iterator_types = ["parallel", "parallel", "parallel", "parallel"]}
      ins(%qk7, %causal9 : tensor<2x4x8x8xf32>, tensor<1x1x8x8xi1>) outs(%e11 : tensor<2x4x8x8xf32>) {
    ^bb0(%a0: f32, %a1: i1, %out: f32):
    %r = arith.select %a1, %a0, %big_neg10 : f32
      linalg.yield %r : f32
    } -> tensor<2x4x8x8xf32>
  %ninf13 = arith.constant 0xFF800000 : f32
  %e14 = tensor.empty() : tensor<2x4x8xf32>
  %mf15 = linalg.fill ins(%ninf13 : f32) outs(%e14 : tensor<2x4x8xf32>) -> tensor<2x4x8xf32>
  %g16 = linalg.generic {indexing_maps = [affine_map<(d0, d1, d2, d3) -> (d0, d1, d2, d3)>, affine_map<(d0, d1, d2, d3) -> (d0, d1, d2)>], iterator_types = ["parallel", "parallel", "parallel", "reduction"]}
      ins(%g12 : tensor<2x4x8x8xf32>) outs(%mf15 : tensor<2x4x8xf32>) {
    ^bb0(%a0: f32, %out: f32):
    %r = arith.maximumf %a0, %out : f32
      linalg.yield %r : f32
    } -> tensor<2x4x8xf32>
  %e17 = tensor.empty() : tensor<2x4x8x8xf32>
  %g18 = linalg.generic {indexing_maps = [affine_map<(d0, d1, d2, d3) -> (d0, d1, d2, d3)>, affine_map<(d0, d1, d2, d3) -> (d0, d1, d2)>, affine_map<(d0, d1, d2, d3) -> (d0, d1, d2, d3)>], iterator_types = ["parallel", "parallel", "parallel", "parallel"]}
      ins(%g12, %g16 : tensor<2x4x8x8xf32>, tensor<2x4x8xf32>) outs(%e17 : tensor<2x4x8x8xf32>) {
    ^bb0(%a0: f32, %a1: f32, %out: f32):
    %r = arith.subf %a0, %a1 : f32
      linalg.yield %r : f32
    } -> tensor<2x4x8x8xf32>
  %e19 = tensor.empty() : tensor<2x4x8x8xf32>
  %g20 = linalg.generic {indexing_maps = [affine_map<(d0, d1, d2, d3) -> (d0, d1, d2, d3)>, affine_map<(d0, d1, d2, d3) -> (d0, d1, d2, d3)>], iterator_types = ["parallel", "parallel", "parallel", "parallel"]}
      ins(%g18 : tensor<2x4x8x8xf32>) outs(%e19 : tensor<2x4x8x8xf32>) {
    ^bb0(%a0: f32, %out: f32):
    %r = math.exp %a0 : f32
      linalg.yield %r : f32
    } -> tensor<2x4x8x8xf32>
  %zc21 = arith.constant 0.000000e+00 : f32
  %e22 = tensor.empty() : tensor<2x4x8xf32>
  %z23 = linalg.fill ins(%zc21 : f32) outs(%e22 : tensor<2x4x8xf32>) -> tensor<2x4x8xf32>
  %g24 = linalg.generic {indexing_maps = [affine_map<(d0, d1, d2, d3) -> (d0, d1, d2, d3)>, affine_map<(d0, d1, d2, d3) -> (d0, d1, d2)>], iterator_types = ["parallel", "parallel", "parallel", "reduction"]}
      ins(%g20 : tensor<2x4x8x8xf32>) outs(%z23 : tensor<2x4x8xf32>) {
    ^bb0(%a0: f32, %out: f32):
    %r = arith.addf %a0, %out : f32
      linalg.yield %r : f32
    } -> tensor<2x4x8xf32>
  %e25 = tensor.empty() : tensor<2x4x8x8xf32>
  %g26 = linalg.generic {indexing_maps = [affine_map<(d0, d1, d2, d3) -> (d0, d1, d2, d3)>, affine_map<(d0, d1, d2, d3) -> (d0, d1, d2)>, affine_map<(d0, d1, d2, d3) -> (d0, d1, d2, d3)>], iterator_types = ["parallel", "parallel", "parallel", "parallel"]}
      ins(%g20, %g24 : tensor<2x4x8x8xf32>, tensor<2x4x8xf32>) outs(%e25 : tensor<2x4x8x8xf32>) {
    ^bb0(%a0: f32, %a1: f32, %out: f32):
    %r = arith.divf %a0, %a1 : f32
      linalg.yield %r : f32
    } -> tensor<2x4x8x8xf32>
  %zc27 = arith.constant 0.000000e+00 : f32
  %e28 = tensor.empty() : tensor<2x8x4x32xf32>
  %z29 = linalg.fill ins(%zc27 : f32) outs(%e28 : tensor<2x8x4x32xf32>) -> tensor<2x8x4x32xf32>
  // einsum('bhqk,bkhd->bqhd'): O written as [B, N, H, D]
  %pv30 = linalg.generic {indexing_maps = [affine_map<(b, q, h, d, k) -> (b, h, q, k)>, affine_map<(b, q, h, d, k) -> (b, k, h, d)>, affine_map<(b, q, h, d, k) -> (b, q, h, d)>], iterator_types = ["parallel", "parallel", "parallel", "parallel", "reduction"]}
      ins(%g26, %v : tensor<2x4x8x8xf32>, tensor<2x8x4x32xf32>) outs(%z29 : tensor<2x8x4x32xf32>) {
    ^bb0(%a: f32, %b: f32, %acc: f32):
      %m = arith.mulf %a, %b : f32
      %r = arith.addf %acc, %m : f32
      linalg.yield %r : f32
    } -> tensor<2x8x4x32xf32>
  return %pv30 : tensor<2x8x4x32xf32>
}

// -----

// Must not fire: the second einsum reads V at the query position
// ('bhqk,bqhd->bqhd'): not P V.
// CHECK-LABEL: func @flax_v_at_query
// CHECK-NOT: fa.attention
func.func @flax_v_at_query(%q: tensor<2x8x4x32xf32>, %k: tensor<2x8x4x32xf32>, %v: tensor<2x8x4x32xf32>) -> tensor<2x8x4x32xf32> {
  %sqrt_d1 = arith.constant 5.65685415 : f32
  %e2 = tensor.empty() : tensor<2x8x4x32xf32>
  // query / sqrt(depth)
  %g3 = linalg.generic {indexing_maps = [affine_map<(d0, d1, d2, d3) -> (d0, d1, d2, d3)>, affine_map<(d0, d1, d2, d3) -> (d0, d1, d2, d3)>], iterator_types = ["parallel", "parallel", "parallel", "parallel"]}
      ins(%q : tensor<2x8x4x32xf32>) outs(%e2 : tensor<2x8x4x32xf32>) {
    ^bb0(%a0: f32, %out: f32):
    %r = arith.divf %a0, %sqrt_d1 : f32
      linalg.yield %r : f32
    } -> tensor<2x8x4x32xf32>
  %zc4 = arith.constant 0.000000e+00 : f32
  %e5 = tensor.empty() : tensor<2x4x8x8xf32>
  %z6 = linalg.fill ins(%zc4 : f32) outs(%e5 : tensor<2x4x8x8xf32>) -> tensor<2x4x8x8xf32>
  // einsum('bqhd,bkhd->bhqk'): dot_general reading [B, N, H, D]
  %qk7 = linalg.generic {indexing_maps = [affine_map<(b, h, q, k, d) -> (b, q, h, d)>, affine_map<(b, h, q, k, d) -> (b, k, h, d)>, affine_map<(b, h, q, k, d) -> (b, h, q, k)>], iterator_types = ["parallel", "parallel", "parallel", "parallel", "reduction"]}
      ins(%g3, %k : tensor<2x8x4x32xf32>, tensor<2x8x4x32xf32>) outs(%z6 : tensor<2x4x8x8xf32>) {
    ^bb0(%a: f32, %b: f32, %acc: f32):
      %m = arith.mulf %a, %b : f32
      %r = arith.addf %acc, %m : f32
      linalg.yield %r : f32
    } -> tensor<2x4x8x8xf32>
  %e8 = tensor.empty() : tensor<1x1x8x8xi1>
  // make_causal_mask: greater_equal(iota_q, iota_k)
  %causal9 = linalg.generic {indexing_maps = [affine_map<(d0, d1, d2, d3) -> (d0, d1, d2, d3)>], iterator_types = ["parallel", "parallel", "parallel", "parallel"]} outs(%e8 : tensor<1x1x8x8xi1>) {
    ^bb0(%out: i1):
      %i = linalg.index 2 : index
      %j = linalg.index 3 : index
      %r = arith.cmpi sge, %i, %j : index
      linalg.yield %r : i1
    } -> tensor<1x1x8x8xi1>
  %big_neg10 = arith.constant -3.40282347E+38 : f32
  %e11 = tensor.empty() : tensor<2x4x8x8xf32>
  // where(mask, w, finfo.min)
  %g12 = linalg.generic {indexing_maps = [affine_map<(d0, d1, d2, d3) -> (d0, d1, d2, d3)>, affine_map<(d0, d1, d2, d3) -> (0, 0, d2, d3)>, affine_map<(d0, d1, d2, d3) -> (d0, d1, d2, d3)>], iterator_types = ["parallel", "parallel", "parallel", "parallel"]}
      ins(%qk7, %causal9 : tensor<2x4x8x8xf32>, tensor<1x1x8x8xi1>) outs(%e11 : tensor<2x4x8x8xf32>) {
    ^bb0(%a0: f32, %a1: i1, %out: f32):
    %r = arith.select %a1, %a0, %big_neg10 : f32
      linalg.yield %r : f32
    } -> tensor<2x4x8x8xf32>
  %ninf13 = arith.constant 0xFF800000 : f32
  %e14 = tensor.empty() : tensor<2x4x8xf32>
  %mf15 = linalg.fill ins(%ninf13 : f32) outs(%e14 : tensor<2x4x8xf32>) -> tensor<2x4x8xf32>
  %g16 = linalg.generic {indexing_maps = [affine_map<(d0, d1, d2, d3) -> (d0, d1, d2, d3)>, affine_map<(d0, d1, d2, d3) -> (d0, d1, d2)>], iterator_types = ["parallel", "parallel", "parallel", "reduction"]}
      ins(%g12 : tensor<2x4x8x8xf32>) outs(%mf15 : tensor<2x4x8xf32>) {
    ^bb0(%a0: f32, %out: f32):
    %r = arith.maximumf %a0, %out : f32
      linalg.yield %r : f32
    } -> tensor<2x4x8xf32>
  %e17 = tensor.empty() : tensor<2x4x8x8xf32>
  %g18 = linalg.generic {indexing_maps = [affine_map<(d0, d1, d2, d3) -> (d0, d1, d2, d3)>, affine_map<(d0, d1, d2, d3) -> (d0, d1, d2)>, affine_map<(d0, d1, d2, d3) -> (d0, d1, d2, d3)>], iterator_types = ["parallel", "parallel", "parallel", "parallel"]}
      ins(%g12, %g16 : tensor<2x4x8x8xf32>, tensor<2x4x8xf32>) outs(%e17 : tensor<2x4x8x8xf32>) {
    ^bb0(%a0: f32, %a1: f32, %out: f32):
    %r = arith.subf %a0, %a1 : f32
      linalg.yield %r : f32
    } -> tensor<2x4x8x8xf32>
  %e19 = tensor.empty() : tensor<2x4x8x8xf32>
  %g20 = linalg.generic {indexing_maps = [affine_map<(d0, d1, d2, d3) -> (d0, d1, d2, d3)>, affine_map<(d0, d1, d2, d3) -> (d0, d1, d2, d3)>], iterator_types = ["parallel", "parallel", "parallel", "parallel"]}
      ins(%g18 : tensor<2x4x8x8xf32>) outs(%e19 : tensor<2x4x8x8xf32>) {
    ^bb0(%a0: f32, %out: f32):
    %r = math.exp %a0 : f32
      linalg.yield %r : f32
    } -> tensor<2x4x8x8xf32>
  %zc21 = arith.constant 0.000000e+00 : f32
  %e22 = tensor.empty() : tensor<2x4x8xf32>
  %z23 = linalg.fill ins(%zc21 : f32) outs(%e22 : tensor<2x4x8xf32>) -> tensor<2x4x8xf32>
  %g24 = linalg.generic {indexing_maps = [affine_map<(d0, d1, d2, d3) -> (d0, d1, d2, d3)>, affine_map<(d0, d1, d2, d3) -> (d0, d1, d2)>], iterator_types = ["parallel", "parallel", "parallel", "reduction"]}
      ins(%g20 : tensor<2x4x8x8xf32>) outs(%z23 : tensor<2x4x8xf32>) {
    ^bb0(%a0: f32, %out: f32):
    %r = arith.addf %a0, %out : f32
      linalg.yield %r : f32
    } -> tensor<2x4x8xf32>
  %e25 = tensor.empty() : tensor<2x4x8x8xf32>
  %g26 = linalg.generic {indexing_maps = [affine_map<(d0, d1, d2, d3) -> (d0, d1, d2, d3)>, affine_map<(d0, d1, d2, d3) -> (d0, d1, d2)>, affine_map<(d0, d1, d2, d3) -> (d0, d1, d2, d3)>], iterator_types = ["parallel", "parallel", "parallel", "parallel"]}
      ins(%g20, %g24 : tensor<2x4x8x8xf32>, tensor<2x4x8xf32>) outs(%e25 : tensor<2x4x8x8xf32>) {
    ^bb0(%a0: f32, %a1: f32, %out: f32):
    %r = arith.divf %a0, %a1 : f32
      linalg.yield %r : f32
    } -> tensor<2x4x8x8xf32>
  %zc27 = arith.constant 0.000000e+00 : f32
  %e28 = tensor.empty() : tensor<2x8x4x32xf32>
  %z29 = linalg.fill ins(%zc27 : f32) outs(%e28 : tensor<2x8x4x32xf32>) -> tensor<2x8x4x32xf32>
  // einsum('bhqk,bkhd->bqhd'): O written as [B, N, H, D]
  // expected-remark @+1 {{not raised: P V does not contract the right operand over the reduced dim, with the left's batch dims}}
  %pv30 = linalg.generic {indexing_maps = [affine_map<(b, q, h, d, k) -> (b, h, q, k)>, affine_map<(b, q, h, d, k) -> (b, q, h, d)>, affine_map<(b, q, h, d, k) -> (b, q, h, d)>], iterator_types = ["parallel", "parallel", "parallel", "parallel", "reduction"]}
      ins(%g26, %v : tensor<2x4x8x8xf32>, tensor<2x8x4x32xf32>) outs(%z29 : tensor<2x8x4x32xf32>) {
    ^bb0(%a: f32, %b: f32, %acc: f32):
      %m = arith.mulf %a, %b : f32
      %r = arith.addf %acc, %m : f32
      linalg.yield %r : f32
    } -> tensor<2x8x4x32xf32>
  return %pv30 : tensor<2x8x4x32xf32>
}

// -----

// K transposed by a copy generic whose input map swaps the last two dims:
// the raised op reads K itself. (No near miss: whatever produces the
// K^T operand, the raised op reads that tensor, transposed back.)
// CHECK-LABEL: func @k_transposed_by_generic
// CHECK-SAME: (%[[Q:.*]]: tensor<2x8x16xf16>, %[[K:.*]]: tensor<2x8x16xf16>, %[[V:.*]]: tensor<2x8x16xf16>)
// CHECK: %[[K4:.*]] = tensor.expand_shape %[[K]]
// CHECK: fa.attention %{{.*}}, %[[K4]], %{{.*}} {scale = 2.500000e-01 : f32}
// CHECK-NOT: linalg.generic
func.func @k_transposed_by_generic(%q: tensor<2x8x16xf16>, %k: tensor<2x8x16xf16>, %v: tensor<2x8x16xf16>) -> tensor<2x8x16xf16> {
  %e1 = tensor.empty() : tensor<2x16x8xf16>
  // K^T by a transposing copy generic (how some front ends and
  // linalg-generalize-named-ops spell a transpose)
  %kt2 = linalg.generic {indexing_maps = [affine_map<(d0, d1, d2) -> (d0, d2, d1)>, affine_map<(d0, d1, d2) -> (d0, d1, d2)>], iterator_types = ["parallel", "parallel", "parallel"]} ins(%k : tensor<2x8x16xf16>) outs(%e1 : tensor<2x16x8xf16>) {
    ^bb0(%a: f16, %out: f16):
      linalg.yield %a : f16
    } -> tensor<2x16x8xf16>
  %zc3 = arith.constant 0.000000e+00 : f16
  %e4 = tensor.empty() : tensor<2x8x8xf16>
  %z5 = linalg.fill ins(%zc3 : f16) outs(%e4 : tensor<2x8x8xf16>) -> tensor<2x8x8xf16>
  %mm6 = linalg.batch_matmul ins(%q, %kt2 : tensor<2x8x16xf16>, tensor<2x16x8xf16>) outs(%z5 : tensor<2x8x8xf16>) -> tensor<2x8x8xf16>
  %s647 = arith.constant 2.500000e-01 : f64
  %e8 = tensor.empty() : tensor<2x8x8xf16>
  %g9 = linalg.generic {indexing_maps = [affine_map<(d0, d1, d2) -> (d0, d1, d2)>, affine_map<(d0, d1, d2) -> (d0, d1, d2)>], iterator_types = ["parallel", "parallel", "parallel"]}
      ins(%mm6 : tensor<2x8x8xf16>) outs(%e8 : tensor<2x8x8xf16>) {
    ^bb0(%a0: f16, %out: f16):
    %c = arith.truncf %s647 : f64 to f16
    %r = arith.mulf %a0, %c : f16
      linalg.yield %r : f16
    } -> tensor<2x8x8xf16>
  %e10 = tensor.empty() : tensor<2x8x8xf16>
  %sm11 = linalg.softmax dimension(2) ins(%g9 : tensor<2x8x8xf16>) outs(%e10 : tensor<2x8x8xf16>) -> tensor<2x8x8xf16>
  %zc12 = arith.constant 0.000000e+00 : f16
  %e13 = tensor.empty() : tensor<2x8x16xf16>
  %z14 = linalg.fill ins(%zc12 : f16) outs(%e13 : tensor<2x8x16xf16>) -> tensor<2x8x16xf16>
  %mm15 = linalg.batch_matmul ins(%sm11, %v : tensor<2x8x8xf16>, tensor<2x8x16xf16>) outs(%z14 : tensor<2x8x16xf16>) -> tensor<2x8x16xf16>
  return %mm15 : tensor<2x8x16xf16>
}

// -----

// A KV cache: 4 new queries after 8 cached keys, query i at key position
// i + 8 = i + Nk - Nq, the mask j <= i + 8 from linalg.index: causal with
// the bottom-right diagonal.
// CHECK-LABEL: func @kv_cache_bottom_right
// CHECK-NEXT: %[[O:.*]] = fa.attention %arg0, %arg1, %arg2 {bottom_right, causal, scale = 1.000000e+00 : f32} : tensor<1x2x4x32xf32>, tensor<1x2x12x32xf32>, tensor<1x2x12x32xf32> -> tensor<1x2x4x32xf32>
func.func @kv_cache_bottom_right(%q: tensor<1x2x4x32xf32>, %k: tensor<1x2x12x32xf32>, %v: tensor<1x2x12x32xf32>) -> tensor<1x2x4x32xf32> {
  %c1 = tensor.collapse_shape %q [[0, 1], [2], [3]] : tensor<1x2x4x32xf32> into tensor<2x4x32xf32>
  %c2 = tensor.collapse_shape %k [[0, 1], [2], [3]] : tensor<1x2x12x32xf32> into tensor<2x12x32xf32>
  %zc3 = arith.constant 0.000000e+00 : f32
  %e4 = tensor.empty() : tensor<2x4x12xf32>
  %z5 = linalg.fill ins(%zc3 : f32) outs(%e4 : tensor<2x4x12xf32>) -> tensor<2x4x12xf32>
  %mm6 = linalg.batch_matmul indexing_maps = [affine_map<(d0, d1, d2, d3) -> (d0, d1, d3)>, affine_map<(d0, d1, d2, d3) -> (d0, d2, d3)>, affine_map<(d0, d1, d2, d3) -> (d0, d1, d2)>] ins(%c1, %c2 : tensor<2x4x32xf32>, tensor<2x12x32xf32>) outs(%z5 : tensor<2x4x12xf32>) -> tensor<2x4x12xf32>
  %x7 = tensor.expand_shape %mm6 [[0, 1], [2], [3]] output_shape [1, 2, 4, 12] : tensor<2x4x12xf32> into tensor<1x2x4x12xf32>
  %ninf8 = arith.constant 0xFF800000 : f32
  %e9 = tensor.empty() : tensor<1x2x4x12xf32>
  // query i at key position i + 8
  %g10 = linalg.generic {indexing_maps = [affine_map<(d0, d1, d2, d3) -> (d0, d1, d2, d3)>, affine_map<(d0, d1, d2, d3) -> (d0, d1, d2, d3)>], iterator_types = ["parallel", "parallel", "parallel", "parallel"]}
      ins(%x7 : tensor<1x2x4x12xf32>) outs(%e9 : tensor<1x2x4x12xf32>) {
    ^bb0(%a0: f32, %out: f32):
    %i = linalg.index 2 : index
    %j = linalg.index 3 : index
    %past = arith.constant 8 : index
    %pos = arith.addi %i, %past : index
    %keep = arith.cmpi ule, %j, %pos : index
    %r = arith.select %keep, %a0, %ninf8 : f32
      linalg.yield %r : f32
    } -> tensor<1x2x4x12xf32>
  %e11 = tensor.empty() : tensor<1x2x4x12xf32>
  %sm12 = linalg.softmax dimension(3) ins(%g10 : tensor<1x2x4x12xf32>) outs(%e11 : tensor<1x2x4x12xf32>) -> tensor<1x2x4x12xf32>
  %c13 = tensor.collapse_shape %sm12 [[0, 1], [2], [3]] : tensor<1x2x4x12xf32> into tensor<2x4x12xf32>
  %c14 = tensor.collapse_shape %v [[0, 1], [2], [3]] : tensor<1x2x12x32xf32> into tensor<2x12x32xf32>
  %zc15 = arith.constant 0.000000e+00 : f32
  %e16 = tensor.empty() : tensor<2x4x32xf32>
  %z17 = linalg.fill ins(%zc15 : f32) outs(%e16 : tensor<2x4x32xf32>) -> tensor<2x4x32xf32>
  %mm18 = linalg.batch_matmul ins(%c13, %c14 : tensor<2x4x12xf32>, tensor<2x12x32xf32>) outs(%z17 : tensor<2x4x32xf32>) -> tensor<2x4x32xf32>
  %x19 = tensor.expand_shape %mm18 [[0, 1], [2], [3]] output_shape [1, 2, 4, 32] : tensor<2x4x32xf32> into tensor<1x2x4x32xf32>
  return %x19 : tensor<1x2x4x32xf32>
}

// -----

// Must not fire: the diagonal is one key short of the bottom-right one
// (j <= i + 7 with Nk - Nq = 8).
// CHECK-LABEL: func @kv_cache_off_by_one
// CHECK-NOT: fa.attention
func.func @kv_cache_off_by_one(%q: tensor<1x2x4x32xf32>, %k: tensor<1x2x12x32xf32>, %v: tensor<1x2x12x32xf32>) -> tensor<1x2x4x32xf32> {
  %c1 = tensor.collapse_shape %q [[0, 1], [2], [3]] : tensor<1x2x4x32xf32> into tensor<2x4x32xf32>
  %c2 = tensor.collapse_shape %k [[0, 1], [2], [3]] : tensor<1x2x12x32xf32> into tensor<2x12x32xf32>
  %zc3 = arith.constant 0.000000e+00 : f32
  %e4 = tensor.empty() : tensor<2x4x12xf32>
  %z5 = linalg.fill ins(%zc3 : f32) outs(%e4 : tensor<2x4x12xf32>) -> tensor<2x4x12xf32>
  %mm6 = linalg.batch_matmul indexing_maps = [affine_map<(d0, d1, d2, d3) -> (d0, d1, d3)>, affine_map<(d0, d1, d2, d3) -> (d0, d2, d3)>, affine_map<(d0, d1, d2, d3) -> (d0, d1, d2)>] ins(%c1, %c2 : tensor<2x4x32xf32>, tensor<2x12x32xf32>) outs(%z5 : tensor<2x4x12xf32>) -> tensor<2x4x12xf32>
  %x7 = tensor.expand_shape %mm6 [[0, 1], [2], [3]] output_shape [1, 2, 4, 12] : tensor<2x4x12xf32> into tensor<1x2x4x12xf32>
  %ninf8 = arith.constant 0xFF800000 : f32
  %e9 = tensor.empty() : tensor<1x2x4x12xf32>
  // query i at key position i + 7
  %g10 = linalg.generic {indexing_maps = [affine_map<(d0, d1, d2, d3) -> (d0, d1, d2, d3)>, affine_map<(d0, d1, d2, d3) -> (d0, d1, d2, d3)>], iterator_types = ["parallel", "parallel", "parallel", "parallel"]}
      ins(%x7 : tensor<1x2x4x12xf32>) outs(%e9 : tensor<1x2x4x12xf32>) {
    ^bb0(%a0: f32, %out: f32):
    %i = linalg.index 2 : index
    %j = linalg.index 3 : index
    %past = arith.constant 7 : index
    %pos = arith.addi %i, %past : index
    %keep = arith.cmpi ule, %j, %pos : index
    %r = arith.select %keep, %a0, %ninf8 : f32
      linalg.yield %r : f32
    } -> tensor<1x2x4x12xf32>
  %e11 = tensor.empty() : tensor<1x2x4x12xf32>
  %sm12 = linalg.softmax dimension(3) ins(%g10 : tensor<1x2x4x12xf32>) outs(%e11 : tensor<1x2x4x12xf32>) -> tensor<1x2x4x12xf32>
  %c13 = tensor.collapse_shape %sm12 [[0, 1], [2], [3]] : tensor<1x2x4x12xf32> into tensor<2x4x12xf32>
  %c14 = tensor.collapse_shape %v [[0, 1], [2], [3]] : tensor<1x2x12x32xf32> into tensor<2x12x32xf32>
  %zc15 = arith.constant 0.000000e+00 : f32
  %e16 = tensor.empty() : tensor<2x4x32xf32>
  %z17 = linalg.fill ins(%zc15 : f32) outs(%e16 : tensor<2x4x32xf32>) -> tensor<2x4x32xf32>
  // expected-remark @+1 {{not raised: the mask is not causal or a window: visible where j - i <= 7}}
  %mm18 = linalg.batch_matmul ins(%c13, %c14 : tensor<2x4x12xf32>, tensor<2x12x32xf32>) outs(%z17 : tensor<2x4x32xf32>) -> tensor<2x4x32xf32>
  %x19 = tensor.expand_shape %mm18 [[0, 1], [2], [3]] output_shape [1, 2, 4, 32] : tensor<2x4x32xf32> into tensor<1x2x4x32xf32>
  return %x19 : tensor<1x2x4x32xf32>
}

// -----

// PyTorch >= 2.5's math SDPA(is_causal=True, scale=0.25) as torch-mlir
// lowers it: sqrt(scale) on q and k^T, the boolean tril mask converted to an
// additive where(not mask, -inf, 0), and _safe_softmax =
// where(all(x == -inf, -1, keepdim), 0, softmax(x)) (rows with every key
// masked get 0, as in fa.attention).
// CHECK-LABEL: func @torch25_safe_softmax
// CHECK-NEXT: %[[O:.*]] = fa.attention %arg0, %arg1, %arg2 {causal, scale = 2.500000e-01 : f32} : tensor<1x2x8x16xf32>
// CHECK-NEXT: return %[[O]]
func.func @torch25_safe_softmax(%q: tensor<1x2x8x16xf32>, %k: tensor<1x2x8x16xf32>, %v: tensor<1x2x8x16xf32>) -> tensor<1x2x8x16xf32> {
  %s641 = arith.constant 0.5 : f64
  %e2 = tensor.empty() : tensor<1x2x8x16xf32>
  %g3 = linalg.generic {indexing_maps = [affine_map<(d0, d1, d2, d3) -> (d0, d1, d2, d3)>, affine_map<(d0, d1, d2, d3) -> (d0, d1, d2, d3)>], iterator_types = ["parallel", "parallel", "parallel", "parallel"]}
      ins(%q : tensor<1x2x8x16xf32>) outs(%e2 : tensor<1x2x8x16xf32>) {
    ^bb0(%a0: f32, %out: f32):
    %c = arith.truncf %s641 : f64 to f32
    %r = arith.mulf %a0, %c : f32
      linalg.yield %r : f32
    } -> tensor<1x2x8x16xf32>
  %e4 = tensor.empty() : tensor<1x2x16x8xf32>
  %t5 = linalg.transpose ins(%k : tensor<1x2x8x16xf32>) outs(%e4 : tensor<1x2x16x8xf32>) permutation = [0, 1, 3, 2]
  %s646 = arith.constant 0.5 : f64
  %e7 = tensor.empty() : tensor<1x2x16x8xf32>
  %g8 = linalg.generic {indexing_maps = [affine_map<(d0, d1, d2, d3) -> (d0, d1, d2, d3)>, affine_map<(d0, d1, d2, d3) -> (d0, d1, d2, d3)>], iterator_types = ["parallel", "parallel", "parallel", "parallel"]}
      ins(%t5 : tensor<1x2x16x8xf32>) outs(%e7 : tensor<1x2x16x8xf32>) {
    ^bb0(%a0: f32, %out: f32):
    %c = arith.truncf %s646 : f64 to f32
    %r = arith.mulf %a0, %c : f32
      linalg.yield %r : f32
    } -> tensor<1x2x16x8xf32>
  %c9 = tensor.collapse_shape %g3 [[0, 1], [2], [3]] : tensor<1x2x8x16xf32> into tensor<2x8x16xf32>
  %c10 = tensor.collapse_shape %g8 [[0, 1], [2], [3]] : tensor<1x2x16x8xf32> into tensor<2x16x8xf32>
  %zc11 = arith.constant 0.000000e+00 : f32
  %e12 = tensor.empty() : tensor<2x8x8xf32>
  %z13 = linalg.fill ins(%zc11 : f32) outs(%e12 : tensor<2x8x8xf32>) -> tensor<2x8x8xf32>
  %mm14 = linalg.batch_matmul ins(%c9, %c10 : tensor<2x8x16xf32>, tensor<2x16x8xf32>) outs(%z13 : tensor<2x8x8xf32>) -> tensor<2x8x8xf32>
  %x15 = tensor.expand_shape %mm14 [[0, 1], [2], [3]] output_shape [1, 2, 8, 8] : tensor<2x8x8xf32> into tensor<1x2x8x8xf32>
  %true16 = arith.constant true
  %e17 = tensor.empty() : tensor<8x8xi1>
  %ones18 = linalg.fill ins(%true16 : i1) outs(%e17 : tensor<8x8xi1>) -> tensor<8x8xi1>
  %e19 = tensor.empty() : tensor<8x8xi1>
  // tril
  %g20 = linalg.generic {indexing_maps = [affine_map<(d0, d1) -> (d0, d1)>, affine_map<(d0, d1) -> (d0, d1)>], iterator_types = ["parallel", "parallel"]}
      ins(%ones18 : tensor<8x8xi1>) outs(%e19 : tensor<8x8xi1>) {
    ^bb0(%a0: i1, %out: i1):
    %i = linalg.index 0 : index
    %j = linalg.index 1 : index
    %keep = arith.cmpi ule, %j, %i : index
    %false = arith.constant false
    %r = arith.select %keep, %a0, %false : i1
      linalg.yield %r : i1
    } -> tensor<8x8xi1>
  %e21 = tensor.empty() : tensor<8x8xi1>
  // logical_not
  %g22 = linalg.generic {indexing_maps = [affine_map<(d0, d1) -> (d0, d1)>, affine_map<(d0, d1) -> (d0, d1)>], iterator_types = ["parallel", "parallel"]}
      ins(%g20 : tensor<8x8xi1>) outs(%e21 : tensor<8x8xi1>) {
    ^bb0(%a0: i1, %out: i1):
    %true = arith.constant true
    %r = arith.xori %a0, %true : i1
      linalg.yield %r : i1
    } -> tensor<8x8xi1>
  %ninf6423 = arith.constant 0xFFF0000000000000 : f64
  %zero6424 = arith.constant 0.0 : f64
  %e25 = tensor.empty() : tensor<8x8xf32>
  // where(mask, -inf, 0)
  %g26 = linalg.generic {indexing_maps = [affine_map<(d0, d1) -> (d0, d1)>, affine_map<(d0, d1) -> (d0, d1)>], iterator_types = ["parallel", "parallel"]}
      ins(%g22 : tensor<8x8xi1>) outs(%e25 : tensor<8x8xf32>) {
    ^bb0(%a0: i1, %out: f32):
    %m = arith.truncf %ninf6423 : f64 to f32
    %z = arith.truncf %zero6424 : f64 to f32
    %r = arith.select %a0, %m, %z : f32
      linalg.yield %r : f32
    } -> tensor<8x8xf32>
  %e27 = tensor.empty() : tensor<1x2x8x8xf32>
  // attn + mask
  %g28 = linalg.generic {indexing_maps = [affine_map<(d0, d1, d2, d3) -> (d0, d1, d2, d3)>, affine_map<(d0, d1, d2, d3) -> (d2, d3)>, affine_map<(d0, d1, d2, d3) -> (d0, d1, d2, d3)>], iterator_types = ["parallel", "parallel", "parallel", "parallel"]}
      ins(%x15, %g26 : tensor<1x2x8x8xf32>, tensor<8x8xf32>) outs(%e27 : tensor<1x2x8x8xf32>) {
    ^bb0(%a0: f32, %a1: f32, %out: f32):
    %r = arith.addf %a0, %a1 : f32
      linalg.yield %r : f32
    } -> tensor<1x2x8x8xf32>
  %ninf29 = arith.constant 0xFF800000 : f32
  %e30 = tensor.empty() : tensor<1x2x8x1xf32>
  %mf31 = linalg.fill ins(%ninf29 : f32) outs(%e30 : tensor<1x2x8x1xf32>) -> tensor<1x2x8x1xf32>
  %g32 = linalg.generic {indexing_maps = [affine_map<(d0, d1, d2, d3) -> (d0, d1, d2, d3)>, affine_map<(d0, d1, d2, d3) -> (d0, d1, d2, 0)>], iterator_types = ["parallel", "parallel", "parallel", "reduction"]}
      ins(%g28 : tensor<1x2x8x8xf32>) outs(%mf31 : tensor<1x2x8x1xf32>) {
    ^bb0(%a0: f32, %out: f32):
    %r = arith.maximumf %a0, %out : f32
      linalg.yield %r : f32
    } -> tensor<1x2x8x1xf32>
  %e33 = tensor.empty() : tensor<1x2x8x8xf32>
  %g34 = linalg.generic {indexing_maps = [affine_map<(d0, d1, d2, d3) -> (d0, d1, d2, d3)>, affine_map<(d0, d1, d2, d3) -> (d0, d1, d2, 0)>, affine_map<(d0, d1, d2, d3) -> (d0, d1, d2, d3)>], iterator_types = ["parallel", "parallel", "parallel", "parallel"]}
      ins(%g28, %g32 : tensor<1x2x8x8xf32>, tensor<1x2x8x1xf32>) outs(%e33 : tensor<1x2x8x8xf32>) {
    ^bb0(%a0: f32, %a1: f32, %out: f32):
    %r = arith.subf %a0, %a1 : f32
      linalg.yield %r : f32
    } -> tensor<1x2x8x8xf32>
  %e35 = tensor.empty() : tensor<1x2x8x8xf32>
  %g36 = linalg.generic {indexing_maps = [affine_map<(d0, d1, d2, d3) -> (d0, d1, d2, d3)>, affine_map<(d0, d1, d2, d3) -> (d0, d1, d2, d3)>], iterator_types = ["parallel", "parallel", "parallel", "parallel"]}
      ins(%g34 : tensor<1x2x8x8xf32>) outs(%e35 : tensor<1x2x8x8xf32>) {
    ^bb0(%a0: f32, %out: f32):
    %r = math.exp %a0 : f32
      linalg.yield %r : f32
    } -> tensor<1x2x8x8xf32>
  %zc37 = arith.constant 0.000000e+00 : f32
  %e38 = tensor.empty() : tensor<1x2x8x1xf32>
  %z39 = linalg.fill ins(%zc37 : f32) outs(%e38 : tensor<1x2x8x1xf32>) -> tensor<1x2x8x1xf32>
  %g40 = linalg.generic {indexing_maps = [affine_map<(d0, d1, d2, d3) -> (d0, d1, d2, d3)>, affine_map<(d0, d1, d2, d3) -> (d0, d1, d2, 0)>], iterator_types = ["parallel", "parallel", "parallel", "reduction"]}
      ins(%g36 : tensor<1x2x8x8xf32>) outs(%z39 : tensor<1x2x8x1xf32>) {
    ^bb0(%a0: f32, %out: f32):
    %r = arith.addf %a0, %out : f32
      linalg.yield %r : f32
    } -> tensor<1x2x8x1xf32>
  %e41 = tensor.empty() : tensor<1x2x8x8xf32>
  %g42 = linalg.generic {indexing_maps = [affine_map<(d0, d1, d2, d3) -> (d0, d1, d2, d3)>, affine_map<(d0, d1, d2, d3) -> (d0, d1, d2, 0)>, affine_map<(d0, d1, d2, d3) -> (d0, d1, d2, d3)>], iterator_types = ["parallel", "parallel", "parallel", "parallel"]}
      ins(%g36, %g40 : tensor<1x2x8x8xf32>, tensor<1x2x8x1xf32>) outs(%e41 : tensor<1x2x8x8xf32>) {
    ^bb0(%a0: f32, %a1: f32, %out: f32):
    %r = arith.divf %a0, %a1 : f32
      linalg.yield %r : f32
    } -> tensor<1x2x8x8xf32>
  %e43 = tensor.empty() : tensor<1x2x8x8xi1>
  // x == -inf
  %g44 = linalg.generic {indexing_maps = [affine_map<(d0, d1, d2, d3) -> (d0, d1, d2, d3)>, affine_map<(d0, d1, d2, d3) -> (d0, d1, d2, d3)>], iterator_types = ["parallel", "parallel", "parallel", "parallel"]}
      ins(%g28 : tensor<1x2x8x8xf32>) outs(%e43 : tensor<1x2x8x8xi1>) {
    ^bb0(%a0: f32, %out: i1):
    %c = arith.truncf %ninf6423 : f64 to f32
    %r = arith.cmpf oeq, %a0, %c : f32
      linalg.yield %r : i1
    } -> tensor<1x2x8x8xi1>
  %true45 = arith.constant true
  %e46 = tensor.empty() : tensor<1x2x8x1xi1>
  %alltrue47 = linalg.fill ins(%true45 : i1) outs(%e46 : tensor<1x2x8x1xi1>) -> tensor<1x2x8x1xi1>
  // all(dim=-1, keepdim)
  %g48 = linalg.generic {indexing_maps = [affine_map<(d0, d1, d2, d3) -> (d0, d1, d2, d3)>, affine_map<(d0, d1, d2, d3) -> (d0, d1, d2, 0)>], iterator_types = ["parallel", "parallel", "parallel", "reduction"]}
      ins(%g44 : tensor<1x2x8x8xi1>) outs(%alltrue47 : tensor<1x2x8x1xi1>) {
    ^bb0(%a0: i1, %out: i1):
    %r = arith.andi %a0, %out : i1
      linalg.yield %r : i1
    } -> tensor<1x2x8x1xi1>
  %zero49 = arith.constant dense<0.000000e+00> : tensor<f32>
  %e50 = tensor.empty() : tensor<1x2x8x8xf32>
  // where(masked_rows, 0, softmax)
  %g51 = linalg.generic {indexing_maps = [affine_map<(d0, d1, d2, d3) -> (d0, d1, d2, 0)>, affine_map<(d0, d1, d2, d3) -> ()>, affine_map<(d0, d1, d2, d3) -> (d0, d1, d2, d3)>, affine_map<(d0, d1, d2, d3) -> (d0, d1, d2, d3)>], iterator_types = ["parallel", "parallel", "parallel", "parallel"]}
      ins(%g48, %zero49, %g42 : tensor<1x2x8x1xi1>, tensor<f32>, tensor<1x2x8x8xf32>) outs(%e50 : tensor<1x2x8x8xf32>) {
    ^bb0(%a0: i1, %a1: f32, %a2: f32, %out: f32):
    %r = arith.select %a0, %a1, %a2 : f32
      linalg.yield %r : f32
    } -> tensor<1x2x8x8xf32>
  %c52 = tensor.collapse_shape %g51 [[0, 1], [2], [3]] : tensor<1x2x8x8xf32> into tensor<2x8x8xf32>
  %c53 = tensor.collapse_shape %v [[0, 1], [2], [3]] : tensor<1x2x8x16xf32> into tensor<2x8x16xf32>
  %zc54 = arith.constant 0.000000e+00 : f32
  %e55 = tensor.empty() : tensor<2x8x16xf32>
  %z56 = linalg.fill ins(%zc54 : f32) outs(%e55 : tensor<2x8x16xf32>) -> tensor<2x8x16xf32>
  %mm57 = linalg.batch_matmul ins(%c52, %c53 : tensor<2x8x8xf32>, tensor<2x8x16xf32>) outs(%z56 : tensor<2x8x16xf32>) -> tensor<2x8x16xf32>
  %x58 = tensor.expand_shape %mm57 [[0, 1], [2], [3]] output_shape [1, 2, 8, 16] : tensor<2x8x16xf32> into tensor<1x2x8x16xf32>
  return %x58 : tensor<1x2x8x16xf32>
}

// -----

// Must not fire: the "safe" test looks at the scores before the mask, not
// at what the softmax normalises.
// CHECK-LABEL: func @safe_softmax_tests_other_tensor
// CHECK-NOT: fa.attention
func.func @safe_softmax_tests_other_tensor(%q: tensor<1x2x8x16xf32>, %k: tensor<1x2x8x16xf32>, %v: tensor<1x2x8x16xf32>) -> tensor<1x2x8x16xf32> {
  %s641 = arith.constant 0.5 : f64
  %e2 = tensor.empty() : tensor<1x2x8x16xf32>
  %g3 = linalg.generic {indexing_maps = [affine_map<(d0, d1, d2, d3) -> (d0, d1, d2, d3)>, affine_map<(d0, d1, d2, d3) -> (d0, d1, d2, d3)>], iterator_types = ["parallel", "parallel", "parallel", "parallel"]}
      ins(%q : tensor<1x2x8x16xf32>) outs(%e2 : tensor<1x2x8x16xf32>) {
    ^bb0(%a0: f32, %out: f32):
    %c = arith.truncf %s641 : f64 to f32
    %r = arith.mulf %a0, %c : f32
      linalg.yield %r : f32
    } -> tensor<1x2x8x16xf32>
  %e4 = tensor.empty() : tensor<1x2x16x8xf32>
  %t5 = linalg.transpose ins(%k : tensor<1x2x8x16xf32>) outs(%e4 : tensor<1x2x16x8xf32>) permutation = [0, 1, 3, 2]
  %s646 = arith.constant 0.5 : f64
  %e7 = tensor.empty() : tensor<1x2x16x8xf32>
  %g8 = linalg.generic {indexing_maps = [affine_map<(d0, d1, d2, d3) -> (d0, d1, d2, d3)>, affine_map<(d0, d1, d2, d3) -> (d0, d1, d2, d3)>], iterator_types = ["parallel", "parallel", "parallel", "parallel"]}
      ins(%t5 : tensor<1x2x16x8xf32>) outs(%e7 : tensor<1x2x16x8xf32>) {
    ^bb0(%a0: f32, %out: f32):
    %c = arith.truncf %s646 : f64 to f32
    %r = arith.mulf %a0, %c : f32
      linalg.yield %r : f32
    } -> tensor<1x2x16x8xf32>
  %c9 = tensor.collapse_shape %g3 [[0, 1], [2], [3]] : tensor<1x2x8x16xf32> into tensor<2x8x16xf32>
  %c10 = tensor.collapse_shape %g8 [[0, 1], [2], [3]] : tensor<1x2x16x8xf32> into tensor<2x16x8xf32>
  %zc11 = arith.constant 0.000000e+00 : f32
  %e12 = tensor.empty() : tensor<2x8x8xf32>
  %z13 = linalg.fill ins(%zc11 : f32) outs(%e12 : tensor<2x8x8xf32>) -> tensor<2x8x8xf32>
  %mm14 = linalg.batch_matmul ins(%c9, %c10 : tensor<2x8x16xf32>, tensor<2x16x8xf32>) outs(%z13 : tensor<2x8x8xf32>) -> tensor<2x8x8xf32>
  %x15 = tensor.expand_shape %mm14 [[0, 1], [2], [3]] output_shape [1, 2, 8, 8] : tensor<2x8x8xf32> into tensor<1x2x8x8xf32>
  %true16 = arith.constant true
  %e17 = tensor.empty() : tensor<8x8xi1>
  %ones18 = linalg.fill ins(%true16 : i1) outs(%e17 : tensor<8x8xi1>) -> tensor<8x8xi1>
  %e19 = tensor.empty() : tensor<8x8xi1>
  // tril
  %g20 = linalg.generic {indexing_maps = [affine_map<(d0, d1) -> (d0, d1)>, affine_map<(d0, d1) -> (d0, d1)>], iterator_types = ["parallel", "parallel"]}
      ins(%ones18 : tensor<8x8xi1>) outs(%e19 : tensor<8x8xi1>) {
    ^bb0(%a0: i1, %out: i1):
    %i = linalg.index 0 : index
    %j = linalg.index 1 : index
    %keep = arith.cmpi ule, %j, %i : index
    %false = arith.constant false
    %r = arith.select %keep, %a0, %false : i1
      linalg.yield %r : i1
    } -> tensor<8x8xi1>
  %e21 = tensor.empty() : tensor<8x8xi1>
  // logical_not
  %g22 = linalg.generic {indexing_maps = [affine_map<(d0, d1) -> (d0, d1)>, affine_map<(d0, d1) -> (d0, d1)>], iterator_types = ["parallel", "parallel"]}
      ins(%g20 : tensor<8x8xi1>) outs(%e21 : tensor<8x8xi1>) {
    ^bb0(%a0: i1, %out: i1):
    %true = arith.constant true
    %r = arith.xori %a0, %true : i1
      linalg.yield %r : i1
    } -> tensor<8x8xi1>
  %ninf6423 = arith.constant 0xFFF0000000000000 : f64
  %zero6424 = arith.constant 0.0 : f64
  %e25 = tensor.empty() : tensor<8x8xf32>
  // where(mask, -inf, 0)
  %g26 = linalg.generic {indexing_maps = [affine_map<(d0, d1) -> (d0, d1)>, affine_map<(d0, d1) -> (d0, d1)>], iterator_types = ["parallel", "parallel"]}
      ins(%g22 : tensor<8x8xi1>) outs(%e25 : tensor<8x8xf32>) {
    ^bb0(%a0: i1, %out: f32):
    %m = arith.truncf %ninf6423 : f64 to f32
    %z = arith.truncf %zero6424 : f64 to f32
    %r = arith.select %a0, %m, %z : f32
      linalg.yield %r : f32
    } -> tensor<8x8xf32>
  %e27 = tensor.empty() : tensor<1x2x8x8xf32>
  // attn + mask
  %g28 = linalg.generic {indexing_maps = [affine_map<(d0, d1, d2, d3) -> (d0, d1, d2, d3)>, affine_map<(d0, d1, d2, d3) -> (d2, d3)>, affine_map<(d0, d1, d2, d3) -> (d0, d1, d2, d3)>], iterator_types = ["parallel", "parallel", "parallel", "parallel"]}
      ins(%x15, %g26 : tensor<1x2x8x8xf32>, tensor<8x8xf32>) outs(%e27 : tensor<1x2x8x8xf32>) {
    ^bb0(%a0: f32, %a1: f32, %out: f32):
    %r = arith.addf %a0, %a1 : f32
      linalg.yield %r : f32
    } -> tensor<1x2x8x8xf32>
  %ninf29 = arith.constant 0xFF800000 : f32
  %e30 = tensor.empty() : tensor<1x2x8x1xf32>
  %mf31 = linalg.fill ins(%ninf29 : f32) outs(%e30 : tensor<1x2x8x1xf32>) -> tensor<1x2x8x1xf32>
  %g32 = linalg.generic {indexing_maps = [affine_map<(d0, d1, d2, d3) -> (d0, d1, d2, d3)>, affine_map<(d0, d1, d2, d3) -> (d0, d1, d2, 0)>], iterator_types = ["parallel", "parallel", "parallel", "reduction"]}
      ins(%g28 : tensor<1x2x8x8xf32>) outs(%mf31 : tensor<1x2x8x1xf32>) {
    ^bb0(%a0: f32, %out: f32):
    %r = arith.maximumf %a0, %out : f32
      linalg.yield %r : f32
    } -> tensor<1x2x8x1xf32>
  %e33 = tensor.empty() : tensor<1x2x8x8xf32>
  %g34 = linalg.generic {indexing_maps = [affine_map<(d0, d1, d2, d3) -> (d0, d1, d2, d3)>, affine_map<(d0, d1, d2, d3) -> (d0, d1, d2, 0)>, affine_map<(d0, d1, d2, d3) -> (d0, d1, d2, d3)>], iterator_types = ["parallel", "parallel", "parallel", "parallel"]}
      ins(%g28, %g32 : tensor<1x2x8x8xf32>, tensor<1x2x8x1xf32>) outs(%e33 : tensor<1x2x8x8xf32>) {
    ^bb0(%a0: f32, %a1: f32, %out: f32):
    %r = arith.subf %a0, %a1 : f32
      linalg.yield %r : f32
    } -> tensor<1x2x8x8xf32>
  %e35 = tensor.empty() : tensor<1x2x8x8xf32>
  %g36 = linalg.generic {indexing_maps = [affine_map<(d0, d1, d2, d3) -> (d0, d1, d2, d3)>, affine_map<(d0, d1, d2, d3) -> (d0, d1, d2, d3)>], iterator_types = ["parallel", "parallel", "parallel", "parallel"]}
      ins(%g34 : tensor<1x2x8x8xf32>) outs(%e35 : tensor<1x2x8x8xf32>) {
    ^bb0(%a0: f32, %out: f32):
    %r = math.exp %a0 : f32
      linalg.yield %r : f32
    } -> tensor<1x2x8x8xf32>
  %zc37 = arith.constant 0.000000e+00 : f32
  %e38 = tensor.empty() : tensor<1x2x8x1xf32>
  %z39 = linalg.fill ins(%zc37 : f32) outs(%e38 : tensor<1x2x8x1xf32>) -> tensor<1x2x8x1xf32>
  %g40 = linalg.generic {indexing_maps = [affine_map<(d0, d1, d2, d3) -> (d0, d1, d2, d3)>, affine_map<(d0, d1, d2, d3) -> (d0, d1, d2, 0)>], iterator_types = ["parallel", "parallel", "parallel", "reduction"]}
      ins(%g36 : tensor<1x2x8x8xf32>) outs(%z39 : tensor<1x2x8x1xf32>) {
    ^bb0(%a0: f32, %out: f32):
    %r = arith.addf %a0, %out : f32
      linalg.yield %r : f32
    } -> tensor<1x2x8x1xf32>
  %e41 = tensor.empty() : tensor<1x2x8x8xf32>
  %g42 = linalg.generic {indexing_maps = [affine_map<(d0, d1, d2, d3) -> (d0, d1, d2, d3)>, affine_map<(d0, d1, d2, d3) -> (d0, d1, d2, 0)>, affine_map<(d0, d1, d2, d3) -> (d0, d1, d2, d3)>], iterator_types = ["parallel", "parallel", "parallel", "parallel"]}
      ins(%g36, %g40 : tensor<1x2x8x8xf32>, tensor<1x2x8x1xf32>) outs(%e41 : tensor<1x2x8x8xf32>) {
    ^bb0(%a0: f32, %a1: f32, %out: f32):
    %r = arith.divf %a0, %a1 : f32
      linalg.yield %r : f32
    } -> tensor<1x2x8x8xf32>
  %e43 = tensor.empty() : tensor<1x2x8x8xi1>
  // x == -inf
  %g44 = linalg.generic {indexing_maps = [affine_map<(d0, d1, d2, d3) -> (d0, d1, d2, d3)>, affine_map<(d0, d1, d2, d3) -> (d0, d1, d2, d3)>], iterator_types = ["parallel", "parallel", "parallel", "parallel"]}
      ins(%x15 : tensor<1x2x8x8xf32>) outs(%e43 : tensor<1x2x8x8xi1>) {
    ^bb0(%a0: f32, %out: i1):
    %c = arith.truncf %ninf6423 : f64 to f32
    %r = arith.cmpf oeq, %a0, %c : f32
      linalg.yield %r : i1
    } -> tensor<1x2x8x8xi1>
  %true45 = arith.constant true
  %e46 = tensor.empty() : tensor<1x2x8x1xi1>
  %alltrue47 = linalg.fill ins(%true45 : i1) outs(%e46 : tensor<1x2x8x1xi1>) -> tensor<1x2x8x1xi1>
  // all(dim=-1, keepdim)
  %g48 = linalg.generic {indexing_maps = [affine_map<(d0, d1, d2, d3) -> (d0, d1, d2, d3)>, affine_map<(d0, d1, d2, d3) -> (d0, d1, d2, 0)>], iterator_types = ["parallel", "parallel", "parallel", "reduction"]}
      ins(%g44 : tensor<1x2x8x8xi1>) outs(%alltrue47 : tensor<1x2x8x1xi1>) {
    ^bb0(%a0: i1, %out: i1):
    %r = arith.andi %a0, %out : i1
      linalg.yield %r : i1
    } -> tensor<1x2x8x1xi1>
  %zero49 = arith.constant dense<0.000000e+00> : tensor<f32>
  %e50 = tensor.empty() : tensor<1x2x8x8xf32>
  // where(masked_rows, 0, softmax)
  %g51 = linalg.generic {indexing_maps = [affine_map<(d0, d1, d2, d3) -> (d0, d1, d2, 0)>, affine_map<(d0, d1, d2, d3) -> ()>, affine_map<(d0, d1, d2, d3) -> (d0, d1, d2, d3)>, affine_map<(d0, d1, d2, d3) -> (d0, d1, d2, d3)>], iterator_types = ["parallel", "parallel", "parallel", "parallel"]}
      ins(%g48, %zero49, %g42 : tensor<1x2x8x1xi1>, tensor<f32>, tensor<1x2x8x8xf32>) outs(%e50 : tensor<1x2x8x8xf32>) {
    ^bb0(%a0: i1, %a1: f32, %a2: f32, %out: f32):
    %r = arith.select %a0, %a1, %a2 : f32
      linalg.yield %r : f32
    } -> tensor<1x2x8x8xf32>
  %c52 = tensor.collapse_shape %g51 [[0, 1], [2], [3]] : tensor<1x2x8x8xf32> into tensor<2x8x8xf32>
  %c53 = tensor.collapse_shape %v [[0, 1], [2], [3]] : tensor<1x2x8x16xf32> into tensor<2x8x16xf32>
  %zc54 = arith.constant 0.000000e+00 : f32
  %e55 = tensor.empty() : tensor<2x8x16xf32>
  %z56 = linalg.fill ins(%zc54 : f32) outs(%e55 : tensor<2x8x16xf32>) -> tensor<2x8x16xf32>
  // expected-remark @+1 {{not raised: the safe softmax tests another tensor than it normalises}}
  %mm57 = linalg.batch_matmul ins(%c52, %c53 : tensor<2x8x8xf32>, tensor<2x8x16xf32>) outs(%z56 : tensor<2x8x16xf32>) -> tensor<2x8x16xf32>
  %x58 = tensor.expand_shape %mm57 [[0, 1], [2], [3]] output_shape [1, 2, 8, 16] : tensor<2x8x16xf32> into tensor<1x2x8x16xf32>
  return %x58 : tensor<1x2x8x16xf32>
}

// -----

// Dynamic sequence lengths (B, H, D static): einsums, a causal mask on
// linalg.index, linalg.softmax; the raised op keeps the dynamic dims.
// CHECK-LABEL: func @dynamic_lengths
// CHECK-NEXT: %[[O:.*]] = fa.attention %arg0, %arg1, %arg2 {causal, scale = 1.000000e+00 : f32} : tensor<1x4x?x64xf32>, tensor<1x4x?x64xf32>, tensor<1x4x?x64xf32> -> tensor<1x4x?x64xf32>
#q_dynamic_lengths = affine_map<(b, h, i, j, d) -> (b, h, i, d)>
#k_dynamic_lengths = affine_map<(b, h, i, j, d) -> (b, h, j, d)>
#s_dynamic_lengths = affine_map<(b, h, i, j, d) -> (b, h, i, j)>
#p_dynamic_lengths = affine_map<(b, h, i, d, j) -> (b, h, i, j)>
#v_dynamic_lengths = affine_map<(b, h, i, d, j) -> (b, h, j, d)>
#o_dynamic_lengths = affine_map<(b, h, i, d, j) -> (b, h, i, d)>
#id_dynamic_lengths = affine_map<(b, h, i, j) -> (b, h, i, j)>
func.func @dynamic_lengths(%q: tensor<1x4x?x64xf32>, %k: tensor<1x4x?x64xf32>, %v: tensor<1x4x?x64xf32>, %s_init: tensor<1x4x?x?xf32>, %o_init: tensor<1x4x?x64xf32>) -> tensor<1x4x?x64xf32> {
  %zero = arith.constant 0.000000e+00 : f32
  %ninf = arith.constant 0xFF800000 : f32
  %s_zero = linalg.fill ins(%zero : f32) outs(%s_init : tensor<1x4x?x?xf32>) -> tensor<1x4x?x?xf32>
  %s = linalg.generic {indexing_maps = [#q_dynamic_lengths, #k_dynamic_lengths, #s_dynamic_lengths], iterator_types = ["parallel", "parallel", "parallel", "parallel", "reduction"]}
      ins(%q, %k : tensor<1x4x?x64xf32>, tensor<1x4x?x64xf32>) outs(%s_zero : tensor<1x4x?x?xf32>) {
  ^bb0(%a: f32, %b: f32, %acc: f32):
    %m = arith.mulf %a, %b : f32
    %r = arith.addf %acc, %m : f32
    linalg.yield %r : f32
  } -> tensor<1x4x?x?xf32>
  %masked = linalg.generic {indexing_maps = [#id_dynamic_lengths, #id_dynamic_lengths], iterator_types = ["parallel", "parallel", "parallel", "parallel"]}
      ins(%s : tensor<1x4x?x?xf32>) outs(%s_init : tensor<1x4x?x?xf32>) {
  ^bb0(%in: f32, %out: f32):
    %i = linalg.index 2 : index
    %j = linalg.index 3 : index
    %hidden = arith.cmpi ult, %i, %j : index
    %r = arith.select %hidden, %ninf, %in : f32
    linalg.yield %r : f32
  } -> tensor<1x4x?x?xf32>
  %pr = linalg.softmax dimension(3) ins(%masked : tensor<1x4x?x?xf32>) outs(%s_init : tensor<1x4x?x?xf32>) -> tensor<1x4x?x?xf32>
  %o_zero = linalg.fill ins(%zero : f32) outs(%o_init : tensor<1x4x?x64xf32>) -> tensor<1x4x?x64xf32>
  %out = linalg.generic {indexing_maps = [#p_dynamic_lengths, #v_dynamic_lengths, #o_dynamic_lengths], iterator_types = ["parallel", "parallel", "parallel", "parallel", "reduction"]}
      ins(%pr, %v : tensor<1x4x?x?xf32>, tensor<1x4x?x64xf32>) outs(%o_zero : tensor<1x4x?x64xf32>) {
  ^bb0(%a: f32, %b: f32, %acc: f32):
    %m = arith.mulf %a, %b : f32
    %r = arith.addf %acc, %m : f32
    linalg.yield %r : f32
  } -> tensor<1x4x?x64xf32>
  return %out : tensor<1x4x?x64xf32>
}

// -----

// Must not fire: a constant mask cannot be classified over dynamic
// lengths (here a 2 x 2 triangle read at (i, j)).
// CHECK-LABEL: func @dynamic_lengths_constant_mask
// CHECK-NOT: fa.attention
#q_dynamic_lengths_constant_mask = affine_map<(b, h, i, j, d) -> (b, h, i, d)>
#k_dynamic_lengths_constant_mask = affine_map<(b, h, i, j, d) -> (b, h, j, d)>
#s_dynamic_lengths_constant_mask = affine_map<(b, h, i, j, d) -> (b, h, i, j)>
#p_dynamic_lengths_constant_mask = affine_map<(b, h, i, d, j) -> (b, h, i, j)>
#v_dynamic_lengths_constant_mask = affine_map<(b, h, i, d, j) -> (b, h, j, d)>
#o_dynamic_lengths_constant_mask = affine_map<(b, h, i, d, j) -> (b, h, i, d)>
#id_dynamic_lengths_constant_mask = affine_map<(b, h, i, j) -> (b, h, i, j)>
func.func @dynamic_lengths_constant_mask(%q: tensor<1x4x?x64xf32>, %k: tensor<1x4x?x64xf32>, %v: tensor<1x4x?x64xf32>, %s_init: tensor<1x4x?x?xf32>, %o_init: tensor<1x4x?x64xf32>) -> tensor<1x4x?x64xf32> {
  %zero = arith.constant 0.000000e+00 : f32
  %ninf = arith.constant 0xFF800000 : f32
  %s_zero = linalg.fill ins(%zero : f32) outs(%s_init : tensor<1x4x?x?xf32>) -> tensor<1x4x?x?xf32>
  %s = linalg.generic {indexing_maps = [#q_dynamic_lengths_constant_mask, #k_dynamic_lengths_constant_mask, #s_dynamic_lengths_constant_mask], iterator_types = ["parallel", "parallel", "parallel", "parallel", "reduction"]}
      ins(%q, %k : tensor<1x4x?x64xf32>, tensor<1x4x?x64xf32>) outs(%s_zero : tensor<1x4x?x?xf32>) {
  ^bb0(%a: f32, %b: f32, %acc: f32):
    %m = arith.mulf %a, %b : f32
    %r = arith.addf %acc, %m : f32
    linalg.yield %r : f32
  } -> tensor<1x4x?x?xf32>
  %tril = arith.constant dense<[[false, true], [false, false]]> : tensor<2x2xi1>
  %masked = linalg.generic {indexing_maps = [#id_dynamic_lengths_constant_mask, affine_map<(b, h, i, j) -> (i, j)>, #id_dynamic_lengths_constant_mask], iterator_types = ["parallel", "parallel", "parallel", "parallel"]}
      ins(%s, %tril : tensor<1x4x?x?xf32>, tensor<2x2xi1>) outs(%s_init : tensor<1x4x?x?xf32>) {
  ^bb0(%in: f32, %hide: i1, %out: f32):
    %r = arith.select %hide, %ninf, %in : f32
    linalg.yield %r : f32
  } -> tensor<1x4x?x?xf32>
  %pr = linalg.softmax dimension(3) ins(%masked : tensor<1x4x?x?xf32>) outs(%s_init : tensor<1x4x?x?xf32>) -> tensor<1x4x?x?xf32>
  %o_zero = linalg.fill ins(%zero : f32) outs(%o_init : tensor<1x4x?x64xf32>) -> tensor<1x4x?x64xf32>
  // expected-remark @+1 {{not raised: the mask is a constant tensor over dynamic sequence lengths, not classified}}
  %out = linalg.generic {indexing_maps = [#p_dynamic_lengths_constant_mask, #v_dynamic_lengths_constant_mask, #o_dynamic_lengths_constant_mask], iterator_types = ["parallel", "parallel", "parallel", "parallel", "reduction"]}
      ins(%pr, %v : tensor<1x4x?x?xf32>, tensor<1x4x?x64xf32>) outs(%o_zero : tensor<1x4x?x64xf32>) {
  ^bb0(%a: f32, %b: f32, %acc: f32):
    %m = arith.mulf %a, %b : f32
    %r = arith.addf %acc, %m : f32
    linalg.yield %r : f32
  } -> tensor<1x4x?x64xf32>
  return %out : tensor<1x4x?x64xf32>
}

// -----

// A softcap (Gemma 2's attn_logit_softcapping, c * tanh(s / c) on the scaled
// scores) before the mask: raised to fa.attention's softcap with the scale
// inside it (test/Inputs/gemma_softcap.mlir; fa-run --raise
// --compare-unraised checks the numbers in Integration/CPU/raise-softcap.test).
// CHECK-LABEL: func @gemma_softcap
// CHECK: fa.attention %{{.*}}, %{{.*}}, %{{.*}} {causal, scale = 1.250000e-01 : f32, softcap = 2.000000e+00 : f32} : tensor<1x4x48x64xf32>
// CHECK-NOT: math.tanh
func.func @gemma_softcap(%q: tensor<4x48x64xf32>, %k: tensor<4x48x64xf32>, %v: tensor<4x48x64xf32>) -> tensor<4x48x64xf32> {
  %zero = arith.constant 0.000000e+00 : f32
  %e0 = tensor.empty() : tensor<4x48x48xf32>
  %z0 = linalg.fill ins(%zero : f32) outs(%e0 : tensor<4x48x48xf32>) -> tensor<4x48x48xf32>
  %s = linalg.batch_matmul indexing_maps = [affine_map<(b, i, j, d) -> (b, i, d)>, affine_map<(b, i, j, d) -> (b, j, d)>, affine_map<(b, i, j, d) -> (b, i, j)>] ins(%q, %k : tensor<4x48x64xf32>, tensor<4x48x64xf32>) outs(%z0 : tensor<4x48x48xf32>) -> tensor<4x48x48xf32>
  %e1 = tensor.empty() : tensor<4x48x48xf32>
  // scores * 1/8, / 2, tanh, * 2
  %capped = linalg.generic {indexing_maps = [affine_map<(b, i, j) -> (b, i, j)>, affine_map<(b, i, j) -> (b, i, j)>], iterator_types = ["parallel", "parallel", "parallel"]}
      ins(%s : tensor<4x48x48xf32>) outs(%e1 : tensor<4x48x48xf32>) {
    ^bb0(%x: f32, %out: f32):
      %scale = arith.constant 0.125 : f32
      %cap = arith.constant 2.0 : f32
      %a = arith.mulf %x, %scale : f32
      %b = arith.divf %a, %cap : f32
      %t = math.tanh %b : f32
      %c = arith.mulf %t, %cap : f32
      linalg.yield %c : f32
    } -> tensor<4x48x48xf32>
  %e2 = tensor.empty() : tensor<4x48x48xf32>
  %masked = linalg.generic {indexing_maps = [affine_map<(b, i, j) -> (b, i, j)>, affine_map<(b, i, j) -> (b, i, j)>], iterator_types = ["parallel", "parallel", "parallel"]}
      ins(%capped : tensor<4x48x48xf32>) outs(%e2 : tensor<4x48x48xf32>) {
    ^bb0(%x: f32, %out: f32):
      %i = linalg.index 1 : index
      %j = linalg.index 2 : index
      %hidden = arith.cmpi ugt, %j, %i : index
      %ninf = arith.constant 0xFF800000 : f32
      %m = arith.select %hidden, %ninf, %x : f32
      linalg.yield %m : f32
    } -> tensor<4x48x48xf32>
  %e3 = tensor.empty() : tensor<4x48x48xf32>
  %p = linalg.softmax dimension(2) ins(%masked : tensor<4x48x48xf32>) outs(%e3 : tensor<4x48x48xf32>) -> tensor<4x48x48xf32>
  %e4 = tensor.empty() : tensor<4x48x64xf32>
  %z4 = linalg.fill ins(%zero : f32) outs(%e4 : tensor<4x48x64xf32>) -> tensor<4x48x64xf32>
  %o = linalg.batch_matmul ins(%p, %v : tensor<4x48x48xf32>, tensor<4x48x64xf32>) outs(%z4 : tensor<4x48x64xf32>) -> tensor<4x48x64xf32>
  return %o : tensor<4x48x64xf32>
}

// -----

// Must not fire: the mask comes before the tanh, which would turn hidden
// scores into -c instead of -inf.
// CHECK-LABEL: func @softcap_after_mask
// CHECK-NOT: fa.attention
func.func @softcap_after_mask(%q: tensor<4x48x64xf32>, %k: tensor<4x48x64xf32>, %v: tensor<4x48x64xf32>) -> tensor<4x48x64xf32> {
  %zero = arith.constant 0.000000e+00 : f32
  %e0 = tensor.empty() : tensor<4x48x48xf32>
  %z0 = linalg.fill ins(%zero : f32) outs(%e0 : tensor<4x48x48xf32>) -> tensor<4x48x48xf32>
  %s = linalg.batch_matmul indexing_maps = [affine_map<(b, i, j, d) -> (b, i, d)>, affine_map<(b, i, j, d) -> (b, j, d)>, affine_map<(b, i, j, d) -> (b, i, j)>] ins(%q, %k : tensor<4x48x64xf32>, tensor<4x48x64xf32>) outs(%z0 : tensor<4x48x48xf32>) -> tensor<4x48x48xf32>
  %e2 = tensor.empty() : tensor<4x48x48xf32>
  %masked = linalg.generic {indexing_maps = [affine_map<(b, i, j) -> (b, i, j)>, affine_map<(b, i, j) -> (b, i, j)>], iterator_types = ["parallel", "parallel", "parallel"]}
      ins(%s : tensor<4x48x48xf32>) outs(%e2 : tensor<4x48x48xf32>) {
    ^bb0(%x: f32, %out: f32):
      %i = linalg.index 1 : index
      %j = linalg.index 2 : index
      %hidden = arith.cmpi ugt, %j, %i : index
      %ninf = arith.constant 0xFF800000 : f32
      %m = arith.select %hidden, %ninf, %x : f32
      linalg.yield %m : f32
    } -> tensor<4x48x48xf32>
  %e1 = tensor.empty() : tensor<4x48x48xf32>
  // scores * 1/8, / 2, tanh, * 2
  %capped = linalg.generic {indexing_maps = [affine_map<(b, i, j) -> (b, i, j)>, affine_map<(b, i, j) -> (b, i, j)>], iterator_types = ["parallel", "parallel", "parallel"]}
      ins(%masked : tensor<4x48x48xf32>) outs(%e1 : tensor<4x48x48xf32>) {
    ^bb0(%x: f32, %out: f32):
      %scale = arith.constant 0.125 : f32
      %cap = arith.constant 2.0 : f32
      %a = arith.mulf %x, %scale : f32
      %b = arith.divf %a, %cap : f32
      %t = math.tanh %b : f32
      %c = arith.mulf %t, %cap : f32
      linalg.yield %c : f32
    } -> tensor<4x48x48xf32>
  %e3 = tensor.empty() : tensor<4x48x48xf32>
  %p = linalg.softmax dimension(2) ins(%capped : tensor<4x48x48xf32>) outs(%e3 : tensor<4x48x48xf32>) -> tensor<4x48x48xf32>
  %e4 = tensor.empty() : tensor<4x48x64xf32>
  %z4 = linalg.fill ins(%zero : f32) outs(%e4 : tensor<4x48x64xf32>) -> tensor<4x48x64xf32>
  // expected-remark @+1 {{not raised: a mask before the softcap's tanh (hidden scores would become -c, not -inf)}}
  %o = linalg.batch_matmul ins(%p, %v : tensor<4x48x48xf32>, tensor<4x48x64xf32>) outs(%z4 : tensor<4x48x64xf32>) -> tensor<4x48x64xf32>
  return %o : tensor<4x48x64xf32>
}

// -----

// Must not fire: tanh twice is not a softcap.
// CHECK-LABEL: func @softcap_twice
// CHECK-NOT: fa.attention
func.func @softcap_twice(%q: tensor<4x48x64xf32>, %k: tensor<4x48x64xf32>, %v: tensor<4x48x64xf32>) -> tensor<4x48x64xf32> {
  %zero = arith.constant 0.000000e+00 : f32
  %e0 = tensor.empty() : tensor<4x48x48xf32>
  %z0 = linalg.fill ins(%zero : f32) outs(%e0 : tensor<4x48x48xf32>) -> tensor<4x48x48xf32>
  %s = linalg.batch_matmul indexing_maps = [affine_map<(b, i, j, d) -> (b, i, d)>, affine_map<(b, i, j, d) -> (b, j, d)>, affine_map<(b, i, j, d) -> (b, i, j)>] ins(%q, %k : tensor<4x48x64xf32>, tensor<4x48x64xf32>) outs(%z0 : tensor<4x48x48xf32>) -> tensor<4x48x48xf32>
  %e1 = tensor.empty() : tensor<4x48x48xf32>
  // scores * 1/8, / 2, tanh, * 2
  %capped = linalg.generic {indexing_maps = [affine_map<(b, i, j) -> (b, i, j)>, affine_map<(b, i, j) -> (b, i, j)>], iterator_types = ["parallel", "parallel", "parallel"]}
      ins(%s : tensor<4x48x48xf32>) outs(%e1 : tensor<4x48x48xf32>) {
    ^bb0(%x: f32, %out: f32):
      %scale = arith.constant 0.125 : f32
      %cap = arith.constant 2.0 : f32
      %a = arith.mulf %x, %scale : f32
      %b = arith.divf %a, %cap : f32
      %t = math.tanh %b : f32
      %t2 = math.tanh %t : f32
      %c = arith.mulf %t2, %cap : f32
      linalg.yield %c : f32
    } -> tensor<4x48x48xf32>
  %e2 = tensor.empty() : tensor<4x48x48xf32>
  %masked = linalg.generic {indexing_maps = [affine_map<(b, i, j) -> (b, i, j)>, affine_map<(b, i, j) -> (b, i, j)>], iterator_types = ["parallel", "parallel", "parallel"]}
      ins(%capped : tensor<4x48x48xf32>) outs(%e2 : tensor<4x48x48xf32>) {
    ^bb0(%x: f32, %out: f32):
      %i = linalg.index 1 : index
      %j = linalg.index 2 : index
      %hidden = arith.cmpi ugt, %j, %i : index
      %ninf = arith.constant 0xFF800000 : f32
      %m = arith.select %hidden, %ninf, %x : f32
      linalg.yield %m : f32
    } -> tensor<4x48x48xf32>
  %e3 = tensor.empty() : tensor<4x48x48xf32>
  %p = linalg.softmax dimension(2) ins(%masked : tensor<4x48x48xf32>) outs(%e3 : tensor<4x48x48xf32>) -> tensor<4x48x48xf32>
  %e4 = tensor.empty() : tensor<4x48x64xf32>
  %z4 = linalg.fill ins(%zero : f32) outs(%e4 : tensor<4x48x64xf32>) -> tensor<4x48x64xf32>
  // expected-remark @+1 {{not raised: between Q K^T and the softmax: the scores pass through tanh twice}}
  %o = linalg.batch_matmul ins(%p, %v : tensor<4x48x48xf32>, tensor<4x48x64xf32>) outs(%z4 : tensor<4x48x64xf32>) -> tensor<4x48x64xf32>
  return %o : tensor<4x48x64xf32>
}
