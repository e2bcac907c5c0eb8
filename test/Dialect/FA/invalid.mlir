// RUN: fa-opt %s --split-input-file --verify-diagnostics

// Every verifier message of the fa dialect, one case each.

func.func @f(%q: tensor<2x8x128x64xf16>, %k: memref<2x2x128x64xf16>, %v: tensor<2x2x128x64xf16>) {
  // expected-error @+1 {{expected query, key and value to be all tensors or all memrefs}}
  %r0 = fa.attention %q, %k, %v : tensor<2x8x128x64xf16>, memref<2x2x128x64xf16>, tensor<2x2x128x64xf16> -> tensor<2x8x128x64xf16>
  return
}

// -----

func.func @f(%q: tensor<8x128x64xf16>, %k: tensor<2x2x128x64xf16>, %v: tensor<2x2x128x64xf16>) {
  // expected-error @+1 {{expected query to have rank 4 ([B, Hq, Nq, D]), got rank 3}}
  %r0 = fa.attention %q, %k, %v : tensor<8x128x64xf16>, tensor<2x2x128x64xf16>, tensor<2x2x128x64xf16> -> tensor<2x8x128x64xf16>
  return
}

// -----

func.func @f(%q: tensor<2x8x128x64xf16>, %k: tensor<2x128x64xf16>, %v: tensor<2x2x128x64xf16>) {
  // expected-error @+1 {{expected key to have rank 4 ([B, Hkv, Nk, D]), got rank 3}}
  %r0 = fa.attention %q, %k, %v : tensor<2x8x128x64xf16>, tensor<2x128x64xf16>, tensor<2x2x128x64xf16> -> tensor<2x8x128x64xf16>
  return
}

// -----

func.func @f(%q: tensor<2x8x128x64xf16>, %k: tensor<2x2x128x64xf16>, %v: tensor<2x2x128xf16>) {
  // expected-error @+1 {{expected value to have rank 4 ([B, Hkv, Nk, Dv]), got rank 3}}
  %r0 = fa.attention %q, %k, %v : tensor<2x8x128x64xf16>, tensor<2x2x128x64xf16>, tensor<2x2x128xf16> -> tensor<2x8x128x64xf16>
  return
}

// -----

func.func @f(%q: tensor<2x8x128x64xf16>, %k: tensor<2x2x128x64xf32>, %v: tensor<2x2x128x64xf16>) {
  // expected-error @+1 {{expected key element type to be 'f16' (the query's), got 'f32'}}
  %r0 = fa.attention %q, %k, %v : tensor<2x8x128x64xf16>, tensor<2x2x128x64xf32>, tensor<2x2x128x64xf16> -> tensor<2x8x128x64xf16>
  return
}

// -----

func.func @f(%q: tensor<2x8x128x64xf16>, %k: tensor<2x2x128x64xf16>, %v: tensor<2x2x128x64xbf16>) {
  // expected-error @+1 {{expected value element type to be 'f16' (the query's), got 'bf16'}}
  %r0 = fa.attention %q, %k, %v : tensor<2x8x128x64xf16>, tensor<2x2x128x64xf16>, tensor<2x2x128x64xbf16> -> tensor<2x8x128x64xf16>
  return
}

// -----

func.func @f(%q: tensor<2x8x128x?xf16>, %k: tensor<2x2x128x?xf16>, %v: tensor<2x2x128x64xf16>) {
  // expected-error @+1 {{expected query head dim D to be static}}
  %r0 = fa.attention %q, %k, %v : tensor<2x8x128x?xf16>, tensor<2x2x128x?xf16>, tensor<2x2x128x64xf16> -> tensor<2x8x128x64xf16>
  return
}

// -----

func.func @f(%q: tensor<2x8x128x64xf16>, %k: tensor<2x2x128x64xf16>, %v: tensor<2x2x128x?xf16>) {
  // expected-error @+1 {{expected value head dim Dv to be static}}
  %r0 = fa.attention %q, %k, %v : tensor<2x8x128x64xf16>, tensor<2x2x128x64xf16>, tensor<2x2x128x?xf16> -> tensor<2x8x128x?xf16>
  return
}

// -----

func.func @f(%q: tensor<2x8x128x64xf16>, %k: tensor<3x2x128x64xf16>, %v: tensor<2x2x128x64xf16>) {
  // expected-error @+1 {{expected key batch size to be 2 (the query's), got 3}}
  %r0 = fa.attention %q, %k, %v : tensor<2x8x128x64xf16>, tensor<3x2x128x64xf16>, tensor<2x2x128x64xf16> -> tensor<2x8x128x64xf16>
  return
}

// -----

func.func @f(%q: tensor<2x8x128x64xf16>, %k: tensor<2x2x128x64xf16>, %v: tensor<3x2x128x64xf16>) {
  // expected-error @+1 {{expected value batch size to be 2 (the query's), got 3}}
  %r0 = fa.attention %q, %k, %v : tensor<2x8x128x64xf16>, tensor<2x2x128x64xf16>, tensor<3x2x128x64xf16> -> tensor<2x8x128x64xf16>
  return
}

// -----

func.func @f(%q: tensor<2x8x128x64xf16>, %k: tensor<2x2x128x64xf16>, %v: tensor<2x4x128x64xf16>) {
  // expected-error @+1 {{expected value head count to be 2 (the key's), got 4}}
  %r0 = fa.attention %q, %k, %v : tensor<2x8x128x64xf16>, tensor<2x2x128x64xf16>, tensor<2x4x128x64xf16> -> tensor<2x8x128x64xf16>
  return
}

// -----

func.func @f(%q: tensor<2x8x128x64xf16>, %k: tensor<2x2x128x64xf16>, %v: tensor<2x2x96x64xf16>) {
  // expected-error @+1 {{expected value sequence length to be 128 (the key's), got 96}}
  %r0 = fa.attention %q, %k, %v : tensor<2x8x128x64xf16>, tensor<2x2x128x64xf16>, tensor<2x2x96x64xf16> -> tensor<2x8x128x64xf16>
  return
}

// -----

func.func @f(%q: tensor<2x8x128x64xf16>, %k: tensor<2x2x128x32xf16>, %v: tensor<2x2x128x64xf16>) {
  // expected-error @+1 {{expected key head dim to be 64 (the query's), got 32}}
  %r0 = fa.attention %q, %k, %v : tensor<2x8x128x64xf16>, tensor<2x2x128x32xf16>, tensor<2x2x128x64xf16> -> tensor<2x8x128x64xf16>
  return
}

// -----

func.func @f(%q: tensor<2x6x128x64xf16>, %k: tensor<2x4x128x64xf16>, %v: tensor<2x4x128x64xf16>) {
  // expected-error @+1 {{expected query heads (6) to be a multiple of key/value heads (4)}}
  %r0 = fa.attention %q, %k, %v : tensor<2x6x128x64xf16>, tensor<2x4x128x64xf16>, tensor<2x4x128x64xf16> -> tensor<2x6x128x64xf16>
  return
}

// -----

func.func @f(%q: tensor<2x8x128x64xf16>, %k: tensor<2x2x128x64xf16>, %v: tensor<2x2x128x64xf16>) {
  // expected-error @+1 {{expected 1 or 2 outputs (O, then optionally LSE), got 0}}
  fa.attention %q, %k, %v : tensor<2x8x128x64xf16>, tensor<2x2x128x64xf16>, tensor<2x2x128x64xf16>
  return
}

// -----

func.func @f(%q: tensor<2x8x128x64xf16>, %k: tensor<2x2x128x64xf16>, %v: tensor<2x2x128x64xf16>) {
  // expected-error @+1 {{expected 1 or 2 outputs (O, then optionally LSE), got 3}}
  %r0, %r1, %r2 = fa.attention %q, %k, %v : tensor<2x8x128x64xf16>, tensor<2x2x128x64xf16>, tensor<2x2x128x64xf16> -> tensor<2x8x128x64xf16>, tensor<2x8x128xf32>, tensor<2x8x128xf32>
  return
}

// -----

func.func @f(%q: memref<2x8x128x64xf16>, %k: memref<2x2x128x64xf16>, %v: memref<2x2x128x64xf16>, %o0: memref<2x8x128x64xf16>, %o1: memref<2x8x128xf32>, %o2: memref<2x8x128xf32>) {
  // expected-error @+1 {{expected 1 or 2 outputs (O, then optionally LSE), got 3}}
  fa.attention %q, %k, %v outs(%o0, %o1, %o2 : memref<2x8x128x64xf16>, memref<2x8x128xf32>, memref<2x8x128xf32>) : memref<2x8x128x64xf16>, memref<2x2x128x64xf16>, memref<2x2x128x64xf16>
  return
}

// -----

func.func @f(%q: tensor<2x8x128x64xf16>, %k: tensor<2x2x128x64xf16>, %v: tensor<2x2x128x64xf16>) {
  // expected-error @+1 {{expected output to have rank 4 ([B, Hq, Nq, Dv]), got rank 3}}
  %r0 = fa.attention %q, %k, %v : tensor<2x8x128x64xf16>, tensor<2x2x128x64xf16>, tensor<2x2x128x64xf16> -> tensor<2x8x128xf16>
  return
}

// -----

func.func @f(%q: tensor<2x8x128x64xf16>, %k: tensor<2x2x128x64xf16>, %v: tensor<2x2x128x64xf16>) {
  // expected-error @+1 {{expected the output element type to be the inputs' (f16), got f32; only e4m3 inputs take another output type}}
  %r0 = fa.attention %q, %k, %v : tensor<2x8x128x64xf16>, tensor<2x2x128x64xf16>, tensor<2x2x128x64xf16> -> tensor<2x8x128x64xf32>
  return
}

// -----

func.func @f(%q: tensor<2x8x128x64xf16>, %k: tensor<2x2x128x64xf16>, %v: tensor<2x2x128x64xf16>) {
  // expected-error @+1 {{expected output batch size to be 2 (the query's), got 1}}
  %r0 = fa.attention %q, %k, %v : tensor<2x8x128x64xf16>, tensor<2x2x128x64xf16>, tensor<2x2x128x64xf16> -> tensor<1x8x128x64xf16>
  return
}

// -----

func.func @f(%q: tensor<2x8x128x64xf16>, %k: tensor<2x2x128x64xf16>, %v: tensor<2x2x128x64xf16>) {
  // expected-error @+1 {{expected output head count to be 8 (the query's), got 2}}
  %r0 = fa.attention %q, %k, %v : tensor<2x8x128x64xf16>, tensor<2x2x128x64xf16>, tensor<2x2x128x64xf16> -> tensor<2x2x128x64xf16>
  return
}

// -----

func.func @f(%q: tensor<2x8x128x64xf16>, %k: tensor<2x2x128x64xf16>, %v: tensor<2x2x128x64xf16>) {
  // expected-error @+1 {{expected output sequence length to be 128 (the query's), got 64}}
  %r0 = fa.attention %q, %k, %v : tensor<2x8x128x64xf16>, tensor<2x2x128x64xf16>, tensor<2x2x128x64xf16> -> tensor<2x8x64x64xf16>
  return
}

// -----

func.func @f(%q: tensor<2x8x128x64xf16>, %k: tensor<2x2x128x64xf16>, %v: tensor<2x2x128x64xf16>) {
  // expected-error @+1 {{expected output head dim to be 64 (the value's), got 32}}
  %r0 = fa.attention %q, %k, %v : tensor<2x8x128x64xf16>, tensor<2x2x128x64xf16>, tensor<2x2x128x64xf16> -> tensor<2x8x128x32xf16>
  return
}

// -----

func.func @f(%q: tensor<2x8x128x64xf16>, %k: tensor<2x2x128x64xf16>, %v: tensor<2x2x128x64xf16>) {
  // expected-error @+1 {{expected lse to have rank 3 ([B, Hq, Nq]), got rank 4}}
  %r0, %r1 = fa.attention %q, %k, %v : tensor<2x8x128x64xf16>, tensor<2x2x128x64xf16>, tensor<2x2x128x64xf16> -> tensor<2x8x128x64xf16>, tensor<2x8x128x1xf32>
  return
}

// -----

func.func @f(%q: tensor<2x8x128x64xf16>, %k: tensor<2x2x128x64xf16>, %v: tensor<2x2x128x64xf16>) {
  // expected-error @+1 {{expected lse element type to be f32, got 'f16'}}
  %r0, %r1 = fa.attention %q, %k, %v : tensor<2x8x128x64xf16>, tensor<2x2x128x64xf16>, tensor<2x2x128x64xf16> -> tensor<2x8x128x64xf16>, tensor<2x8x128xf16>
  return
}

// -----

func.func @f(%q: tensor<2x8x128x64xf16>, %k: tensor<2x2x128x64xf16>, %v: tensor<2x2x128x64xf16>) {
  // expected-error @+1 {{expected lse batch size to be 2 (the query's), got 1}}
  %r0, %r1 = fa.attention %q, %k, %v : tensor<2x8x128x64xf16>, tensor<2x2x128x64xf16>, tensor<2x2x128x64xf16> -> tensor<2x8x128x64xf16>, tensor<1x8x128xf32>
  return
}

// -----

func.func @f(%q: tensor<2x8x128x64xf16>, %k: tensor<2x2x128x64xf16>, %v: tensor<2x2x128x64xf16>) {
  // expected-error @+1 {{expected lse head count to be 8 (the query's), got 4}}
  %r0, %r1 = fa.attention %q, %k, %v : tensor<2x8x128x64xf16>, tensor<2x2x128x64xf16>, tensor<2x2x128x64xf16> -> tensor<2x8x128x64xf16>, tensor<2x4x128xf32>
  return
}

// -----

func.func @f(%q: tensor<2x8x128x64xf16>, %k: tensor<2x2x128x64xf16>, %v: tensor<2x2x128x64xf16>) {
  // expected-error @+1 {{expected lse sequence length to be 128 (the query's), got 100}}
  %r0, %r1 = fa.attention %q, %k, %v : tensor<2x8x128x64xf16>, tensor<2x2x128x64xf16>, tensor<2x2x128x64xf16> -> tensor<2x8x128x64xf16>, tensor<2x8x100xf32>
  return
}

// -----

func.func @f(%q: tensor<2x8x128x64xf16>, %k: tensor<2x2x128x64xf16>, %v: tensor<2x2x128x64xf16>) {
  // expected-error @+1 {{expected scale in [2^-64, 2^64], got -1 (log2(e) * scale must be a normal f32 and the scores finite); leave it out for 1/sqrt(D)}}
  %r0 = fa.attention %q, %k, %v {scale = -1.0 : f32} : tensor<2x8x128x64xf16>, tensor<2x2x128x64xf16>, tensor<2x2x128x64xf16> -> tensor<2x8x128x64xf16>
  return
}

// -----

func.func @f(%q: tensor<2x8x128x64xf16>, %k: tensor<2x2x128x64xf16>, %v: tensor<2x2x128x64xf16>) {
  // expected-error @+1 {{expected softcap in [2^-64, 2^24], got 0 (a larger cap changes no f32 score, a smaller one leaves every score 0); leave softcap out to disable capping}}
  %r0 = fa.attention %q, %k, %v {softcap = 0.0 : f32} : tensor<2x8x128x64xf16>, tensor<2x2x128x64xf16>, tensor<2x2x128x64xf16> -> tensor<2x8x128x64xf16>
  return
}

// -----

func.func @f(%q: tensor<2x8x128x64xf16>, %k: tensor<2x2x128x64xf16>, %v: tensor<2x2x128x64xf16>) {
  // expected-error @+1 {{expected window to be at least 1, got 0 (keys with |i - j| < window are visible); leave window out for no sliding window}}
  %r0 = fa.attention %q, %k, %v {window = 0 : i64} : tensor<2x8x128x64xf16>, tensor<2x2x128x64xf16>, tensor<2x2x128x64xf16> -> tensor<2x8x128x64xf16>
  return
}

// -----

func.func @f(%q: tensor<2x8x128x64xf16>, %k: tensor<2x2x128x64xf16>, %v: tensor<2x2x128x64xf16>) {
  // expected-error @+1 {{expected block_r in [1, 1048576], got 0 (rows of an on-chip tile)}}
  %r0 = fa.attention %q, %k, %v {block_r = 0 : i64} : tensor<2x8x128x64xf16>, tensor<2x2x128x64xf16>, tensor<2x2x128x64xf16> -> tensor<2x8x128x64xf16>
  return
}

// -----

func.func @f(%q: tensor<2x8x128x64xf16>, %k: tensor<2x2x128x64xf16>, %v: tensor<2x2x128x64xf16>) {
  // expected-error @+1 {{expected block_c in [1, 1048576], got -4 (rows of an on-chip tile)}}
  %r0 = fa.attention %q, %k, %v {block_c = -4 : i64} : tensor<2x8x128x64xf16>, tensor<2x2x128x64xf16>, tensor<2x2x128x64xf16> -> tensor<2x8x128x64xf16>
  return
}

// -----

func.func @f(%m: memref<16xf32>, %l: memref<8xf32>, %acc: memref<16x64xf32>) {
  // expected-error @+1 {{expected sum length to be 16 (acc rows), got 8}}
  fa.init_state %m, %l, %acc : memref<16xf32>, memref<8xf32>, memref<16x64xf32>
  return
}

// -----

func.func @f(%m: memref<16xf32>, %l: memref<16xf32>, %acc: memref<?x64xf32>) {
  // expected-error @+1 {{expected acc to have a static shape, got 'memref<?x64xf32>'}}
  fa.init_state %m, %l, %acc : memref<16xf32>, memref<16xf32>, memref<?x64xf32>
  return
}

// -----

func.func @f(%m: memref<12xf32>, %l: memref<16xf32>, %acc: memref<16x64xf32>) {
  // expected-error @+1 {{expected max length to be 16 (acc rows), got 12}}
  fa.init_state %m, %l, %acc : memref<12xf32>, memref<16xf32>, memref<16x64xf32>
  return
}

// -----

func.func @f(%q: memref<?x64xf16>, %k: memref<?x64xf16>, %s: memref<16x?xf32>, %i: index) {
  // expected-error @+1 {{expected scores to have a static shape, got 'memref<16x?xf32>'}}
  fa.score_tile %q, %k -> %s at [%i, %i] {scale = 1.0 : f32} : memref<?x64xf16>, memref<?x64xf16> -> memref<16x?xf32>
  return
}

// -----

func.func @f(%q: memref<?x?xf16>, %k: memref<?x?xf16>, %s: memref<16x32xf32>, %i: index) {
  // expected-error @+1 {{expected query head dim to be static}}
  fa.score_tile %q, %k -> %s at [%i, %i] {scale = 1.0 : f32} : memref<?x?xf16>, memref<?x?xf16> -> memref<16x32xf32>
  return
}

// -----

func.func @f(%q: memref<?x64xf16>, %k: memref<?x64xf32>, %s: memref<16x32xf32>, %i: index) {
  // expected-error @+1 {{expected key element type to be 'f16' (the query's), got 'f32'}}
  fa.score_tile %q, %k -> %s at [%i, %i] {scale = 1.0 : f32} : memref<?x64xf16>, memref<?x64xf32> -> memref<16x32xf32>
  return
}

// -----

func.func @f(%q: memref<?x64xf16>, %k: memref<?x32xf16>, %s: memref<16x32xf32>, %i: index) {
  // expected-error @+1 {{expected key head dim to be 64 (the query's), got 32}}
  fa.score_tile %q, %k -> %s at [%i, %i] {scale = 1.0 : f32} : memref<?x64xf16>, memref<?x32xf16> -> memref<16x32xf32>
  return
}

// -----

func.func @f(%q: memref<32x64xf16>, %k: memref<?x64xf16>, %s: memref<16x32xf32>, %i: index) {
  // expected-error @+1 {{expected query to have at most 16 rows (the score tile's B_r), got 32}}
  fa.score_tile %q, %k -> %s at [%i, %i] {scale = 1.0 : f32} : memref<32x64xf16>, memref<?x64xf16> -> memref<16x32xf32>
  return
}

// -----

func.func @f(%q: memref<?x64xf16>, %k: memref<64x64xf16>, %s: memref<16x32xf32>, %i: index) {
  // expected-error @+1 {{expected key to have at most 32 rows (the score tile's B_c), got 64}}
  fa.score_tile %q, %k -> %s at [%i, %i] {scale = 1.0 : f32} : memref<?x64xf16>, memref<64x64xf16> -> memref<16x32xf32>
  return
}

// -----

func.func @f(%q: memref<?x64xf16>, %k: memref<?x64xf16>, %s: memref<16x32xf32>, %i: index) {
  // expected-error @+1 {{expected scale in [2^-64, 2^64], got 0}}
  fa.score_tile %q, %k -> %s at [%i, %i] {scale = 0.0 : f32} : memref<?x64xf16>, memref<?x64xf16> -> memref<16x32xf32>
  return
}

// -----

func.func @f(%q: memref<?x64xf16>, %k: memref<?x64xf16>, %s: memref<16x32xf32>, %i: index) {
  // expected-error @+1 {{expected softcap in [2^-64, 2^24], got -2}}
  fa.score_tile %q, %k -> %s at [%i, %i] {scale = 1.0 : f32, softcap = -2.0 : f32} : memref<?x64xf16>, memref<?x64xf16> -> memref<16x32xf32>
  return
}

// -----

func.func @f(%q: memref<?x64xf16>, %k: memref<?x64xf16>, %s: memref<16x32xf32>, %i: index) {
  // expected-error @+1 {{expected window to be at least 1, got 0}}
  fa.score_tile %q, %k -> %s at [%i, %i] {scale = 1.0 : f32, window = 0 : i64} : memref<?x64xf16>, memref<?x64xf16> -> memref<16x32xf32>
  return
}

// -----

func.func @f(%s: memref<?x32xf32>, %m: memref<16xf32>, %l: memref<16xf32>, %a: memref<16xf32>) {
  // expected-error @+1 {{expected scores to have a static shape, got 'memref<?x32xf32>'}}
  fa.softmax_update %s, %m, %l -> %a : memref<?x32xf32>, memref<16xf32>, memref<16xf32> -> memref<16xf32>
  return
}

// -----

func.func @f(%s: memref<16x32xf32>, %m: memref<8xf32>, %l: memref<16xf32>, %a: memref<16xf32>) {
  // expected-error @+1 {{expected max length to be 16 (score rows), got 8}}
  fa.softmax_update %s, %m, %l -> %a : memref<16x32xf32>, memref<8xf32>, memref<16xf32> -> memref<16xf32>
  return
}

// -----

func.func @f(%s: memref<16x32xf32>, %m: memref<16xf32>, %l: memref<8xf32>, %a: memref<16xf32>) {
  // expected-error @+1 {{expected sum length to be 16 (score rows), got 8}}
  fa.softmax_update %s, %m, %l -> %a : memref<16x32xf32>, memref<16xf32>, memref<8xf32> -> memref<16xf32>
  return
}

// -----

func.func @f(%s: memref<16x32xf32>, %m: memref<16xf32>, %l: memref<16xf32>, %a: memref<8xf32>) {
  // expected-error @+1 {{expected correction length to be 16 (score rows), got 8}}
  fa.softmax_update %s, %m, %l -> %a : memref<16x32xf32>, memref<16xf32>, memref<16xf32> -> memref<8xf32>
  return
}

// -----

func.func @f(%s: memref<16x32xf32>, %m: memref<16xf32>, %l: memref<16xf32>, %a: memref<?xf32>) {
  // expected-error @+1 {{expected correction to have a static shape, got 'memref<?xf32>'}}
  fa.softmax_update %s, %m, %l -> %a : memref<16x32xf32>, memref<16xf32>, memref<16xf32> -> memref<?xf32>
  return
}

// -----

func.func @f(%acc: memref<16x64xf32>, %f: memref<8xf32>) {
  // expected-error @+1 {{expected factor length to be 16 (acc rows), got 8}}
  fa.rescale %acc, %f : memref<16x64xf32>, memref<8xf32>
  return
}

// -----

func.func @f(%acc: memref<?x64xf32>, %f: memref<16xf32>) {
  // expected-error @+1 {{expected acc to have a static shape, got 'memref<?x64xf32>'}}
  fa.rescale %acc, %f : memref<?x64xf32>, memref<16xf32>
  return
}

// -----

func.func @f(%p: memref<16x?xf32>, %v: memref<?x64xf16>, %acc: memref<16x64xf32>) {
  // expected-error @+1 {{expected probs to have a static shape, got 'memref<16x?xf32>'}}
  fa.pv_accumulate %p, %v -> %acc : memref<16x?xf32>, memref<?x64xf16> -> memref<16x64xf32>
  return
}

// -----

func.func @f(%p: memref<16x32xf32>, %v: memref<?x64xf16>, %acc: memref<?x64xf32>) {
  // expected-error @+1 {{expected acc to have a static shape, got 'memref<?x64xf32>'}}
  fa.pv_accumulate %p, %v -> %acc : memref<16x32xf32>, memref<?x64xf16> -> memref<?x64xf32>
  return
}

// -----

func.func @f(%p: memref<16x32xf32>, %v: memref<?x?xf16>, %acc: memref<16x64xf32>) {
  // expected-error @+1 {{expected value head dim to be static}}
  fa.pv_accumulate %p, %v -> %acc : memref<16x32xf32>, memref<?x?xf16> -> memref<16x64xf32>
  return
}

// -----

func.func @f(%p: memref<16x32xf32>, %v: memref<?x64xf16>, %acc: memref<8x64xf32>) {
  // expected-error @+1 {{expected acc rows to be 16 (the probs'), got 8}}
  fa.pv_accumulate %p, %v -> %acc : memref<16x32xf32>, memref<?x64xf16> -> memref<8x64xf32>
  return
}

// -----

func.func @f(%p: memref<16x32xf32>, %v: memref<?x64xf16>, %acc: memref<16x32xf32>) {
  // expected-error @+1 {{expected acc columns to be 64 (the value head dim), got 32}}
  fa.pv_accumulate %p, %v -> %acc : memref<16x32xf32>, memref<?x64xf16> -> memref<16x32xf32>
  return
}

// -----

func.func @f(%p: memref<16x32xf32>, %v: memref<48x64xf16>, %acc: memref<16x64xf32>) {
  // expected-error @+1 {{expected value to have at most 32 rows (the probs' B_c), got 48}}
  fa.pv_accumulate %p, %v -> %acc : memref<16x32xf32>, memref<48x64xf16> -> memref<16x64xf32>
  return
}

// -----

func.func @f(%acc: memref<16x64xf32>, %l: memref<4xf32>) {
  // expected-error @+1 {{expected sum length to be 16 (acc rows), got 4}}
  fa.normalize %acc, %l : memref<16x64xf32>, memref<4xf32>
  return
}

// -----

func.func @f(%acc: memref<16x?xf32>, %l: memref<16xf32>) {
  // expected-error @+1 {{expected acc to have a static shape, got 'memref<16x?xf32>'}}
  fa.normalize %acc, %l : memref<16x?xf32>, memref<16xf32>
  return
}

// -----

func.func @f(%m: memref<?xf32>, %l: memref<16xf32>, %o: memref<?xf32>) {
  // expected-error @+1 {{expected max to have a static shape, got 'memref<?xf32>'}}
  fa.logsumexp %m, %l -> %o : memref<?xf32>, memref<16xf32> -> memref<?xf32>
  return
}

// -----

func.func @f(%m: memref<16xf32>, %l: memref<8xf32>, %o: memref<?xf32>) {
  // expected-error @+1 {{expected sum length to be 16 (max length), got 8}}
  fa.logsumexp %m, %l -> %o : memref<16xf32>, memref<8xf32> -> memref<?xf32>
  return
}

// -----

func.func @f(%m: memref<16xf32>, %l: memref<16xf32>, %o: memref<20xf32>) {
  // expected-error @+1 {{expected lse to have at most 16 rows (the max length), got 20}}
  fa.logsumexp %m, %l -> %o : memref<16xf32>, memref<16xf32> -> memref<20xf32>
  return
}

// -----

func.func @f(%s: memref<16x32xf32>, %m: memref<16xf32>, %a: memref<16xf32>) {
  // expected-error @+1 {{expected threshold in [0, 64], got -1 (log2 units: P may reach 2^threshold and its sums must stay finite in f32)}}
  %r = fa.conditional_softmax_update %s, %m, %m -> %a {threshold = -1.0 : f32} : memref<16x32xf32>, memref<16xf32>, memref<16xf32> -> memref<16xf32>
  return
}

// -----

func.func @f(%s: memref<16x32xf32>, %m: memref<16xf32>, %a: memref<16xf32>, %c: memref<2xf64>) {
  // expected-error @+1 {{expected counters to be memref<3xf64> (moved, skipped, max P), got 'memref<2xf64>'}}
  %r = fa.conditional_softmax_update %s, %m, %m -> %a counters(%c : memref<2xf64>) {threshold = 8.0 : f32} : memref<16x32xf32>, memref<16xf32>, memref<16xf32> -> memref<16xf32>
  return
}

// -----

func.func @f(%s: memref<16x32xf32>, %m: memref<8xf32>, %a: memref<16xf32>) {
  // expected-error @+1 {{expected base length to be 16 (score rows), got 8}}
  %r = fa.conditional_softmax_update %s, %m, %a -> %a {threshold = 8.0 : f32} : memref<16x32xf32>, memref<8xf32>, memref<16xf32> -> memref<16xf32>
  return
}

// -----

func.func @f(%s: memref<16x32xf32>, %m: memref<16xf32>) {
  // expected-error @+1 {{expected exp2_poly_degree in [2, 5], got 7 (the software exp2's polynomials)}}
  fa.softmax_update %s, %m, %m -> %m {exp2_poly_degree = 7 : i64, exp2_poly_period = 1 : i64} : memref<16x32xf32>, memref<16xf32>, memref<16xf32> -> memref<16xf32>
  return
}

// -----

func.func @f(%s: memref<16x32xf32>, %m: memref<16xf32>) {
  // expected-error @+1 {{expected exp2_poly_period in [1, 1048576], got 0 (one exponential in period columns of a tile)}}
  fa.softmax_update %s, %m, %m -> %m {exp2_poly_degree = 3 : i64, exp2_poly_period = 0 : i64} : memref<16x32xf32>, memref<16xf32>, memref<16xf32> -> memref<16xf32>
  return
}

// -----

func.func @f(%s: memref<16x32xf32>, %m: memref<16xf32>) {
  // expected-error @+1 {{expected exp2_poly_degree and exp2_poly_period together}}
  fa.softmax_update %s, %m, %m -> %m {exp2_poly_degree = 3 : i64} : memref<16x32xf32>, memref<16xf32>, memref<16xf32> -> memref<16xf32>
  return
}

// -----

func.func @merge_rows(%po: memref<2x8x64xf32>, %pl: memref<2x4xf32>, %o: memref<8x64xf16>) {
  // expected-error @+1 {{expected the partials' rows to be the output's}}
  fa.merge_partials %po, %pl -> %o : memref<2x8x64xf32>, memref<2x4xf32> -> memref<8x64xf16>
  return
}

// -----

func.func @merge_splits(%po: memref<2x8x64xf32>, %pl: memref<3x8xf32>, %o: memref<8x64xf16>) {
  // expected-error @+1 {{expected as many partial LSEs as partial outputs, got 3 and 2}}
  fa.merge_partials %po, %pl -> %o : memref<2x8x64xf32>, memref<3x8xf32> -> memref<8x64xf16>
  return
}

// -----

func.func @kv_splits_range(%q: memref<1x1x8x16xf32>, %o: memref<1x1x8x16xf32>) {
  // expected-error @+1 {{expected kv_splits in [1, 1024], got 0}}
  fa.attention %q, %q, %q outs(%o : memref<1x1x8x16xf32>) {kv_splits = 0 : i64}
      : memref<1x1x8x16xf32>, memref<1x1x8x16xf32>, memref<1x1x8x16xf32>
  return
}
