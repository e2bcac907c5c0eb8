// RUN: fa-opt %s --split-input-file --verify-diagnostics

func.func @heads(%q: memref<1x4x8x64xf32>, %k: memref<1x3x8x64xf32>, %l: memref<1x4x8xf32>) {
  // expected-error @+1 {{expected query heads (4) to be a multiple of key/value heads (3)}}
  fa.attention_backward %q, %k, %k, %q, %l, %q outs(%q, %k, %k : memref<1x4x8x64xf32>, memref<1x3x8x64xf32>, memref<1x3x8x64xf32>)
      : memref<1x4x8x64xf32>, memref<1x3x8x64xf32>, memref<1x3x8x64xf32>, memref<1x4x8x64xf32>, memref<1x4x8xf32>, memref<1x4x8x64xf32>
  return
}

// -----

func.func @grad_key_shape(%q: memref<1x4x8x64xf32>, %k: memref<1x2x8x64xf32>, %dk: memref<1x2x9x64xf32>, %l: memref<1x4x8xf32>) {
  // expected-error @+1 {{expected grad_key sequence length to be 8 (the key's), got 9}}
  fa.attention_backward %q, %k, %k, %q, %l, %q outs(%q, %dk, %k : memref<1x4x8x64xf32>, memref<1x2x9x64xf32>, memref<1x2x8x64xf32>)
      : memref<1x4x8x64xf32>, memref<1x2x8x64xf32>, memref<1x2x8x64xf32>, memref<1x4x8x64xf32>, memref<1x4x8xf32>, memref<1x4x8x64xf32>
  return
}

// -----

func.func @dtypes(%q: memref<1x4x8x64xf32>, %dO: memref<1x4x8x64xf16>, %l: memref<1x4x8xf32>) {
  // expected-error @+1 {{expected grad_out element type to be 'f32' (the query's), got 'f16'}}
  fa.attention_backward %q, %q, %q, %q, %l, %dO outs(%q, %q, %q : memref<1x4x8x64xf32>, memref<1x4x8x64xf32>, memref<1x4x8x64xf32>)
      : memref<1x4x8x64xf32>, memref<1x4x8x64xf32>, memref<1x4x8x64xf32>, memref<1x4x8x64xf32>, memref<1x4x8xf32>, memref<1x4x8x64xf16>
  return
}

// -----

func.func @lse_shape(%q: memref<1x4x8x64xf32>, %l: memref<1x4x9xf32>) {
  // expected-error @+1 {{expected lse sequence length to be 8 (the query's), got 9}}
  fa.attention_backward %q, %q, %q, %q, %l, %q outs(%q, %q, %q : memref<1x4x8x64xf32>, memref<1x4x8x64xf32>, memref<1x4x8x64xf32>)
      : memref<1x4x8x64xf32>, memref<1x4x8x64xf32>, memref<1x4x8x64xf32>, memref<1x4x8x64xf32>, memref<1x4x9xf32>, memref<1x4x8x64xf32>
  return
}

// -----

func.func @window(%q: memref<1x4x8x64xf32>, %l: memref<1x4x8xf32>) {
  // expected-error @+1 {{expected window to be at least 1, got 0}}
  fa.attention_backward %q, %q, %q, %q, %l, %q outs(%q, %q, %q : memref<1x4x8x64xf32>, memref<1x4x8x64xf32>, memref<1x4x8x64xf32>) {window = 0 : i64}
      : memref<1x4x8x64xf32>, memref<1x4x8x64xf32>, memref<1x4x8x64xf32>, memref<1x4x8x64xf32>, memref<1x4x8xf32>, memref<1x4x8x64xf32>
  return
}

// -----

func.func @bottom_right(%q: memref<1x4x8x64xf32>, %l: memref<1x4x8xf32>) {
  // expected-error @+1 {{bottom_right aligns the causal or window mask: give causal or a window}}
  fa.attention_backward %q, %q, %q, %q, %l, %q outs(%q, %q, %q : memref<1x4x8x64xf32>, memref<1x4x8x64xf32>, memref<1x4x8x64xf32>) {bottom_right}
      : memref<1x4x8x64xf32>, memref<1x4x8x64xf32>, memref<1x4x8x64xf32>, memref<1x4x8x64xf32>, memref<1x4x8xf32>, memref<1x4x8x64xf32>
  return
}

// -----

func.func @scores_without_softcap(%p: memref<32x64xf32>, %d: memref<?xf32>) {
  // expected-error @+1 {{expected the score tile exactly with softcap (its derivative reads the capped scores)}}
  fa.grad_scores %p, %d, %p -> %p : memref<32x64xf32>, memref<?xf32>, memref<32x64xf32> -> memref<32x64xf32>
  return
}

// -----

func.func @values_acc(%p: memref<32x64xf32>, %rows: memref<?x64xf16>, %acc: memref<32x64xf32>) {
  // expected-error @+1 {{expected acc rows to be 64 (the probs' B_c), got 32}}
  fa.grad_values %p, %rows -> %acc : memref<32x64xf32>, memref<?x64xf16> -> memref<32x64xf32>
  return
}

// -----

func.func @keys_rows(%p: memref<32x64xf32>, %rows: memref<48x64xf16>, %acc: memref<64x64xf32>) {
  // expected-error @+1 {{expected query to have at most 32 rows (the grad_scores' B_r), got 48}}
  fa.grad_keys %p, %rows -> %acc {scale = 0.125 : f32} : memref<32x64xf32>, memref<48x64xf16> -> memref<64x64xf32>
  return
}

// -----

func.func @queries_scale(%p: memref<32x64xf32>, %rows: memref<?x64xf16>, %acc: memref<?x64xf32>) {
  // expected-error @+1 {{scale}}
  fa.grad_queries %p, %rows -> %acc {scale = 0.0 : f32} : memref<32x64xf32>, memref<?x64xf16> -> memref<?x64xf32>
  return
}

// -----

func.func @varlen_pair(%q: memref<1x4x8x64xf32>, %l: memref<1x4x8xf32>, %cq: memref<3xi32>) {
  // expected-error @+1 {{expected both cu_seqlens_q and cu_seqlens_k}}
  "fa.attention_backward"(%q, %q, %q, %q, %l, %q, %q, %q, %q, %cq) <{operandSegmentSizes = array<i32: 1, 1, 1, 1, 1, 1, 1, 1, 1, 0, 0, 1, 0>}>
      : (memref<1x4x8x64xf32>, memref<1x4x8x64xf32>, memref<1x4x8x64xf32>, memref<1x4x8x64xf32>, memref<1x4x8xf32>, memref<1x4x8x64xf32>, memref<1x4x8x64xf32>, memref<1x4x8x64xf32>, memref<1x4x8x64xf32>, memref<3xi32>) -> ()
  return
}

// -----

func.func @varlen_batch(%q: memref<2x4x8x64xf32>, %l: memref<2x4x8xf32>, %cq: memref<3xi32>) {
  // expected-error @+1 {{expected query batch size to be 1 (packed varlen sequences), got 2}}
  fa.attention_backward %q, %q, %q, %q, %l, %q varlen(%cq, %cq : memref<3xi32>, memref<3xi32>)
      outs(%q, %q, %q : memref<2x4x8x64xf32>, memref<2x4x8x64xf32>, memref<2x4x8x64xf32>)
      : memref<2x4x8x64xf32>, memref<2x4x8x64xf32>, memref<2x4x8x64xf32>, memref<2x4x8x64xf32>, memref<2x4x8xf32>, memref<2x4x8x64xf32>
  return
}
