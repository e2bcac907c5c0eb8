// RUN: fa-opt %s --split-input-file --pass-pipeline="builtin.module(func.func(fa-ring-attention{world=2}))" --verify-diagnostics
// RUN: not fa-opt %s --split-input-file --pass-pipeline="builtin.module(func.func(fa-ring-attention{world=0}))" 2>&1 | FileCheck %s --check-prefix=WORLD
// RUN: not fa-opt %s --split-input-file --pass-pipeline="builtin.module(func.func(fa-ring-attention{world=2 rank=2}))" 2>&1 | FileCheck %s --check-prefix=RANK
// RUN: not fa-opt %s --split-input-file --pass-pipeline="builtin.module(func.func(fa-ring-attention{layout=striped}))" 2>&1 | FileCheck %s --check-prefix=LAYOUT
// WORLD: fa-ring-attention: world must be in [1, 1024], got 0
// RANK: fa-ring-attention: rank must be -1 (every rank) or in [0, 2), got 2
// LAYOUT: fa-ring-attention: layout must be zigzag or contiguous, got 'striped'

// What a ring step cannot express yet is refused with the reason.
func.func @window(%q: memref<1x1x64x16xf32>, %o: memref<1x1x64x16xf32>) {
  // expected-error @+1 {{fa-ring-attention: sliding windows and diagonal offsets have no ring form yet}}
  fa.attention %q, %q, %q outs(%o : memref<1x1x64x16xf32>) {window = 8 : i64} : memref<1x1x64x16xf32>, memref<1x1x64x16xf32>, memref<1x1x64x16xf32>
  return
}

// -----

func.func @offset(%q: memref<1x1x64x16xf32>, %o: memref<1x1x64x16xf32>) {
  // expected-error @+1 {{fa-ring-attention: sliding windows and diagonal offsets have no ring form yet}}
  fa.attention %q, %q, %q outs(%o : memref<1x1x64x16xf32>) {causal, diagonal_offset = 3 : i64} : memref<1x1x64x16xf32>, memref<1x1x64x16xf32>, memref<1x1x64x16xf32>
  return
}

// -----

func.func @cross(%q: memref<1x1x64x16xf32>, %k: memref<1x1x32x16xf32>, %o: memref<1x1x64x16xf32>) {
  // expected-error @+1 {{fa-ring-attention: a ring shards one sequence: Nq must equal Nk, got 64 and 32}}
  fa.attention %q, %k, %k outs(%o : memref<1x1x64x16xf32>) : memref<1x1x64x16xf32>, memref<1x1x32x16xf32>, memref<1x1x32x16xf32>
  return
}

// -----

func.func @ragged(%q: memref<1x1x66x16xf32>, %o: memref<1x1x66x16xf32>) {
  // expected-error @+1 {{fa-ring-attention: the sequence length 66 must be a multiple of 4 (zigzag sharding over 2 ranks)}}
  fa.attention %q, %q, %q outs(%o : memref<1x1x66x16xf32>) : memref<1x1x66x16xf32>, memref<1x1x66x16xf32>, memref<1x1x66x16xf32>
  return
}

// -----

func.func @dynamic(%q: memref<1x1x?x16xf32>, %o: memref<1x1x?x16xf32>) {
  // expected-error @+1 {{fa-ring-attention: needs static shapes, got 'memref<1x1x?x16xf32>'}}
  fa.attention %q, %q, %q outs(%o : memref<1x1x?x16xf32>) : memref<1x1x?x16xf32>, memref<1x1x?x16xf32>, memref<1x1x?x16xf32>
  return
}

// -----

func.func @tensors(%q: tensor<1x1x64x16xf32>) -> tensor<1x1x64x16xf32> {
  // expected-error @+1 {{fa-ring-attention: needs the memref form (run fa-attention-to-buffers first)}}
  %o = fa.attention %q, %q, %q : tensor<1x1x64x16xf32>, tensor<1x1x64x16xf32>, tensor<1x1x64x16xf32> -> tensor<1x1x64x16xf32>
  return %o : tensor<1x1x64x16xf32>
}

// -----

func.func @sinks(%q: memref<1x2x64x16xf32>, %s: memref<2xf32>, %o: memref<1x2x64x16xf32>) {
  // expected-error @+1 {{fa-ring-attention: attention sinks have no ring form yet}}
  fa.attention %q, %q, %q sinks(%s : memref<2xf32>) outs(%o : memref<1x2x64x16xf32>) {causal} : memref<1x2x64x16xf32>, memref<1x2x64x16xf32>, memref<1x2x64x16xf32>
  return
}

// -----

func.func @score_mod(%q: memref<1x2x64x16xf32>, %o: memref<1x2x64x16xf32>) {
  // expected-error @+1 {{fa-ring-attention: score_mod and mask_mod have no ring form yet}}
  fa.attention %q, %q, %q outs(%o : memref<1x2x64x16xf32>) {causal} : memref<1x2x64x16xf32>, memref<1x2x64x16xf32>, memref<1x2x64x16xf32>
    mask_mod {
    ^bb0(%b: index, %h: index, %i: index, %j: index):
      %t = arith.constant true
      fa.yield %t : i1
    }
  return
}
