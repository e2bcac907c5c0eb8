// A tensor-form e4m3 attention with [B, Hkv] descales and an f16 output (fp8.test).
func.func @attention_e4m3_tensor(%q: tensor<2x4x128x64xf8E4M3FN>, %k: tensor<2x2x128x64xf8E4M3FN>, %v: tensor<2x2x128x64xf8E4M3FN>, %d: tensor<2x2xf32>) -> (tensor<2x4x128x64xf16>, tensor<2x4x128xf32>) {
  %o, %lse = fa.attention %q, %k, %v descale(%d, %d, %d : tensor<2x2xf32>, tensor<2x2xf32>, tensor<2x2xf32>) : tensor<2x4x128x64xf8E4M3FN>, tensor<2x2x128x64xf8E4M3FN>, tensor<2x2x128x64xf8E4M3FN> -> tensor<2x4x128x64xf16>, tensor<2x4x128xf32>
  return %o, %lse : tensor<2x4x128x64xf16>, tensor<2x4x128xf32>
}
