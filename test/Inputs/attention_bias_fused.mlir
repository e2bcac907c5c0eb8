// As attention_bias_lifted.mlir, with the scale and the bias fused into one
// elementwise body (x * 0.25 + extf(bias), as after linalg's elementwise
// fusion), the bias in f16: raised to scale 0.25 and a score_mod adding the
// extended bias.
func.func @fused(%q: tensor<2x3x24x16xf32>, %k: tensor<2x3x32x16xf32>, %v: tensor<2x3x32x16xf32>, %bias: tensor<6x24x32xf16>) -> tensor<2x3x24x16xf32> {
  %zero = arith.constant 0.000000e+00 : f32
  %cq = tensor.collapse_shape %q [[0, 1], [2], [3]] : tensor<2x3x24x16xf32> into tensor<6x24x16xf32>
  %ck = tensor.collapse_shape %k [[0, 1], [2], [3]] : tensor<2x3x32x16xf32> into tensor<6x32x16xf32>
  %cv = tensor.collapse_shape %v [[0, 1], [2], [3]] : tensor<2x3x32x16xf32> into tensor<6x32x16xf32>
  %e0 = tensor.empty() : tensor<6x24x32xf32>
  %z0 = linalg.fill ins(%zero : f32) outs(%e0 : tensor<6x24x32xf32>) -> tensor<6x24x32xf32>
  %s = linalg.batch_matmul indexing_maps = [affine_map<(b, i, j, d) -> (b, i, d)>, affine_map<(b, i, j, d) -> (b, j, d)>, affine_map<(b, i, j, d) -> (b, i, j)>] ins(%cq, %ck : tensor<6x24x16xf32>, tensor<6x32x16xf32>) outs(%z0 : tensor<6x24x32xf32>) -> tensor<6x24x32xf32>
  %e1 = tensor.empty() : tensor<6x24x32xf32>
  %biased = linalg.generic {indexing_maps = [affine_map<(h, i, j) -> (h, i, j)>, affine_map<(h, i, j) -> (h, i, j)>, affine_map<(h, i, j) -> (h, i, j)>], iterator_types = ["parallel", "parallel", "parallel"]}
      ins(%s, %bias : tensor<6x24x32xf32>, tensor<6x24x32xf16>) outs(%e1 : tensor<6x24x32xf32>) {
    ^bb0(%x: f32, %bb: f16, %o: f32):
      %c = arith.constant 0.25 : f32
      %y = arith.mulf %x, %c : f32
      %w = arith.extf %bb : f16 to f32
      %r = arith.addf %y, %w : f32
      linalg.yield %r : f32
    } -> tensor<6x24x32xf32>
  %x4 = tensor.expand_shape %biased [[0, 1], [2], [3]] output_shape [2, 3, 24, 32] : tensor<6x24x32xf32> into tensor<2x3x24x32xf32>
  %e2 = tensor.empty() : tensor<2x3x24x32xf32>
  %p = linalg.softmax dimension(3) ins(%x4 : tensor<2x3x24x32xf32>) outs(%e2 : tensor<2x3x24x32xf32>) -> tensor<2x3x24x32xf32>
  %p3 = tensor.collapse_shape %p [[0, 1], [2], [3]] : tensor<2x3x24x32xf32> into tensor<6x24x32xf32>
  %e3 = tensor.empty() : tensor<6x24x16xf32>
  %z3 = linalg.fill ins(%zero : f32) outs(%e3 : tensor<6x24x16xf32>) -> tensor<6x24x16xf32>
  %o3 = linalg.batch_matmul ins(%p3, %cv : tensor<6x24x32xf32>, tensor<6x32x16xf32>) outs(%z3 : tensor<6x24x16xf32>) -> tensor<6x24x16xf32>
  %o = tensor.expand_shape %o3 [[0, 1], [2], [3]] output_shape [2, 3, 24, 16] : tensor<6x24x16xf32> into tensor<2x3x24x16xf32>
  return %o : tensor<2x3x24x16xf32>
}
