// Boolean masks from the function's arguments, as a front end lowers
// torch's `attention_mask > 0` and `scores.masked_fill(mask, -inf)` (f32,
// [B, H, N, D]):
//  * first attention: a key mask [B, 1, 1, Nk] (keys kept where
//    key_mask > -2), select(keep, x, -inf), beside a causal mask on
//    linalg.index;
//  * second attention: masked_fill of the positions where hide_src < -1.5
//    ([B, H, Nq, Nk], hidden where true) and a full bias.
// fa-raise-attention raises both: the boolean tensors into mask_mod regions,
// the causal mask into `causal`, the bias into score_mod.
func.func @masked(%q: tensor<2x3x40x32xf32>, %k: tensor<2x3x56x32xf32>, %v: tensor<2x3x56x32xf32>, %key_mask: tensor<2x1x1x56xf32>, %hide_src: tensor<2x3x40x56xf32>, %bias: tensor<2x3x40x56xf32>) -> (tensor<2x3x40x32xf32>, tensor<2x3x40x32xf32>) {
  %zero = arith.constant 0.000000e+00 : f32
  %ninf = arith.constant 0xFF800000 : f32
  %eb = tensor.empty() : tensor<2x1x1x56xi1>
  %keep = linalg.generic {indexing_maps = [affine_map<(b, h, i, j) -> (b, h, i, j)>, affine_map<(b, h, i, j) -> (b, h, i, j)>], iterator_types = ["parallel", "parallel", "parallel", "parallel"]}
      ins(%key_mask : tensor<2x1x1x56xf32>) outs(%eb : tensor<2x1x1x56xi1>) {
    ^bb0(%x: f32, %o: i1):
      %t = arith.constant -2.0 : f32
      %c = arith.cmpf ogt, %x, %t : f32
      linalg.yield %c : i1
    } -> tensor<2x1x1x56xi1>
  %eh = tensor.empty() : tensor<2x3x40x56xi1>
  %hide = linalg.generic {indexing_maps = [affine_map<(b, h, i, j) -> (b, h, i, j)>, affine_map<(b, h, i, j) -> (b, h, i, j)>], iterator_types = ["parallel", "parallel", "parallel", "parallel"]}
      ins(%hide_src : tensor<2x3x40x56xf32>) outs(%eh : tensor<2x3x40x56xi1>) {
    ^bb0(%x: f32, %o: i1):
      %t = arith.constant -1.5 : f32
      %c = arith.cmpf olt, %x, %t : f32
      linalg.yield %c : i1
    } -> tensor<2x3x40x56xi1>
  %e1a = tensor.empty() : tensor<2x3x40x56xf32>
  %f1a = linalg.fill ins(%zero : f32) outs(%e1a : tensor<2x3x40x56xf32>) -> tensor<2x3x40x56xf32>
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
  %e1m = tensor.empty() : tensor<2x3x40x56xf32>
  %km1 = linalg.generic {indexing_maps = [affine_map<(b, h, i, j) -> (b, h, i, j)>, affine_map<(b, h, i, j) -> (b, 0, 0, j)>, affine_map<(b, h, i, j) -> (b, h, i, j)>], iterator_types = ["parallel", "parallel", "parallel", "parallel"]}
      ins(%sc1, %keep : tensor<2x3x40x56xf32>, tensor<2x1x1x56xi1>) outs(%e1m : tensor<2x3x40x56xf32>) {
    ^bb0(%x: f32, %m: i1, %o: f32):
      %y = arith.select %m, %x, %ninf : f32
      linalg.yield %y : f32
    } -> tensor<2x3x40x56xf32>
  %e1c = tensor.empty() : tensor<2x3x40x56xf32>
  %cm1 = linalg.generic {indexing_maps = [affine_map<(b, h, i, j) -> (b, h, i, j)>, affine_map<(b, h, i, j) -> (b, h, i, j)>], iterator_types = ["parallel", "parallel", "parallel", "parallel"]}
      ins(%km1 : tensor<2x3x40x56xf32>) outs(%e1c : tensor<2x3x40x56xf32>) {
    ^bb0(%x: f32, %o: f32):
      %i = linalg.index 2 : index
      %j = linalg.index 3 : index
      %hidden = arith.cmpi ugt, %j, %i : index
      %y = arith.select %hidden, %ninf, %x : f32
      linalg.yield %y : f32
    } -> tensor<2x3x40x56xf32>
  %e1p = tensor.empty() : tensor<2x3x40x56xf32>
  %p1 = linalg.softmax dimension(3) ins(%cm1 : tensor<2x3x40x56xf32>) outs(%e1p : tensor<2x3x40x56xf32>) -> tensor<2x3x40x56xf32>
  %e1o = tensor.empty() : tensor<2x3x40x32xf32>
  %f1o = linalg.fill ins(%zero : f32) outs(%e1o : tensor<2x3x40x32xf32>) -> tensor<2x3x40x32xf32>
  %o1 = linalg.generic {indexing_maps = [affine_map<(b, h, i, d, j) -> (b, h, i, j)>, affine_map<(b, h, i, d, j) -> (b, h, j, d)>, affine_map<(b, h, i, d, j) -> (b, h, i, d)>], iterator_types = ["parallel", "parallel", "parallel", "parallel", "reduction"]}
      ins(%p1, %v : tensor<2x3x40x56xf32>, tensor<2x3x56x32xf32>) outs(%f1o : tensor<2x3x40x32xf32>) {
    ^bb0(%a: f32, %b: f32, %acc: f32):
      %m = arith.mulf %a, %b : f32
      %r = arith.addf %acc, %m : f32
      linalg.yield %r : f32
    } -> tensor<2x3x40x32xf32>
  %e2a = tensor.empty() : tensor<2x3x40x56xf32>
  %f2a = linalg.fill ins(%zero : f32) outs(%e2a : tensor<2x3x40x56xf32>) -> tensor<2x3x40x56xf32>
  %qk2 = linalg.generic {indexing_maps = [affine_map<(b, h, i, j, d) -> (b, h, i, d)>, affine_map<(b, h, i, j, d) -> (b, h, j, d)>, affine_map<(b, h, i, j, d) -> (b, h, i, j)>], iterator_types = ["parallel", "parallel", "parallel", "parallel", "reduction"]}
      ins(%q, %k : tensor<2x3x40x32xf32>, tensor<2x3x56x32xf32>) outs(%f2a : tensor<2x3x40x56xf32>) {
    ^bb0(%a: f32, %b: f32, %acc: f32):
      %m = arith.mulf %a, %b : f32
      %r = arith.addf %acc, %m : f32
      linalg.yield %r : f32
    } -> tensor<2x3x40x56xf32>
  %e2s = tensor.empty() : tensor<2x3x40x56xf32>
  %sc2 = linalg.generic {indexing_maps = [affine_map<(b, h, i, j) -> (b, h, i, j)>, affine_map<(b, h, i, j) -> (b, h, i, j)>], iterator_types = ["parallel", "parallel", "parallel", "parallel"]}
      ins(%qk2 : tensor<2x3x40x56xf32>) outs(%e2s : tensor<2x3x40x56xf32>) {
    ^bb0(%x: f32, %o: f32):
      %c = arith.constant 0.176776695 : f32
      %y = arith.mulf %x, %c : f32
      linalg.yield %y : f32
    } -> tensor<2x3x40x56xf32>
  %e2m = tensor.empty() : tensor<2x3x40x56xf32>
  %mf2 = linalg.generic {indexing_maps = [affine_map<(b, h, i, j) -> (b, h, i, j)>, affine_map<(b, h, i, j) -> (b, h, i, j)>, affine_map<(b, h, i, j) -> (b, h, i, j)>], iterator_types = ["parallel", "parallel", "parallel", "parallel"]}
      ins(%hide, %sc2 : tensor<2x3x40x56xi1>, tensor<2x3x40x56xf32>) outs(%e2m : tensor<2x3x40x56xf32>) {
    ^bb0(%m: i1, %x: f32, %o: f32):
      %y = arith.select %m, %ninf, %x : f32
      linalg.yield %y : f32
    } -> tensor<2x3x40x56xf32>
  %e2b = tensor.empty() : tensor<2x3x40x56xf32>
  %bi2 = linalg.generic {indexing_maps = [affine_map<(b, h, i, j) -> (b, h, i, j)>, affine_map<(b, h, i, j) -> (b, h, i, j)>, affine_map<(b, h, i, j) -> (b, h, i, j)>], iterator_types = ["parallel", "parallel", "parallel", "parallel"]}
      ins(%mf2, %bias : tensor<2x3x40x56xf32>, tensor<2x3x40x56xf32>) outs(%e2b : tensor<2x3x40x56xf32>) {
    ^bb0(%x: f32, %bb: f32, %o: f32):
      %y = arith.addf %x, %bb : f32
      linalg.yield %y : f32
    } -> tensor<2x3x40x56xf32>
  %e2p = tensor.empty() : tensor<2x3x40x56xf32>
  %p2 = linalg.softmax dimension(3) ins(%bi2 : tensor<2x3x40x56xf32>) outs(%e2p : tensor<2x3x40x56xf32>) -> tensor<2x3x40x56xf32>
  %e2o = tensor.empty() : tensor<2x3x40x32xf32>
  %f2o = linalg.fill ins(%zero : f32) outs(%e2o : tensor<2x3x40x32xf32>) -> tensor<2x3x40x32xf32>
  %o2 = linalg.generic {indexing_maps = [affine_map<(b, h, i, d, j) -> (b, h, i, j)>, affine_map<(b, h, i, d, j) -> (b, h, j, d)>, affine_map<(b, h, i, d, j) -> (b, h, i, d)>], iterator_types = ["parallel", "parallel", "parallel", "parallel", "reduction"]}
      ins(%p2, %v : tensor<2x3x40x56xf32>, tensor<2x3x56x32xf32>) outs(%f2o : tensor<2x3x40x32xf32>) {
    ^bb0(%a: f32, %b: f32, %acc: f32):
      %m = arith.mulf %a, %b : f32
      %r = arith.addf %acc, %m : f32
      linalg.yield %r : f32
    } -> tensor<2x3x40x32xf32>
  return %o1, %o2 : tensor<2x3x40x32xf32>, tensor<2x3x40x32xf32>
}
