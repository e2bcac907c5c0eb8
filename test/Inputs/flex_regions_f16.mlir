// Attention as a FlexAttention-style front end writes it (f16, [B, H, N, D]):
// the causal mask and a softcap as regions, then FlexAttention's sliding
// window (`q_idx >= kv_idx & q_idx - kv_idx <= 63`). fa-fold-modifications
// turns them into the built-ins (causal, softcap = 30; causal, window = 64),
// so the module compiles for the GPU.
func.func @flex(%q: tensor<1x4x256x128xf16>, %k: tensor<1x4x256x128xf16>, %v: tensor<1x4x256x128xf16>) -> (tensor<1x4x256x128xf16>, tensor<1x4x256x128xf16>) {
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
  %w = fa.attention %q, %k, %v {scale = 0.088388346 : f32}
      : tensor<1x4x256x128xf16>, tensor<1x4x256x128xf16>, tensor<1x4x256x128xf16> -> tensor<1x4x256x128xf16>
    mask_mod {
    ^bb0(%b: index, %h: index, %i: index, %j: index):
      %causal = arith.cmpi sge, %i, %j : index
      %d = arith.subi %i, %j : index
      %w63 = arith.constant 63 : index
      %near = arith.cmpi sle, %d, %w63 : index
      %visible = arith.andi %causal, %near : i1
      fa.yield %visible : i1
    }
  return %o, %w : tensor<1x4x256x128xf16>, tensor<1x4x256x128xf16>
}
