// A score_mod reading per-head slopes with fewer slopes (2) than query heads
// (4): heads 2 and 3 read past the capture.
func.func @short_slopes(%q: tensor<1x4x16x32xf32>, %slopes: tensor<2xf32>) -> tensor<1x4x16x32xf32> {
  %o = fa.attention %q, %q, %q captures(%slopes : tensor<2xf32>)
      : tensor<1x4x16x32xf32>, tensor<1x4x16x32xf32>, tensor<1x4x16x32xf32> -> tensor<1x4x16x32xf32>
    score_mod {
    ^bb0(%s: f32, %b: index, %h: index, %i: index, %j: index, %m: tensor<2xf32>):
      %slope = tensor.extract %m[%h] : tensor<2xf32>
      %r = arith.addf %s, %slope : f32
      fa.yield %r : f32
    }
  return %o : tensor<1x4x16x32xf32>
}
