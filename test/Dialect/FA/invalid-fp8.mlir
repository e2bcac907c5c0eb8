// RUN: fa-opt %s --split-input-file --verify-diagnostics

// The verifier messages of the fp8 (e4m3) parts of the fa dialect, one case
// each: element types, descale operands and layouts, fa.quantize,
// fa.hadamard, and the tile ops' descale and probs_scale.

func.func @f(%q: memref<1x2x64x32xf8E4M3FN>, %k: memref<1x2x64x32xf8E4M3FN>, %v: memref<1x2x64x32xf8E4M3FN>, %o: memref<1x2x64x32xf8E4M3FN>, %d: memref<f32>) {
  // The operand constraint refuses an e4m3 O (Validation.h's checkElementTypes
  // says why to the tools).
  // expected-error @+1 {{operand #3 must be variadic of memref of 16-bit float or bfloat16 type or 32-bit float values, but got 'memref<1x2x64x32xf8E4M3FN>'}}
  fa.attention %q, %k, %v descale(%d, %d, %d : memref<f32>, memref<f32>, memref<f32>) outs(%o : memref<1x2x64x32xf8E4M3FN>) : memref<1x2x64x32xf8E4M3FN>, memref<1x2x64x32xf8E4M3FN>, memref<1x2x64x32xf8E4M3FN>
  return
}

// -----

func.func @f(%q: memref<1x2x64x32xf8E4M3FN>, %k: memref<1x2x64x32xf8E4M3FN>, %v: memref<1x2x64x32xf8E4M3FN>, %o: memref<1x2x64x32xf16>) {
  // expected-error @+1 {{expected three descale factors (q_descale, k_descale, v_descale) with e4m3 inputs, got 0}}
  fa.attention %q, %k, %v outs(%o : memref<1x2x64x32xf16>) : memref<1x2x64x32xf8E4M3FN>, memref<1x2x64x32xf8E4M3FN>, memref<1x2x64x32xf8E4M3FN>
  return
}

// -----

func.func @f(%q: memref<1x2x64x32xf16>, %k: memref<1x2x64x32xf16>, %v: memref<1x2x64x32xf16>, %o: memref<1x2x64x32xf16>, %d: memref<f32>) {
  // expected-error @+1 {{expected no descale factors without e4m3 inputs, got 3}}
  fa.attention %q, %k, %v descale(%d, %d, %d : memref<f32>, memref<f32>, memref<f32>) outs(%o : memref<1x2x64x32xf16>) : memref<1x2x64x32xf16>, memref<1x2x64x32xf16>, memref<1x2x64x32xf16>
  return
}

// -----

func.func @f(%q: memref<1x2x64x32xf8E4M3FN>, %k: memref<1x2x64x32xf8E4M3FN>, %v: memref<1x2x64x32xf8E4M3FN>, %o: memref<1x2x64x32xf16>, %d: memref<f32>, %t: tensor<f32>) {
  // expected-error @+1 {{expected k_descale to be a memref like the inputs, got 'tensor<f32>'}}
  fa.attention %q, %k, %v descale(%d, %t, %d : memref<f32>, tensor<f32>, memref<f32>) outs(%o : memref<1x2x64x32xf16>) : memref<1x2x64x32xf8E4M3FN>, memref<1x2x64x32xf8E4M3FN>, memref<1x2x64x32xf8E4M3FN>
  return
}

// -----

// [B, Hkv] descales: one per batch and K/V head (FlashAttention-3's API).
func.func @f(%q: memref<2x4x64x32xf8E4M3FN>, %k: memref<2x2x64x32xf8E4M3FN>, %v: memref<2x2x64x32xf8E4M3FN>, %o: memref<2x4x64x32xf32>, %d: memref<2x2xf32>, %bad: memref<2x4xf32>) {
  // expected-error @+1 {{expected q_descale head count to be 2 (the K/V heads'), got 4}}
  fa.attention %q, %k, %v descale(%bad, %d, %d : memref<2x4xf32>, memref<2x2xf32>, memref<2x2xf32>) outs(%o : memref<2x4x64x32xf32>) : memref<2x4x64x32xf8E4M3FN>, memref<2x2x64x32xf8E4M3FN>, memref<2x2x64x32xf8E4M3FN>
  return
}

// -----

func.func @f(%q: memref<1x2x64x32xf8E4M3FN>, %k: memref<1x2x64x32xf8E4M3FN>, %v: memref<1x2x64x32xf8E4M3FN>, %o: memref<1x2x64x32xf32>, %d: memref<f32>, %b: memref<1x2x4xf32>) {
  // expected-error @+1 {{expected q_descale of rank 3 (per block) to come with the tile sizes block_r and block_c (blocks are tiles: run fa-tile first)}}
  fa.attention %q, %k, %v descale(%b, %d, %d : memref<1x2x4xf32>, memref<f32>, memref<f32>) outs(%o : memref<1x2x64x32xf32>) : memref<1x2x64x32xf8E4M3FN>, memref<1x2x64x32xf8E4M3FN>, memref<1x2x64x32xf8E4M3FN>
  return
}

// -----

func.func @f(%q: memref<1x2x64x32xf8E4M3FN>, %k: memref<1x2x64x32xf8E4M3FN>, %v: memref<1x2x64x32xf8E4M3FN>, %o: memref<1x2x64x32xf32>, %d: memref<f32>, %b: memref<1x2x4xf32>) {
  // expected-error @+1 {{expected k_descale block count to be 2 (ceil(N / tile)), got 4}}
  fa.attention %q, %k, %v descale(%d, %b, %d : memref<f32>, memref<1x2x4xf32>, memref<f32>) outs(%o : memref<1x2x64x32xf32>) {block_r = 16 : i64, block_c = 32 : i64} : memref<1x2x64x32xf8E4M3FN>, memref<1x2x64x32xf8E4M3FN>, memref<1x2x64x32xf8E4M3FN>
  return
}

// -----

func.func @f(%q: memref<1x2x64x32xf8E4M3FN>, %k: memref<1x2x64x32xf8E4M3FN>, %v: memref<1x2x64x32xf8E4M3FN>, %o: memref<1x2x64x32xf32>, %d: memref<f32>, %b: memref<1x2x2xf32>) {
  // expected-error @+1 {{expected v_descale of rank 0 or 2 (per tensor, per batch and K/V head), got rank 3: V is not block-quantised}}
  fa.attention %q, %k, %v descale(%d, %d, %b : memref<f32>, memref<f32>, memref<1x2x2xf32>) outs(%o : memref<1x2x64x32xf32>) {block_r = 32 : i64, block_c = 32 : i64} : memref<1x2x64x32xf8E4M3FN>, memref<1x2x64x32xf8E4M3FN>, memref<1x2x64x32xf8E4M3FN>
  return
}

// -----

func.func @f(%q: memref<1x2x64x32xf8E4M3FN>, %k: memref<1x2x64x32xf8E4M3FN>, %v: memref<1x2x64x32xf8E4M3FN>, %o: memref<1x2x64x32xf32>, %d: memref<f32>, %b: memref<2xf32>) {
  // expected-error @+1 {{expected v_descale of rank 0 (per tensor), 2 ([B, Hkv]) or 3 ([B, H, ceil(N / tile)]), got rank 1}}
  fa.attention %q, %k, %v descale(%d, %d, %b : memref<f32>, memref<f32>, memref<2xf32>) outs(%o : memref<1x2x64x32xf32>) : memref<1x2x64x32xf8E4M3FN>, memref<1x2x64x32xf8E4M3FN>, memref<1x2x64x32xf8E4M3FN>
  return
}

// -----

func.func @f(%x: memref<1x2x64x32xf32>, %y: memref<1x2x64x32xf8E4M3FN>, %d: memref<1x2x2xf32>) {
  // expected-error @+1 {{expected a rank-0 descale without block (one per tensor), got 'memref<1x2x2xf32>'}}
  fa.quantize %x -> %y, %d : memref<1x2x64x32xf32> -> memref<1x2x64x32xf8E4M3FN>, memref<1x2x2xf32>
  return
}

// -----

func.func @f(%x: memref<1x2x64x32xf32>, %y: memref<1x2x64x32xf8E4M3FN>, %d: memref<1x2x2xf32>) {
  // expected-error @+1 {{expected descale block count to be 3 (ceil(N / block)), got 2}}
  fa.quantize %x -> %y, %d {block = 24 : i64} : memref<1x2x64x32xf32> -> memref<1x2x64x32xf8E4M3FN>, memref<1x2x2xf32>
  return
}

// -----

func.func @f(%x: memref<1x2x64x32xf32>, %y: memref<1x2x64x16xf8E4M3FN>, %d: memref<f32>) {
  // expected-error @+1 {{expected output dim 3 to be 32 (the input's), got 16}}
  fa.quantize %x -> %y, %d : memref<1x2x64x32xf32> -> memref<1x2x64x16xf8E4M3FN>, memref<f32>
  return
}

// -----

func.func @f(%x: memref<1x1x8x6xf32>, %y: memref<1x1x8x6xf32>) {
  // expected-error @+1 {{expected the head dim D to be a power of two for the Hadamard transform, got 6 (Sylvester's H_D exists for powers of two)}}
  fa.hadamard %x -> %y {signs = array<i1: false, true, false, true, false, true>} : memref<1x1x8x6xf32> -> memref<1x1x8x6xf32>
  return
}

// -----

func.func @f(%x: memref<1x1x8x4xf32>, %y: memref<1x1x8x4xf32>) {
  // expected-error @+1 {{expected 4 signs (one per column), got 2}}
  fa.hadamard %x -> %y {signs = array<i1: false, true>} : memref<1x1x8x4xf32> -> memref<1x1x8x4xf32>
  return
}

// -----

func.func @f(%q: memref<16x32xf16>, %k: memref<16x32xf16>, %s: memref<16x16xf32>, %i: index, %d: f32) {
  // expected-error @+1 {{expected descale only with e4m3 keys, got 'f16'}}
  fa.score_tile %q, %k -> %s at [%i, %i] descale %d {scale = 1.0 : f32} : memref<16x32xf16>, memref<16x32xf16> -> memref<16x16xf32>
  return
}

// -----

func.func @f(%p: memref<16x16xf32>, %v: memref<16x32xf16>, %o: memref<16x32xf32>) {
  // expected-error @+1 {{expected descale and probs_scale only with e4m3 values, got 'f16'}}
  fa.pv_accumulate %p, %v -> %o {probs_scale = 256.0 : f32} : memref<16x16xf32>, memref<16x32xf16> -> memref<16x32xf32>
  return
}

// -----

func.func @f(%p: memref<16x16xf32>, %v: memref<16x32xf8E4M3FN>, %o: memref<16x32xf32>) {
  // expected-error @+1 {{expected probs scale to be a power of two in [1, 256], got 100 (P is scaled before its e4m3 cast and unscaled after: a power of two keeps both exact)}}
  fa.pv_accumulate %p, %v -> %o {probs_scale = 100.0 : f32} : memref<16x16xf32>, memref<16x32xf8E4M3FN> -> memref<16x32xf32>
  return
}

// -----

// An e4m3 K/V (FP8 KV cache) beside a 16-bit Q: K's and V's descales, no Q's.
func.func @f(%q: memref<1x4x1x32xf16>, %k: memref<1x2x64x32xf8E4M3FN>, %v: memref<1x2x64x32xf8E4M3FN>, %o: memref<1x4x1x32xf16>, %d: memref<f32>) {
  // expected-error @+1 {{expected two descale factors (k_descale, v_descale) with an e4m3 K/V, got 3}}
  fa.attention %q, %k, %v descale(%d, %d, %d : memref<f32>, memref<f32>, memref<f32>) outs(%o : memref<1x4x1x32xf16>) : memref<1x4x1x32xf16>, memref<1x2x64x32xf8E4M3FN>, memref<1x2x64x32xf8E4M3FN>
  return
}

// -----

func.func @f(%q: memref<1x4x1x32xf16>, %k: memref<1x2x64x32xf8E4M3FN>, %v: memref<1x2x64x32xf16>, %o: memref<1x4x1x32xf16>, %d: memref<f32>) {
  // expected-error @+1 {{expected value element type to be 'f8E4M3FN' (the key's), got 'f16'}}
  fa.attention %q, %k, %v descale(%d, %d : memref<f32>, memref<f32>) outs(%o : memref<1x4x1x32xf16>) : memref<1x4x1x32xf16>, memref<1x2x64x32xf8E4M3FN>, memref<1x2x64x32xf16>
  return
}

// -----

func.func @f(%q: memref<1x4x1x32xf16>, %k: memref<1x2x64x32xf16>, %v: memref<1x2x64x32xf8E4M3FN>, %o: memref<1x4x1x32xf16>, %d: memref<f32>) {
  // expected-error @+1 {{expected value element type to be 'f16' (the query's), got 'f8E4M3FN'}}
  fa.attention %q, %k, %v outs(%o : memref<1x4x1x32xf16>) : memref<1x4x1x32xf16>, memref<1x2x64x32xf16>, memref<1x2x64x32xf8E4M3FN>
  return
}

// -----

func.func @f(%q: memref<1x4x1x32xf16>, %k: memref<1x2x64x32xf8E4M3FN>, %v: memref<1x2x64x32xf8E4M3FN>, %o: memref<1x4x1x32xf16>, %d: memref<f32>, %kd: memref<1x2x1xf32>) {
  // expected-error @+1 {{expected k_descale of rank 0 or 2 (per tensor, per batch and K/V head) for an e4m3 K/V, got rank 3}}
  fa.attention %q, %k, %v descale(%kd, %d : memref<1x2x1xf32>, memref<f32>) outs(%o : memref<1x4x1x32xf16>) : memref<1x4x1x32xf16>, memref<1x2x64x32xf8E4M3FN>, memref<1x2x64x32xf8E4M3FN>
  return
}

// -----

func.func @f(%q: memref<1x4x1x32xf16>, %k: memref<1x2x64x32xf8E4M3FN>, %v: memref<1x2x64x32xf8E4M3FN>, %o: memref<1x4x1x32xf16>, %d: memref<f32>, %kd: memref<1x4xf32>) {
  // expected-error @+1 {{expected k_descale head count to be 2 (the K/V heads'), got 4}}
  fa.attention %q, %k, %v descale(%kd, %d : memref<1x4xf32>, memref<f32>) outs(%o : memref<1x4x1x32xf16>) : memref<1x4x1x32xf16>, memref<1x2x64x32xf8E4M3FN>, memref<1x2x64x32xf8E4M3FN>
  return
}

// -----

func.func @f(%q: memref<1x4x1x32xf16>, %k: memref<1x2x64x32xf8E4M3FN>, %v: memref<1x2x64x32xf8E4M3FN>, %o: memref<1x4x1x32xbf16>, %d: memref<f32>) {
  // expected-error @+1 {{expected the output element type to be the inputs' (f16), got bf16}}
  fa.attention %q, %k, %v descale(%d, %d : memref<f32>, memref<f32>) outs(%o : memref<1x4x1x32xbf16>) : memref<1x4x1x32xf16>, memref<1x2x64x32xf8E4M3FN>, memref<1x2x64x32xf8E4M3FN>
  return
}
