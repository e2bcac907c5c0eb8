// RUN: fa-opt %s --split-input-file --verify-diagnostics

// Attention sinks: one f32 logit per query head, of the inputs' kind; the
// backward takes them with their gradient.

func.func @size(%q: memref<1x8x4x64xf16>, %k: memref<1x2x4x64xf16>, %s: memref<2xf32>, %o: memref<1x8x4x64xf16>) {
  // expected-error @+1 {{expected sinks size to be 8 (the query heads'), got 2}}
  fa.attention %q, %k, %k sinks(%s : memref<2xf32>) outs(%o : memref<1x8x4x64xf16>)
      : memref<1x8x4x64xf16>, memref<1x2x4x64xf16>, memref<1x2x4x64xf16>
  return
}

// -----

func.func @kind(%q: tensor<1x8x4x64xf16>, %s: memref<8xf32>) -> tensor<1x8x4x64xf16> {
  // expected-error @+1 {{expected sinks to be a tensor like the inputs, got 'memref<8xf32>'}}
  %o = fa.attention %q, %q, %q sinks(%s : memref<8xf32>)
      : tensor<1x8x4x64xf16>, tensor<1x8x4x64xf16>, tensor<1x8x4x64xf16> -> tensor<1x8x4x64xf16>
  return %o : tensor<1x8x4x64xf16>
}

// -----

func.func @element_type(%q: memref<1x8x4x64xf16>, %s: memref<8xf16>, %o: memref<1x8x4x64xf16>) {
  // expected-error @+1 {{operand #4 must be 1D tensor of 32-bit float values or 1D memref of 32-bit float values}}
  fa.attention %q, %q, %q sinks(%s : memref<8xf16>) outs(%o : memref<1x8x4x64xf16>)
      : memref<1x8x4x64xf16>, memref<1x8x4x64xf16>, memref<1x8x4x64xf16>
  return
}

// -----

func.func @backward_gradient(%q: memref<1x4x8x64xf32>, %l: memref<1x4x8xf32>, %s: memref<4xf32>) {
  // expected-error @+1 {{expected sinks and their gradient together (the forward's sinks(...) and a fourth output dsinks)}}
  fa.attention_backward %q, %q, %q, %q, %l, %q sinks(%s : memref<4xf32>)
      outs(%q, %q, %q : memref<1x4x8x64xf32>, memref<1x4x8x64xf32>, memref<1x4x8x64xf32>)
      : memref<1x4x8x64xf32>, memref<1x4x8x64xf32>, memref<1x4x8x64xf32>, memref<1x4x8x64xf32>, memref<1x4x8xf32>, memref<1x4x8x64xf32>
  return
}

// -----

func.func @backward_size(%q: memref<1x4x8x64xf32>, %l: memref<1x4x8xf32>, %s: memref<4xf32>, %ds: memref<3xf32>) {
  // expected-error @+1 {{expected grad_sinks size to be 4 (the query heads'), got 3}}
  fa.attention_backward %q, %q, %q, %q, %l, %q sinks(%s : memref<4xf32>)
      outs(%q, %q, %q, %ds : memref<1x4x8x64xf32>, memref<1x4x8x64xf32>, memref<1x4x8x64xf32>, memref<3xf32>)
      : memref<1x4x8x64xf32>, memref<1x4x8x64xf32>, memref<1x4x8x64xf32>, memref<1x4x8x64xf32>, memref<1x4x8xf32>, memref<1x4x8x64xf32>
  return
}

// -----

func.func @grad_sink_rows(%s: f32, %l: memref<8xf32>, %d: memref<4xf32>) -> f32 {
  // expected-error @+1 {{expected dot length to be 8 (the lse's), got 4}}
  %part = fa.grad_sink %s, %l, %d : memref<8xf32>, memref<4xf32>
  return %part : f32
}
