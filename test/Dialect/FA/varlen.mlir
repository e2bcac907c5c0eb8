// RUN: fa-opt %s --split-input-file --verify-diagnostics | FileCheck %s

// fa.attention on a varlen batch: sequences packed along N (one batch
// row) with cu_seqlens_q / cu_seqlens_k prefix sums. The valid form
// round-trips; each verifier rule has one invalid case.

// CHECK-LABEL: func @varlen
// CHECK: fa.attention %{{.*}}, %{{.*}}, %{{.*}} varlen(%{{.*}}, %{{.*}} : memref<4xi32>, memref<4xi32>) outs(%{{.*}}, %{{.*}} : memref<1x8x700x64xf16>, memref<1x8x700xf32>) {bottom_right, causal}
func.func @varlen(%q: memref<1x8x700x64xf16>, %k: memref<1x2x900x64xf16>, %v: memref<1x2x900x64xf16>, %cuq: memref<4xi32>, %cuk: memref<4xi32>, %o: memref<1x8x700x64xf16>, %lse: memref<1x8x700xf32>) {
  fa.attention %q, %k, %v varlen(%cuq, %cuk : memref<4xi32>, memref<4xi32>) outs(%o, %lse : memref<1x8x700x64xf16>, memref<1x8x700xf32>) {causal, bottom_right} : memref<1x8x700x64xf16>, memref<1x2x900x64xf16>, memref<1x2x900x64xf16>
  return
}

// -----

func.func @f(%q: memref<2x8x700x64xf16>, %k: memref<2x2x900x64xf16>, %v: memref<2x2x900x64xf16>, %cu: memref<4xi32>, %o: memref<2x8x700x64xf16>) {
  // expected-error @+1 {{expected Q batch size to be 1 (packed varlen sequences), got 2}}
  fa.attention %q, %k, %v varlen(%cu, %cu : memref<4xi32>, memref<4xi32>) outs(%o : memref<2x8x700x64xf16>) : memref<2x8x700x64xf16>, memref<2x2x900x64xf16>, memref<2x2x900x64xf16>
  return
}

// -----

func.func @f(%q: memref<1x8x700x64xf16>, %k: memref<1x2x900x64xf16>, %v: memref<1x2x900x64xf16>, %cuq: memref<4xi32>, %cuk: memref<5xi32>, %o: memref<1x8x700x64xf16>) {
  // expected-error @+1 {{expected cu_seqlens_k size to be 4 (cu_seqlens_q's), got 5}}
  fa.attention %q, %k, %v varlen(%cuq, %cuk : memref<4xi32>, memref<5xi32>) outs(%o : memref<1x8x700x64xf16>) : memref<1x8x700x64xf16>, memref<1x2x900x64xf16>, memref<1x2x900x64xf16>
  return
}

// -----

func.func @f(%q: memref<1x8x700x64xf16>, %k: memref<1x2x900x64xf16>, %v: memref<1x2x900x64xf16>, %cu: memref<1xi32>, %o: memref<1x8x700x64xf16>) {
  // expected-error @+1 {{expected cu_seqlens of at least two entries (B + 1 prefix sums, B >= 1), got 1}}
  fa.attention %q, %k, %v varlen(%cu, %cu : memref<1xi32>, memref<1xi32>) outs(%o : memref<1x8x700x64xf16>) : memref<1x8x700x64xf16>, memref<1x2x900x64xf16>, memref<1x2x900x64xf16>
  return
}

// -----

func.func @f(%q: memref<1x8x700x64xf16>, %k: memref<1x2x900x64xf16>, %v: memref<1x2x900x64xf16>, %cu: memref<4xi32>, %lens: memref<1xi32>, %o: memref<1x8x700x64xf16>) {
  // expected-error @+1 {{varlen batches take no kv_lengths, pages, descales or kv_splits (not supported together)}}
  fa.attention %q, %k, %v kv_lengths(%lens : memref<1xi32>) varlen(%cu, %cu : memref<4xi32>, memref<4xi32>) outs(%o : memref<1x8x700x64xf16>) : memref<1x8x700x64xf16>, memref<1x2x900x64xf16>, memref<1x2x900x64xf16>
  return
}

// -----

func.func @f(%q: tensor<1x8x700x64xf16>, %k: tensor<1x2x900x64xf16>, %v: tensor<1x2x900x64xf16>, %cu: memref<4xi32>) {
  // expected-error @+1 {{expected cu_seqlens_q to be a tensor like the inputs, got 'memref<4xi32>'}}
  %o = fa.attention %q, %k, %v varlen(%cu, %cu : memref<4xi32>, memref<4xi32>) : tensor<1x8x700x64xf16>, tensor<1x2x900x64xf16>, tensor<1x2x900x64xf16> -> tensor<1x8x700x64xf16>
  return
}
