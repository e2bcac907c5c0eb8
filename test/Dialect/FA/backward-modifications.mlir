// RUN: fa-opt %s | fa-opt | FileCheck %s
// RUN: fa-opt %s --mlir-print-op-generic | fa-opt | FileCheck %s

// The backward takes the forward's score_mod and mask_mod (and captures);
// the score tile keeps the scores before score_mod (unmodified), and
// fa.chain_score_mod multiplies dS by the score_mod's derivative there.
// CHECK-LABEL: func.func @alibi_documents
// CHECK: fa.attention_backward {{.*}} captures(%{{.*}}, %{{.*}} : memref<4xf32>, memref<1x77xi32>) outs(
// CHECK: score_mod {
// CHECK: math.fma
// CHECK: fa.yield %{{.*}} : f32
// CHECK: } mask_mod {
// CHECK: arith.cmpi eq
// CHECK: fa.yield %{{.*}} : i1
func.func @alibi_documents(%q: memref<1x4x77x64xf32>, %k: memref<1x2x77x64xf32>,
                           %lse: memref<1x4x77xf32>, %slopes: memref<4xf32>,
                           %docs: memref<1x77xi32>) {
  fa.attention_backward %q, %k, %k, %q, %lse, %q captures(%slopes, %docs : memref<4xf32>, memref<1x77xi32>)
      outs(%q, %k, %k : memref<1x4x77x64xf32>, memref<1x2x77x64xf32>, memref<1x2x77x64xf32>) {causal}
      : memref<1x4x77x64xf32>, memref<1x2x77x64xf32>, memref<1x2x77x64xf32>, memref<1x4x77x64xf32>, memref<1x4x77xf32>, memref<1x4x77x64xf32>
    score_mod {
    ^bb0(%s: f32, %b: index, %h: index, %i: index, %j: index, %m: tensor<4xf32>, %d: tensor<1x77xi32>):
      %slope = tensor.extract %m[%h] : tensor<4xf32>
      %i64 = arith.index_cast %i : index to i64
      %if = arith.sitofp %i64 : i64 to f32
      %r = math.fma %slope, %if, %s : f32
      fa.yield %r : f32
    } mask_mod {
    ^bb0(%b: index, %h: index, %i: index, %j: index, %m: tensor<4xf32>, %d: tensor<1x77xi32>):
      %x = tensor.extract %d[%b, %i] : tensor<1x77xi32>
      %y = tensor.extract %d[%b, %j] : tensor<1x77xi32>
      %same = arith.cmpi eq, %x, %y : i32
      fa.yield %same : i1
    }
  return
}

// CHECK-LABEL: func.func @tiles
// CHECK: fa.score_tile %{{.*}}, %{{.*}} -> %[[S:.*]], unmodified %[[X:.*]] at [%{{.*}}, %{{.*}}] coordinates(%{{.*}}, %{{.*}}, %{{.*}}, %{{.*}}) {scale = 1.250000e-01 : f32} : memref<?x64xf16>, memref<?x64xf16> -> memref<32x64xf32>, memref<32x64xf32> score_mod {
// CHECK: math.tanh
// CHECK: fa.chain_score_mod %[[X]] -> %{{.*}} coordinates(%{{.*}}, %{{.*}}, %{{.*}}, %{{.*}}) : memref<32x64xf32> -> memref<32x64xf32> score_mod {
// CHECK: math.tanh
func.func @tiles(%rows: memref<?x64xf16>, %s: memref<32x64xf32>, %x: memref<32x64xf32>,
                 %ds: memref<32x64xf32>, %i: index) {
  fa.score_tile %rows, %rows -> %s, unmodified %x at [%i, %i] coordinates(%i, %i, %i, %i)
      {scale = 0.125 : f32} : memref<?x64xf16>, memref<?x64xf16> -> memref<32x64xf32>, memref<32x64xf32>
    score_mod {
    ^bb0(%a: f32, %b: index, %h: index, %q: index, %k: index):
      %t = math.tanh %a : f32
      fa.yield %t : f32
    }
  fa.chain_score_mod %x -> %ds coordinates(%i, %i, %i, %i) : memref<32x64xf32> -> memref<32x64xf32>
    score_mod {
    ^bb0(%a: f32, %b: index, %h: index, %q: index, %k: index):
      %t = math.tanh %a : f32
      fa.yield %t : f32
    }
  return
}

// Off the score's path any op may be used: erf of a position is a constant
// of the chain rule.
// CHECK-LABEL: func.func @off_path
// CHECK: math.erf
func.func @off_path(%q: memref<1x4x8x64xf32>, %l: memref<1x4x8xf32>) {
  fa.attention_backward %q, %q, %q, %q, %l, %q outs(%q, %q, %q : memref<1x4x8x64xf32>, memref<1x4x8x64xf32>, memref<1x4x8x64xf32>)
      : memref<1x4x8x64xf32>, memref<1x4x8x64xf32>, memref<1x4x8x64xf32>, memref<1x4x8x64xf32>, memref<1x4x8xf32>, memref<1x4x8x64xf32>
    score_mod {
    ^bb0(%s: f32, %b: index, %h: index, %i: index, %j: index):
      %i64 = arith.index_cast %i : index to i64
      %f = arith.sitofp %i64 : i64 to f32
      %e = math.erf %f : f32
      %r = arith.addf %s, %e : f32
      fa.yield %r : f32
    }
  return
}
