// An ALiBi score_mod (f16) that reads its slopes from a captured tensor:
// no built-in spells it, and the GPU kernels take no captures yet.
func.func @alibi(%q: tensor<1x4x256x128xf16>, %slopes: tensor<4xf32>) -> tensor<1x4x256x128xf16> {
  %o = fa.attention %q, %q, %q captures(%slopes : tensor<4xf32>) {causal}
      : tensor<1x4x256x128xf16>, tensor<1x4x256x128xf16>, tensor<1x4x256x128xf16> -> tensor<1x4x256x128xf16>
    score_mod {
    ^bb0(%s: f32, %b: index, %h: index, %i: index, %j: index, %m: tensor<4xf32>):
      %slope = tensor.extract %m[%h] : tensor<4xf32>
      %d = arith.subi %j, %i : index
      %di = arith.index_cast %d : index to i64
      %df = arith.sitofp %di : i64 to f32
      %r = math.fma %slope, %df, %s : f32
      fa.yield %r : f32
    }
  return %o : tensor<1x4x256x128xf16>
}
