// RUN: fa-opt %s --fa-lower-fa2-backward="block-r=32 block-c=64" | FileCheck %s

// With a score_mod (and its capture) the backward's score tile keeps the
// scores before the modification, which the softcap's derivative
// (fa.grad_scores) and the chain rule (fa.chain_score_mod, after it) read;
// the regions see the sequence, the query head and the unshifted
// positions (here bottom-right: the mask's offsets are shifted, the
// coordinates are not).
// CHECK-LABEL: func.func @score_mod
// CHECK: scf.forall (%[[SEQ:.*]], %[[HKV:.*]]) in (2, 2)
// CHECK: scf.for %[[KB:.*]] = 
// CHECK: %[[K0:.*]] = arith.muli %[[KB]], %c64{{.*}}
// The group's query heads (4 / 2), then the query blocks.
// CHECK: scf.for %[[MEMBER:.*]] = 
// CHECK: %[[H:.*]] = arith.addi %{{.*}}, %[[MEMBER]]
// CHECK: scf.for %[[QB:.*]] = 
// CHECK: %[[Q0:.*]] = arith.muli %[[QB]], %c32{{.*}}
// CHECK: fa.score_tile %{{.*}}, %{{.*}} -> %[[S:.*]], unmodified %[[X:[^ ]*]] at [%{{.*}}, %{{.*}}] coordinates(%[[SEQ]], %[[H]], %[[Q0]], %[[K0]]) captures(%{{.*}} : memref<4xf32>) {bottom_right, causal, scale = 1.250000e-01 : f32, softcap = 3.000000e+01 : f32}
// CHECK-SAME: score_mod {
// CHECK: math.fma
// CHECK: fa.recompute_probs %[[S]]
// CHECK: fa.grad_scores %[[S]], %{{.*}}, %[[X]] -> %[[DS:[^ ]*]] {softcap = 3.000000e+01 : f32}
// CHECK: fa.chain_score_mod %[[X]] -> %[[DS]] coordinates(%[[SEQ]], %[[H]], %[[Q0]], %[[K0]]) captures(%{{.*}} : memref<4xf32>)
// CHECK: math.fma
// CHECK: fa.grad_keys %[[DS]]
func.func @score_mod(%q: memref<2x4x77x64xf16>, %k: memref<2x2x131x64xf16>, %o: memref<2x4x77x64xf16>,
                     %lse: memref<2x4x77xf32>, %dk: memref<2x2x131x64xf16>, %slopes: memref<4xf32>) {
  fa.attention_backward %q, %k, %k, %o, %lse, %o captures(%slopes : memref<4xf32>)
      outs(%q, %dk, %dk : memref<2x4x77x64xf16>, memref<2x2x131x64xf16>, memref<2x2x131x64xf16>)
      {causal, bottom_right, softcap = 30.0 : f32, scale = 0.125 : f32}
      : memref<2x4x77x64xf16>, memref<2x2x131x64xf16>, memref<2x2x131x64xf16>, memref<2x4x77x64xf16>, memref<2x4x77xf32>, memref<2x4x77x64xf16>
    score_mod {
    ^bb0(%s: f32, %b: index, %h: index, %i: index, %j: index, %m: tensor<4xf32>):
      %slope = tensor.extract %m[%h] : tensor<4xf32>
      %d = arith.subi %j, %i : index
      %d64 = arith.index_cast %d : index to i64
      %df = arith.sitofp %d64 : i64 to f32
      %r = math.fma %slope, %df, %s : f32
      fa.yield %r : f32
    }
  return
}

// A mask_mod alone: the tile takes it with the coordinates; no unmodified
// tile and no chain rule.
// CHECK-LABEL: func.func @mask_mod
// CHECK: fa.score_tile %{{.*}}, %{{.*}} -> %{{[^,]*}} at [%{{.*}}, %{{.*}}] coordinates(
// CHECK-SAME: mask_mod {
// CHECK-NOT: fa.chain_score_mod
// CHECK: return
func.func @mask_mod(%q: memref<1x2x40x64xf32>, %lse: memref<1x2x40xf32>) {
  fa.attention_backward %q, %q, %q, %q, %lse, %q
      outs(%q, %q, %q : memref<1x2x40x64xf32>, memref<1x2x40x64xf32>, memref<1x2x40x64xf32>)
      : memref<1x2x40x64xf32>, memref<1x2x40x64xf32>, memref<1x2x40x64xf32>, memref<1x2x40x64xf32>, memref<1x2x40xf32>, memref<1x2x40x64xf32>
    mask_mod {
    ^bb0(%b: index, %h: index, %i: index, %j: index):
      %p = arith.constant 8 : index
      %prefix = arith.cmpi ult, %j, %p : index
      %causal = arith.cmpi ule, %j, %i : index
      %seen = arith.ori %prefix, %causal : i1
      fa.yield %seen : i1
    }
  return
}
