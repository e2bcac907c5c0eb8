// RUN: fa-opt %s --split-input-file --verify-diagnostics | FileCheck %s

// fa.attention over KV caches: per-sequence key lengths and a paged cache
// addressed by a block table. The valid forms round-trip; each verifier
// rule has one invalid case.

// CHECK-LABEL: func @paged_decode
// CHECK: fa.attention %{{.*}}, %{{.*}}, %{{.*}} kv_lengths(%{{.*}} : memref<4xi32>) pages(%{{.*}} : memref<4x8xi32>) outs(%{{.*}} : memref<4x8x1x128xf16>) {bottom_right, causal}
func.func @paged_decode(%q: memref<4x8x1x128xf16>, %k: memref<64x2x256x128xf16>, %v: memref<64x2x256x128xf16>, %lens: memref<4xi32>, %table: memref<4x8xi32>, %o: memref<4x8x1x128xf16>) {
  fa.attention %q, %k, %v kv_lengths(%lens : memref<4xi32>) pages(%table : memref<4x8xi32>) outs(%o : memref<4x8x1x128xf16>) {causal, bottom_right} : memref<4x8x1x128xf16>, memref<64x2x256x128xf16>, memref<64x2x256x128xf16>
  return
}

// CHECK-LABEL: func @lengths_tensor
// CHECK: fa.attention %{{.*}}, %{{.*}}, %{{.*}} kv_lengths(%{{.*}} : tensor<2xi32>) :
func.func @lengths_tensor(%q: tensor<2x4x3x64xf32>, %k: tensor<2x4x100x64xf32>, %v: tensor<2x4x100x64xf32>, %lens: tensor<2xi32>) -> tensor<2x4x3x64xf32> {
  %o = fa.attention %q, %k, %v kv_lengths(%lens : tensor<2xi32>) : tensor<2x4x3x64xf32>, tensor<2x4x100x64xf32>, tensor<2x4x100x64xf32> -> tensor<2x4x3x64xf32>
  return %o : tensor<2x4x3x64xf32>
}

// -----

func.func @f(%q: memref<4x8x1x64xf16>, %k: memref<4x8x100x64xf16>, %v: memref<4x8x100x64xf16>, %lens: memref<3xi32>, %o: memref<4x8x1x64xf16>) {
  // expected-error @+1 {{expected kv_lengths size to be 4 (the query's batch size), got 3}}
  fa.attention %q, %k, %v kv_lengths(%lens : memref<3xi32>) outs(%o : memref<4x8x1x64xf16>) : memref<4x8x1x64xf16>, memref<4x8x100x64xf16>, memref<4x8x100x64xf16>
  return
}

// -----

func.func @f(%q: memref<4x8x1x64xf16>, %k: memref<4x8x100x64xf16>, %v: memref<4x8x100x64xf16>, %lens: memref<4x1xi32>, %o: memref<4x8x1x64xf16>) {
  // expected-error @+1 {{expected kv_lengths to have rank 1 ([B]), got rank 2}}
  fa.attention %q, %k, %v kv_lengths(%lens : memref<4x1xi32>) outs(%o : memref<4x8x1x64xf16>) : memref<4x8x1x64xf16>, memref<4x8x100x64xf16>, memref<4x8x100x64xf16>
  return
}

// -----

func.func @f(%q: tensor<4x8x1x64xf16>, %k: tensor<4x8x100x64xf16>, %v: tensor<4x8x100x64xf16>, %lens: memref<4xi32>) {
  // expected-error @+1 {{expected kv_lengths to be a tensor like the inputs, got 'memref<4xi32>'}}
  %o = fa.attention %q, %k, %v kv_lengths(%lens : memref<4xi32>) : tensor<4x8x1x64xf16>, tensor<4x8x100x64xf16>, tensor<4x8x100x64xf16> -> tensor<4x8x1x64xf16>
  return
}

// -----

func.func @f(%q: memref<4x8x1x64xf16>, %k: memref<64x2x16x64xf16>, %v: memref<64x2x16x64xf16>, %table: memref<5x8xi32>, %o: memref<4x8x1x64xf16>) {
  // expected-error @+1 {{expected block table rows to be 4 (the query's batch size), got 5}}
  fa.attention %q, %k, %v pages(%table : memref<5x8xi32>) outs(%o : memref<4x8x1x64xf16>) : memref<4x8x1x64xf16>, memref<64x2x16x64xf16>, memref<64x2x16x64xf16>
  return
}

// -----

func.func @f(%q: memref<4x8x1x64xf16>, %k: memref<64x2x16x64xf16>, %v: memref<64x2x16x64xf16>, %table: memref<32xi32>, %o: memref<4x8x1x64xf16>) {
  // expected-error @+1 {{expected block table to have rank 2 ([B, max_pages]), got rank 1}}
  fa.attention %q, %k, %v pages(%table : memref<32xi32>) outs(%o : memref<4x8x1x64xf16>) : memref<4x8x1x64xf16>, memref<64x2x16x64xf16>, memref<64x2x16x64xf16>
  return
}

// -----

func.func @f(%q: memref<4x8x1x64xf16>, %k: memref<64x2x?x64xf16>, %v: memref<64x2x?x64xf16>, %table: memref<4x8xi32>, %o: memref<4x8x1x64xf16>) {
  // expected-error @+1 {{expected a static page size (dim 2 of the paged K/V cache [num_pages, Hkv, page_size, D])}}
  fa.attention %q, %k, %v pages(%table : memref<4x8xi32>) outs(%o : memref<4x8x1x64xf16>) : memref<4x8x1x64xf16>, memref<64x2x?x64xf16>, memref<64x2x?x64xf16>
  return
}

// -----

func.func @f(%q: memref<4x8x1x64xf16>, %k: memref<64x2x16x64xf16>, %v: memref<63x2x16x64xf16>, %table: memref<4x8xi32>, %o: memref<4x8x1x64xf16>) {
  // expected-error @+1 {{expected value page count to be 64 (the key's), got 63}}
  fa.attention %q, %k, %v pages(%table : memref<4x8xi32>) outs(%o : memref<4x8x1x64xf16>) : memref<4x8x1x64xf16>, memref<64x2x16x64xf16>, memref<63x2x16x64xf16>
  return
}
