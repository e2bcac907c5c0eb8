// A Gemma-2 style attention as a front end lowers it to linalg: the scaled
// scores capped by c * tanh(s / c) (its attn_logit_softcapping, 50 there; 2 here so
// that the cap bends scores of unit size), then a
// causal mask added (0 / -inf), a softmax and P V. f32, [B*H, N, D].
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
