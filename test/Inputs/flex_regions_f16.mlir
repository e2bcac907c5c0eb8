// Attention as a FlexAttention-style front end writes it: the causal mask
// and a softcap as regions (f16, [B, H, N, D]). fa-fold-modifications turns
// both into the built-ins, so the module compiles for the GPU.
func.func @flex(%q: tensor<1x4x256x128xf16>, %k: tensor<1x4x256x128xf16>, %v: tensor<1x4x256x128xf16>) -> tensor<1x4x256x128xf16> {
  %o = fa.attention %q, %k, %v {scale = 0.088388346 : f32}
      : tensor<1x4x256x128xf16>, tensor<1x4x256x128xf16>, tensor<1x4x256x128xf16> -> tensor<1x4x256x128xf16>
    score_mod {
    ^bb0(%s: f32, %b: index, %h: index, %i: index, %j: index):
      %c = arith.constant 30.0 : f32
      %a = arith.divf %s, %c : f32
      %t = math.tanh %a : f32
      %r = arith.mulf %t, %c : f32
      fa.yield %r : f32
    } mask_mod {
    ^bb0(%b: index, %h: index, %i: index, %j: index):
      %visible = arith.cmpi sge, %i, %j : index
      fa.yield %visible : i1
    }
  return %o : tensor<1x4x256x128xf16>
}
