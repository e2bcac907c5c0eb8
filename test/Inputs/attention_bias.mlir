// Attention with additive biases, as a front end lowers torch's
// softmax(q @ k^T * scale + bias) @ v to linalg on tensors (f32, [B, H, N, D]):
//  * @biased, first attention: a full [B, H, Nq, Nk] bias (a relative-position
//    bias, a mask from an argument) added after the scale;
//  * second attention: a padding mask [B, 1, 1, Nk] broadcast over heads and
//    queries, added before the scale (so the scale multiplies it too).
// fa-raise-attention raises both into fa.attention with a score_mod region
// that reads the captured bias.
func.func @biased(%q: tensor<2x3x40x32xf32>, %k: tensor<2x3x56x32xf32>, %v: tensor<2x3x56x32xf32>, %bias: tensor<2x3x40x56xf32>, %pad: tensor<2x1x1x56xf32>) -> (tensor<2x3x40x32xf32>, tensor<2x3x40x32xf32>) {
  %z1 = arith.constant 0.000000e+00 : f32
  %e1a = tensor.empty() : tensor<2x3x40x56xf32>
  %f1a = linalg.fill ins(%z1 : f32) outs(%e1a : tensor<2x3x40x56xf32>) -> tensor<2x3x40x56xf32>
  %qk1 = linalg.generic {indexing_maps = [affine_map<(b, h, i, j, d) -> (b, h, i, d)>, affine_map<(b, h, i, j, d) -> (b, h, j, d)>, affine_map<(b, h, i, j, d) -> (b, h, i, j)>], iterator_types = ["parallel", "parallel", "parallel", "parallel", "reduction"]}
      ins(%q, %k : tensor<2x3x40x32xf32>, tensor<2x3x56x32xf32>) outs(%f1a : tensor<2x3x40x56xf32>) {
    ^bb0(%a: f32, %b: f32, %acc: f32):
      %m = arith.mulf %a, %b : f32
      %r = arith.addf %acc, %m : f32
      linalg.yield %r : f32
    } -> tensor<2x3x40x56xf32>
  %e1s = tensor.empty() : tensor<2x3x40x56xf32>
  %sc1 = linalg.generic {indexing_maps = [affine_map<(b, h, i, j) -> (b, h, i, j)>, affine_map<(b, h, i, j) -> (b, h, i, j)>], iterator_types = ["parallel", "parallel", "parallel", "parallel"]}
      ins(%qk1 : tensor<2x3x40x56xf32>) outs(%e1s : tensor<2x3x40x56xf32>) {
    ^bb0(%x: f32, %o: f32):
      %c = arith.constant 0.176776695 : f32
      %y = arith.mulf %x, %c : f32
      linalg.yield %y : f32
    } -> tensor<2x3x40x56xf32>
  %e1b = tensor.empty() : tensor<2x3x40x56xf32>
  %bi1 = linalg.generic {indexing_maps = [affine_map<(b, h, i, j) -> (b, h, i, j)>, affine_map<(b, h, i, j) -> (b, h, i, j)>, affine_map<(b, h, i, j) -> (b, h, i, j)>], iterator_types = ["parallel", "parallel", "parallel", "parallel"]}
      ins(%sc1, %bias : tensor<2x3x40x56xf32>, tensor<2x3x40x56xf32>) outs(%e1b : tensor<2x3x40x56xf32>) {
    ^bb0(%x: f32, %bb: f32, %o: f32):
      %y = arith.addf %x, %bb : f32
      linalg.yield %y : f32
    } -> tensor<2x3x40x56xf32>
  %e1p = tensor.empty() : tensor<2x3x40x56xf32>
  %p1 = linalg.softmax dimension(3) ins(%bi1 : tensor<2x3x40x56xf32>) outs(%e1p : tensor<2x3x40x56xf32>) -> tensor<2x3x40x56xf32>
  %e1o = tensor.empty() : tensor<2x3x40x32xf32>
  %f1o = linalg.fill ins(%z1 : f32) outs(%e1o : tensor<2x3x40x32xf32>) -> tensor<2x3x40x32xf32>
  %o1 = linalg.generic {indexing_maps = [affine_map<(b, h, i, d, j) -> (b, h, i, j)>, affine_map<(b, h, i, d, j) -> (b, h, j, d)>, affine_map<(b, h, i, d, j) -> (b, h, i, d)>], iterator_types = ["parallel", "parallel", "parallel", "parallel", "reduction"]}
      ins(%p1, %v : tensor<2x3x40x56xf32>, tensor<2x3x56x32xf32>) outs(%f1o : tensor<2x3x40x32xf32>) {
    ^bb0(%a: f32, %b: f32, %acc: f32):
      %m = arith.mulf %a, %b : f32
      %r = arith.addf %acc, %m : f32
      linalg.yield %r : f32
    } -> tensor<2x3x40x32xf32>
  %z2 = arith.constant 0.000000e+00 : f32
  %e2a = tensor.empty() : tensor<2x3x40x56xf32>
  %f2a = linalg.fill ins(%z2 : f32) outs(%e2a : tensor<2x3x40x56xf32>) -> tensor<2x3x40x56xf32>
  %qk2 = linalg.generic {indexing_maps = [affine_map<(b, h, i, j, d) -> (b, h, i, d)>, affine_map<(b, h, i, j, d) -> (b, h, j, d)>, affine_map<(b, h, i, j, d) -> (b, h, i, j)>], iterator_types = ["parallel", "parallel", "parallel", "parallel", "reduction"]}
      ins(%q, %k : tensor<2x3x40x32xf32>, tensor<2x3x56x32xf32>) outs(%f2a : tensor<2x3x40x56xf32>) {
    ^bb0(%a: f32, %b: f32, %acc: f32):
      %m = arith.mulf %a, %b : f32
      %r = arith.addf %acc, %m : f32
      linalg.yield %r : f32
    } -> tensor<2x3x40x56xf32>
  %e2b = tensor.empty() : tensor<2x3x40x56xf32>
  %bi2 = linalg.generic {indexing_maps = [affine_map<(b, h, i, j) -> (b, h, i, j)>, affine_map<(b, h, i, j) -> (b, 0, 0, j)>, affine_map<(b, h, i, j) -> (b, h, i, j)>], iterator_types = ["parallel", "parallel", "parallel", "parallel"]}
      ins(%qk2, %pad : tensor<2x3x40x56xf32>, tensor<2x1x1x56xf32>) outs(%e2b : tensor<2x3x40x56xf32>) {
    ^bb0(%x: f32, %bb: f32, %o: f32):
      %y = arith.addf %x, %bb : f32
      linalg.yield %y : f32
    } -> tensor<2x3x40x56xf32>
  %e2s = tensor.empty() : tensor<2x3x40x56xf32>
  %sc2 = linalg.generic {indexing_maps = [affine_map<(b, h, i, j) -> (b, h, i, j)>, affine_map<(b, h, i, j) -> (b, h, i, j)>], iterator_types = ["parallel", "parallel", "parallel", "parallel"]}
      ins(%bi2 : tensor<2x3x40x56xf32>) outs(%e2s : tensor<2x3x40x56xf32>) {
    ^bb0(%x: f32, %o: f32):
      %c = arith.constant 0.176776695 : f32
      %y = arith.mulf %x, %c : f32
      linalg.yield %y : f32
    } -> tensor<2x3x40x56xf32>
  %e2p = tensor.empty() : tensor<2x3x40x56xf32>
  %p2 = linalg.softmax dimension(3) ins(%sc2 : tensor<2x3x40x56xf32>) outs(%e2p : tensor<2x3x40x56xf32>) -> tensor<2x3x40x56xf32>
  %e2o = tensor.empty() : tensor<2x3x40x32xf32>
  %f2o = linalg.fill ins(%z2 : f32) outs(%e2o : tensor<2x3x40x32xf32>) -> tensor<2x3x40x32xf32>
  %o2 = linalg.generic {indexing_maps = [affine_map<(b, h, i, d, j) -> (b, h, i, j)>, affine_map<(b, h, i, d, j) -> (b, h, j, d)>, affine_map<(b, h, i, d, j) -> (b, h, i, d)>], iterator_types = ["parallel", "parallel", "parallel", "parallel", "reduction"]}
      ins(%p2, %v : tensor<2x3x40x56xf32>, tensor<2x3x56x32xf32>) outs(%f2o : tensor<2x3x40x32xf32>) {
    ^bb0(%a: f32, %b: f32, %acc: f32):
      %m = arith.mulf %a, %b : f32
      %r = arith.addf %acc, %m : f32
      linalg.yield %r : f32
    } -> tensor<2x3x40x32xf32>
  return %o1, %o2 : tensor<2x3x40x32xf32>, tensor<2x3x40x32xf32>
}
