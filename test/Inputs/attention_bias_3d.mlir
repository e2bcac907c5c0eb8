// An attention on [H, N, D] tensors as a front end lowers it with
// batch_matmul (torch-mlir's 3-D form, B = 1), plus a full [H, Nq, Nk] bias
// added after the scale, the bias first in the add. fa-raise-attention
// raises it into fa.attention with a score_mod reading bias[h, i, j].
func.func @bias3d(%q: tensor<4x40x32xf32>, %k: tensor<4x48x32xf32>, %v: tensor<4x48x32xf32>, %bias: tensor<4x40x48xf32>) -> tensor<4x40x32xf32> {
  %zero = arith.constant 0.000000e+00 : f32
  %e0 = tensor.empty() : tensor<4x40x48xf32>
  %z0 = linalg.fill ins(%zero : f32) outs(%e0 : tensor<4x40x48xf32>) -> tensor<4x40x48xf32>
  %s = linalg.batch_matmul indexing_maps = [affine_map<(b, i, j, d) -> (b, i, d)>, affine_map<(b, i, j, d) -> (b, j, d)>, affine_map<(b, i, j, d) -> (b, i, j)>] ins(%q, %k : tensor<4x40x32xf32>, tensor<4x48x32xf32>) outs(%z0 : tensor<4x40x48xf32>) -> tensor<4x40x48xf32>
  %e1 = tensor.empty() : tensor<4x40x48xf32>
  %scaled = linalg.generic {indexing_maps = [affine_map<(h, i, j) -> (h, i, j)>, affine_map<(h, i, j) -> (h, i, j)>], iterator_types = ["parallel", "parallel", "parallel"]}
      ins(%s : tensor<4x40x48xf32>) outs(%e1 : tensor<4x40x48xf32>) {
    ^bb0(%x: f32, %o: f32):
      %c = arith.constant 0.176776695 : f32
      %y = arith.mulf %x, %c : f32
      linalg.yield %y : f32
    } -> tensor<4x40x48xf32>
  %e2 = tensor.empty() : tensor<4x40x48xf32>
  %biased = linalg.generic {indexing_maps = [affine_map<(h, i, j) -> (h, i, j)>, affine_map<(h, i, j) -> (h, i, j)>, affine_map<(h, i, j) -> (h, i, j)>], iterator_types = ["parallel", "parallel", "parallel"]}
      ins(%bias, %scaled : tensor<4x40x48xf32>, tensor<4x40x48xf32>) outs(%e2 : tensor<4x40x48xf32>) {
    ^bb0(%bb: f32, %x: f32, %o: f32):
      %y = arith.addf %bb, %x : f32
      linalg.yield %y : f32
    } -> tensor<4x40x48xf32>
  %e3 = tensor.empty() : tensor<4x40x48xf32>
  %p = linalg.softmax dimension(2) ins(%biased : tensor<4x40x48xf32>) outs(%e3 : tensor<4x40x48xf32>) -> tensor<4x40x48xf32>
  %e4 = tensor.empty() : tensor<4x40x32xf32>
  %z4 = linalg.fill ins(%zero : f32) outs(%e4 : tensor<4x40x32xf32>) -> tensor<4x40x32xf32>
  %o = linalg.batch_matmul ins(%p, %v : tensor<4x40x48xf32>, tensor<4x48x32xf32>) outs(%z4 : tensor<4x40x32xf32>) -> tensor<4x40x32xf32>
  return %o : tensor<4x40x32xf32>
}
