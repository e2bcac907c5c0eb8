// jax.nn.softmax(q k^T * scale + causal mask) v in bf16 with f32
// accumulation, as StableHLO legalised to linalg (stablehlo-legalize-to-linalg,
// default options) spells it: dot_general as einsum generics that extend
// bf16 to f32 in their bodies, broadcast_in_dim as copy generics (the row
// max and sum reshaped to [.., N, 1]; the i1 mask from two iotas), the scale
// and -inf as splat constant tensors, P and O converted back to bf16.
// Written by hand in the conversion's form (stablehlo-opt is not installed
// here); used by test/Integration/CPU/raise-stablehlo.test.
#q = affine_map<(d0, d1, d2, d3, d4) -> (d0, d1, d2, d4)>
#k = affine_map<(d0, d1, d2, d3, d4) -> (d0, d1, d3, d4)>
#vt = affine_map<(d0, d1, d2, d3, d4) -> (d0, d1, d4, d3)>
#o = affine_map<(d0, d1, d2, d3, d4) -> (d0, d1, d2, d3)>
#id = affine_map<(d0, d1, d2, d3) -> (d0, d1, d2, d3)>
#row = affine_map<(d0, d1, d2, d3) -> (d0, d1, d2)>
#id2 = affine_map<(d0, d1) -> (d0, d1)>
#last2 = affine_map<(d0, d1, d2, d3) -> (d2, d3)>
#keep = affine_map<(d0, d1, d2, d3) -> (d0, d1, d2, 0)>
func.func @attention(%arg0: tensor<1x2x40x32xbf16>, %arg1: tensor<1x2x40x32xbf16>, %arg2: tensor<1x2x40x32xbf16>) -> tensor<1x2x40x32xbf16> {
  %cst = arith.constant 0.000000e+00 : f32
  %cst_0 = arith.constant dense<0xFF800000> : tensor<f32>
  %cst_1 = arith.constant dense<0.000000e+00> : tensor<f32>
  %cst_2 = arith.constant dense<0.176776692> : tensor<1x2x40x40xf32>
  %0 = tensor.empty() : tensor<1x2x40x40xf32>
  %1 = linalg.fill ins(%cst : f32) outs(%0 : tensor<1x2x40x40xf32>) -> tensor<1x2x40x40xf32>
  %2 = linalg.generic {indexing_maps = [#q, #k, #o], iterator_types = ["parallel", "parallel", "parallel", "parallel", "reduction"]} ins(%arg0, %arg1 : tensor<1x2x40x32xbf16>, tensor<1x2x40x32xbf16>) outs(%1 : tensor<1x2x40x40xf32>) {
  ^bb0(%in: bf16, %in_3: bf16, %out: f32):
    %x0 = arith.extf %in : bf16 to f32
    %x1 = arith.extf %in_3 : bf16 to f32
    %30 = arith.mulf %x0, %x1 : f32
    %31 = arith.addf %out, %30 : f32
    linalg.yield %31 : f32
  } -> tensor<1x2x40x40xf32>
  %3 = linalg.generic {indexing_maps = [#id, #id, #id], iterator_types = ["parallel", "parallel", "parallel", "parallel"]} ins(%2, %cst_2 : tensor<1x2x40x40xf32>, tensor<1x2x40x40xf32>) outs(%0 : tensor<1x2x40x40xf32>) {
  ^bb0(%in: f32, %in_3: f32, %out: f32):
    %30 = arith.mulf %in, %in_3 : f32
    linalg.yield %30 : f32
  } -> tensor<1x2x40x40xf32>
  %m0 = tensor.empty() : tensor<40x40xi32>
  %io0 = linalg.generic {indexing_maps = [#id2], iterator_types = ["parallel", "parallel"]} outs(%m0 : tensor<40x40xi32>) {
  ^bb0(%out: i32):
    %i = linalg.index 0 : index
    %c = arith.index_cast %i : index to i32
    linalg.yield %c : i32
  } -> tensor<40x40xi32>
  %io1 = linalg.generic {indexing_maps = [#id2], iterator_types = ["parallel", "parallel"]} outs(%m0 : tensor<40x40xi32>) {
  ^bb0(%out: i32):
    %i = linalg.index 1 : index
    %c = arith.index_cast %i : index to i32
    linalg.yield %c : i32
  } -> tensor<40x40xi32>
  %mb = tensor.empty() : tensor<40x40xi1>
  %ge = linalg.generic {indexing_maps = [#id2, #id2, #id2], iterator_types = ["parallel", "parallel"]} ins(%io0, %io1 : tensor<40x40xi32>, tensor<40x40xi32>) outs(%mb : tensor<40x40xi1>) {
  ^bb0(%a: i32, %b: i32, %out: i1):
    %c = arith.cmpi sge, %a, %b : i32
    linalg.yield %c : i1
  } -> tensor<40x40xi1>
  %mb4 = tensor.empty() : tensor<1x2x40x40xi1>
  %bm = linalg.generic {indexing_maps = [#last2, #id], iterator_types = ["parallel", "parallel", "parallel", "parallel"]} ins(%ge : tensor<40x40xi1>) outs(%mb4 : tensor<1x2x40x40xi1>) {
  ^bb0(%in: i1, %out: i1):
    linalg.yield %in : i1
  } -> tensor<1x2x40x40xi1>
  %ninf = arith.constant dense<0xFF800000> : tensor<1x2x40x40xf32>
  %sel = linalg.generic {indexing_maps = [#id, #id, #id, #id], iterator_types = ["parallel", "parallel", "parallel", "parallel"]} ins(%bm, %3, %ninf : tensor<1x2x40x40xi1>, tensor<1x2x40x40xf32>, tensor<1x2x40x40xf32>) outs(%0 : tensor<1x2x40x40xf32>) {
  ^bb0(%p: i1, %a: f32, %b: f32, %out: f32):
    %c = arith.select %p, %a, %b : f32
    linalg.yield %c : f32
  } -> tensor<1x2x40x40xf32>
  %extracted = tensor.extract %cst_0[] : tensor<f32>
  %4 = tensor.empty() : tensor<1x2x40xf32>
  %5 = linalg.fill ins(%extracted : f32) outs(%4 : tensor<1x2x40xf32>) -> tensor<1x2x40xf32>
  %6 = linalg.generic {indexing_maps = [#id, #row], iterator_types = ["parallel", "parallel", "parallel", "reduction"]} ins(%sel : tensor<1x2x40x40xf32>) outs(%5 : tensor<1x2x40xf32>) {
  ^bb0(%in: f32, %out: f32):
    %30 = arith.maximumf %out, %in : f32
    linalg.yield %30 : f32
  } -> tensor<1x2x40xf32>
  %expanded = tensor.expand_shape %6 [[0], [1], [2, 3]] output_shape [1, 2, 40, 1] : tensor<1x2x40xf32> into tensor<1x2x40x1xf32>
  %7 = linalg.generic {indexing_maps = [#keep, #id], iterator_types = ["parallel", "parallel", "parallel", "parallel"]} ins(%expanded : tensor<1x2x40x1xf32>) outs(%0 : tensor<1x2x40x40xf32>) {
  ^bb0(%in: f32, %out: f32):
    linalg.yield %in : f32
  } -> tensor<1x2x40x40xf32>
  %8 = linalg.generic {indexing_maps = [#id, #id, #id], iterator_types = ["parallel", "parallel", "parallel", "parallel"]} ins(%sel, %7 : tensor<1x2x40x40xf32>, tensor<1x2x40x40xf32>) outs(%0 : tensor<1x2x40x40xf32>) {
  ^bb0(%in: f32, %in_3: f32, %out: f32):
    %30 = arith.subf %in, %in_3 : f32
    linalg.yield %30 : f32
  } -> tensor<1x2x40x40xf32>
  %9 = linalg.generic {indexing_maps = [#id, #id], iterator_types = ["parallel", "parallel", "parallel", "parallel"]} ins(%8 : tensor<1x2x40x40xf32>) outs(%0 : tensor<1x2x40x40xf32>) {
  ^bb0(%in: f32, %out: f32):
    %30 = math.exp %in : f32
    linalg.yield %30 : f32
  } -> tensor<1x2x40x40xf32>
  %extracted_4 = tensor.extract %cst_1[] : tensor<f32>
  %10 = linalg.fill ins(%extracted_4 : f32) outs(%4 : tensor<1x2x40xf32>) -> tensor<1x2x40xf32>
  %11 = linalg.generic {indexing_maps = [#id, #row], iterator_types = ["parallel", "parallel", "parallel", "reduction"]} ins(%9 : tensor<1x2x40x40xf32>) outs(%10 : tensor<1x2x40xf32>) {
  ^bb0(%in: f32, %out: f32):
    %30 = arith.addf %out, %in : f32
    linalg.yield %30 : f32
  } -> tensor<1x2x40xf32>
  %expanded_5 = tensor.expand_shape %11 [[0], [1], [2, 3]] output_shape [1, 2, 40, 1] : tensor<1x2x40xf32> into tensor<1x2x40x1xf32>
  %12 = linalg.generic {indexing_maps = [#keep, #id], iterator_types = ["parallel", "parallel", "parallel", "parallel"]} ins(%expanded_5 : tensor<1x2x40x1xf32>) outs(%0 : tensor<1x2x40x40xf32>) {
  ^bb0(%in: f32, %out: f32):
    linalg.yield %in : f32
  } -> tensor<1x2x40x40xf32>
  %13 = linalg.generic {indexing_maps = [#id, #id, #id], iterator_types = ["parallel", "parallel", "parallel", "parallel"]} ins(%9, %12 : tensor<1x2x40x40xf32>, tensor<1x2x40x40xf32>) outs(%0 : tensor<1x2x40x40xf32>) {
  ^bb0(%in: f32, %in_3: f32, %out: f32):
    %30 = arith.divf %in, %in_3 : f32
    linalg.yield %30 : f32
  } -> tensor<1x2x40x40xf32>
  %eb = tensor.empty() : tensor<1x2x40x40xbf16>
  %pb = linalg.generic {indexing_maps = [#id, #id], iterator_types = ["parallel", "parallel", "parallel", "parallel"]} ins(%13 : tensor<1x2x40x40xf32>) outs(%eb : tensor<1x2x40x40xbf16>) {
  ^bb0(%in: f32, %out: bf16):
    %t = arith.truncf %in : f32 to bf16
    linalg.yield %t : bf16
  } -> tensor<1x2x40x40xbf16>
  %14 = tensor.empty() : tensor<1x2x40x32xf32>
  %15 = linalg.fill ins(%cst : f32) outs(%14 : tensor<1x2x40x32xf32>) -> tensor<1x2x40x32xf32>
  %16 = linalg.generic {indexing_maps = [#q, #vt, #o], iterator_types = ["parallel", "parallel", "parallel", "parallel", "reduction"]} ins(%pb, %arg2 : tensor<1x2x40x40xbf16>, tensor<1x2x40x32xbf16>) outs(%15 : tensor<1x2x40x32xf32>) {
  ^bb0(%in: bf16, %in_3: bf16, %out: f32):
    %x0 = arith.extf %in : bf16 to f32
    %x1 = arith.extf %in_3 : bf16 to f32
    %30 = arith.mulf %x0, %x1 : f32
    %31 = arith.addf %out, %30 : f32
    linalg.yield %31 : f32
  } -> tensor<1x2x40x32xf32>
  %eo = tensor.empty() : tensor<1x2x40x32xbf16>
  %ob = linalg.generic {indexing_maps = [#id, #id], iterator_types = ["parallel", "parallel", "parallel", "parallel"]} ins(%16 : tensor<1x2x40x32xf32>) outs(%eo : tensor<1x2x40x32xbf16>) {
  ^bb0(%in: f32, %out: bf16):
    %t = arith.truncf %in : f32 to bf16
    linalg.yield %t : bf16
  } -> tensor<1x2x40x32xbf16>
  return %ob : tensor<1x2x40x32xbf16>
}
