// Attention sinks (gpt-oss's per-head logit, f16, [B, H, N, D], H = 4): the
// sm_90a kernel starts each row's softmax state from its head's sink
// (m = log2(e) s_h, l = 1). bench/flex_module.py checks each launch on a GPU
// against torch's softmax over the scores and the sink.
func.func @sinks(%q: tensor<1x4x256x128xf16>, %k: tensor<1x4x256x128xf16>, %v: tensor<1x4x256x128xf16>, %s: tensor<4xf32>) -> (tensor<1x4x256x128xf16>, tensor<1x4x256x128xf16>) {
  %causal = fa.attention %q, %k, %v sinks(%s : tensor<4xf32>) {scale = 0.088388346 : f32, causal}
      : tensor<1x4x256x128xf16>, tensor<1x4x256x128xf16>, tensor<1x4x256x128xf16> -> tensor<1x4x256x128xf16>
  // With a sliding window of 128 keys (gpt-oss alternates the two).
  %window = fa.attention %q, %k, %v sinks(%s : tensor<4xf32>) {scale = 0.088388346 : f32, causal, window = 128}
      : tensor<1x4x256x128xf16>, tensor<1x4x256x128xf16>, tensor<1x4x256x128xf16> -> tensor<1x4x256x128xf16>
  return %causal, %window : tensor<1x4x256x128xf16>, tensor<1x4x256x128xf16>
}
