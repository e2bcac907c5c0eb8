// RUN: fa-opt %s --split-input-file --fa-tile="block-r=16 block-c=16" --fa-lower-fa2 --fa-lower-fa2-backward="block-r=16 block-c=16" --fa-skip-masked-blocks --canonicalize | FileCheck %s

// Block sparsity from a mask_mod: FA2's K/V block loop runs a block only
// where the prefix-LM mask (j < 8 or j <= i) can be true on it, tested on
// the block's ranges before its loads: some j in [k0, k0 + cols) below 8,
// or k0 <= the block's last query q0 + rows - 1 (and, for the unsigned
// compares, either outcome if a range starts below 0).
// CHECK-LABEL: func.func @prefix_lm
// CHECK: scf.forall
// CHECK: scf.for %[[KB:.*]] = %{{.*}} to %{{.*}} step
// CHECK: %[[K0:.*]] = arith.muli %[[KB]], %c16
// CHECK-DAG: %[[PREFIX:.*]] = arith.cmpi slt, %[[K0]], %c8 : index
// CHECK-DAG: %[[BELOW_DIAGONAL:.*]] = arith.cmpi sle, %[[K0]], %[[QLAST:.*]] : index
// CHECK: scf.if %{{.*}} {
// CHECK-NEXT: linalg.copy
// CHECK: linalg.copy
// A pair the mask keeps whole (it cannot be false there: every key below 8,
// or the block entirely at or below the diagonal) takes the tile without
// the mask_mod.
// CHECK: scf.if %{{.*}} {
// CHECK-NEXT: fa.score_tile {{.*}} coordinates({{.*}}) {{.*}} mask_mod {
// CHECK: } else {
// CHECK-NEXT: fa.score_tile %{{[^ ]*}}, %{{[^ ]*}} -> %{{[^ ]*}} at [%{{[^,]*}}, %{{[^]]*}}] {scale = 2.500000e-01 : f32} : memref<?x16xf32, strided<[16, 1]>>, memref<?x16xf32, strided<[16, 1]>> -> memref<16x16xf32>{{$}}
// CHECK: fa.softmax_update
// CHECK: fa.rescale
// CHECK: fa.pv_accumulate
// CHECK: }
func.func @prefix_lm(%q: memref<1x2x70x16xf32>, %o: memref<1x2x70x16xf32>) {
  fa.attention %q, %q, %q outs(%o : memref<1x2x70x16xf32>) : memref<1x2x70x16xf32>, memref<1x2x70x16xf32>, memref<1x2x70x16xf32>
    mask_mod {
    ^bb0(%b: index, %h: index, %i: index, %j: index):
      %p = arith.constant 8 : index
      %inPrefix = arith.cmpi ult, %j, %p : index
      %causal = arith.cmpi ule, %j, %i : index
      %seen = arith.ori %inPrefix, %causal : i1
      fa.yield %seen : i1
    }
  return
}

// -----

// Documents of 32 positions (i // 32 == j // 32): ranges through floordivsi
// by a constant; the pair may be visible where [q0 // 32, qlast // 32] and
// [k0 // 32, klast // 32] meet.
// CHECK-LABEL: func.func @block_diagonal
// CHECK: scf.for
// CHECK-DAG: arith.floordivsi %{{.*}}, %c32
// CHECK: scf.if
// CHECK-NEXT: linalg.copy
func.func @block_diagonal(%q: memref<1x2x70x16xf32>, %o: memref<1x2x70x16xf32>) {
  fa.attention %q, %q, %q outs(%o : memref<1x2x70x16xf32>) : memref<1x2x70x16xf32>, memref<1x2x70x16xf32>, memref<1x2x70x16xf32>
    mask_mod {
    ^bb0(%b: index, %h: index, %i: index, %j: index):
      %c = arith.constant 32 : index
      %x = arith.floordivsi %i, %c : index
      %y = arith.floordivsi %j, %c : index
      %same = arith.cmpi eq, %x, %y : index
      fa.yield %same : i1
    }
  return
}

// -----

// Document ids read from a capture cannot be bounded by the indices: the
// loop is left as it is (such masks need a block mask from the data).
// CHECK-LABEL: func.func @documents_from_data
// CHECK-NOT: scf.if
// CHECK: return
func.func @documents_from_data(%q: memref<1x2x70x16xf32>, %o: memref<1x2x70x16xf32>, %docs: memref<1x70xi32>) {
  fa.attention %q, %q, %q captures(%docs : memref<1x70xi32>) outs(%o : memref<1x2x70x16xf32>) : memref<1x2x70x16xf32>, memref<1x2x70x16xf32>, memref<1x2x70x16xf32>
    mask_mod {
    ^bb0(%b: index, %h: index, %i: index, %j: index, %d: tensor<1x70xi32>):
      %x = tensor.extract %d[%b, %i] : tensor<1x70xi32>
      %y = tensor.extract %d[%b, %j] : tensor<1x70xi32>
      %same = arith.cmpi eq, %x, %y : i32
      fa.yield %same : i1
    }
  return
}

// -----

// The backward's query-block loop (inside a K/V block): the pair's work,
// from its score tile on, only where the causal mask_mod (j <= i) can
// hold.
// CHECK-LABEL: func.func @backward_causal
// CHECK: scf.for
// CHECK: scf.for
// CHECK: scf.for
// CHECK: %[[VISIBLE:.*]] = arith.cmpi sle
// CHECK: scf.if %[[VISIBLE]] {
// CHECK: fa.score_tile {{.*}} mask_mod {
// CHECK: } else {
// CHECK-NEXT: fa.score_tile
// CHECK-NOT: mask_mod
// CHECK: fa.recompute_probs
// CHECK: fa.grad_queries
// CHECK: }
func.func @backward_causal(%q: memref<1x2x70x16xf32>, %lse: memref<1x2x70xf32>) {
  fa.attention_backward %q, %q, %q, %q, %lse, %q
      outs(%q, %q, %q : memref<1x2x70x16xf32>, memref<1x2x70x16xf32>, memref<1x2x70x16xf32>)
      : memref<1x2x70x16xf32>, memref<1x2x70x16xf32>, memref<1x2x70x16xf32>, memref<1x2x70x16xf32>, memref<1x2x70xf32>, memref<1x2x70x16xf32>
    mask_mod {
    ^bb0(%b: index, %h: index, %i: index, %j: index):
      %v = arith.cmpi sle, %j, %i : index
      fa.yield %v : i1
    }
  return
}
