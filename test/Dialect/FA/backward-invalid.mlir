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
  "fa.attention_backward"(%q, %q, %q, %q, %l, %q, %q, %q, %q, %cq) <{operandSegmentSizes = array<i32: 1, 1, 1, 1, 1, 1, 1, 1, 1, 0, 0, 1, 0, 0>}> ({}, {})
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

// -----

// A score_mod the chain rule cannot go through: math.erf has no derivative
// rule (the error is at the op, in the user's region).
func.func @undifferentiable(%q: memref<1x4x8x64xf32>, %l: memref<1x4x8xf32>) {
  fa.attention_backward %q, %q, %q, %q, %l, %q outs(%q, %q, %q : memref<1x4x8x64xf32>, memref<1x4x8x64xf32>, memref<1x4x8x64xf32>)
      : memref<1x4x8x64xf32>, memref<1x4x8x64xf32>, memref<1x4x8x64xf32>, memref<1x4x8x64xf32>, memref<1x4x8xf32>, memref<1x4x8x64xf32>
    score_mod {
    ^bb0(%s: f32, %b: index, %h: index, %i: index, %j: index):
      // expected-error @+1 {{'math.erf' op in score_mod has no derivative rule, so the backward cannot take the chain rule through it (rules: arith.addf}}
      %e = math.erf %s : f32
      fa.yield %e : f32
    }
  return
}

// -----

func.func @captures_without_regions(%q: memref<1x4x8x64xf32>, %l: memref<1x4x8xf32>, %c: memref<4xf32>) {
  // expected-error @+1 {{expected captures only with a score_mod or mask_mod region that reads them}}
  fa.attention_backward %q, %q, %q, %q, %l, %q captures(%c : memref<4xf32>) outs(%q, %q, %q : memref<1x4x8x64xf32>, memref<1x4x8x64xf32>, memref<1x4x8x64xf32>)
      : memref<1x4x8x64xf32>, memref<1x4x8x64xf32>, memref<1x4x8x64xf32>, memref<1x4x8x64xf32>, memref<1x4x8xf32>, memref<1x4x8x64xf32>
  return
}

// -----

func.func @region_arguments(%q: memref<1x4x8x64xf32>, %l: memref<1x4x8xf32>, %c: memref<4xf32>) {
  // expected-error @+1 {{expected score_mod's block arguments to be (f32, index, index, index, index, tensor<4xf32>)}}
  fa.attention_backward %q, %q, %q, %q, %l, %q captures(%c : memref<4xf32>) outs(%q, %q, %q : memref<1x4x8x64xf32>, memref<1x4x8x64xf32>, memref<1x4x8x64xf32>)
      : memref<1x4x8x64xf32>, memref<1x4x8x64xf32>, memref<1x4x8x64xf32>, memref<1x4x8x64xf32>, memref<1x4x8xf32>, memref<1x4x8x64xf32>
    score_mod {
    ^bb0(%s: f32, %b: index, %h: index, %i: index, %j: index):
      fa.yield %s : f32
    }
  return
}

// -----

func.func @chain_coordinates(%x: memref<32x64xf32>, %i: index) {
  // expected-error @+1 {{expected coordinates(batch, head, first query row, first key), got 2 values}}
  fa.chain_score_mod %x -> %x coordinates(%i, %i) : memref<32x64xf32> -> memref<32x64xf32>
    score_mod {
    ^bb0(%a: f32, %b: index, %h: index, %q: index, %k: index):
      fa.yield %a : f32
    }
  return
}

// -----

func.func @chain_undifferentiable(%x: memref<32x64xf32>, %i: index) {
  fa.chain_score_mod %x -> %x coordinates(%i, %i, %i, %i) : memref<32x64xf32> -> memref<32x64xf32>
    score_mod {
    ^bb0(%a: f32, %b: index, %h: index, %q: index, %k: index):
      // expected-error @+1 {{'math.powf' op in score_mod has no derivative rule}}
      %p = math.powf %a, %a : f32
      fa.yield %p : f32
    }
  return
}

// -----

func.func @unmodified_without_score_mod(%rows: memref<?x64xf16>, %s: memref<32x64xf32>, %i: index) {
  // expected-error @+1 {{expected unmodified only with a score_mod (without one it equals the scores)}}
  fa.score_tile %rows, %rows -> %s, unmodified %s at [%i, %i] {scale = 0.125 : f32}
      : memref<?x64xf16>, memref<?x64xf16> -> memref<32x64xf32>, memref<32x64xf32>
  return
}
