// RUN: fa-opt %s | fa-opt | FileCheck %s
// RUN: fa-opt %s --mlir-print-op-generic | fa-opt | FileCheck %s

// score_mod and mask_mod regions (FlexAttention's score and mask
// modifications) print and parse back, on fa.attention in both forms and
// on fa.score_tile; captures are values (tensors) inside the regions.

// ALiBi: score + slope_h (j - i), the slopes captured.
// CHECK-LABEL: func.func @alibi
// CHECK: fa.attention %{{.*}}, %{{.*}}, %{{.*}} captures(%{{.*}} : tensor<8xf32>) {causal}
// CHECK: score_mod {
// CHECK: ^bb0(%{{.*}}: f32, %{{.*}}: index, %[[H:.*]]: index, %{{.*}}: index, %{{.*}}: index, %[[SLOPES:.*]]: tensor<8xf32>):
// CHECK: tensor.extract %[[SLOPES]][%[[H]]] : tensor<8xf32>
// CHECK: fa.yield %{{.*}} : f32
func.func @alibi(%q: tensor<1x8x128x64xf16>, %slopes: tensor<8xf32>) -> tensor<1x8x128x64xf16> {
  %o = fa.attention %q, %q, %q captures(%slopes : tensor<8xf32>) {causal}
      : tensor<1x8x128x64xf16>, tensor<1x8x128x64xf16>, tensor<1x8x128x64xf16> -> tensor<1x8x128x64xf16>
    score_mod {
    ^bb0(%s: f32, %b: index, %h: index, %i: index, %j: index, %m: tensor<8xf32>):
      %slope = tensor.extract %m[%h] : tensor<8xf32>
      %d = arith.subi %j, %i : index
      %di = arith.index_cast %d : index to i64
      %df = arith.sitofp %di : i64 to f32
      %r = math.fma %slope, %df, %s : f32
      fa.yield %r : f32
    }
  return %o : tensor<1x8x128x64xf16>
}

// Document masking on a memref-form attention: its captures are memrefs,
// which the region reads as tensors of their values.
// CHECK-LABEL: func.func @documents
// CHECK: fa.attention %{{.*}}, %{{.*}}, %{{.*}} captures(%{{.*}}, %{{.*}} : memref<2x64xi32>, memref<2x64xi32>) outs(%{{.*}} : memref<2x4x64x32xf32>)
// CHECK: mask_mod {
// CHECK: ^bb0(%[[B:.*]]: index, %{{.*}}: index, %[[I:.*]]: index, %[[J:.*]]: index, %[[QD:.*]]: tensor<2x64xi32>, %[[KD:.*]]: tensor<2x64xi32>):
// CHECK: tensor.extract %[[QD]][%[[B]], %[[I]]]
// CHECK: tensor.extract %[[KD]][%[[B]], %[[J]]]
// CHECK: fa.yield %{{.*}} : i1
func.func @documents(%q: memref<2x4x64x32xf32>, %qd: memref<2x64xi32>, %kd: memref<2x64xi32>, %o: memref<2x4x64x32xf32>) {
  fa.attention %q, %q, %q captures(%qd, %kd : memref<2x64xi32>, memref<2x64xi32>) outs(%o : memref<2x4x64x32xf32>)
      : memref<2x4x64x32xf32>, memref<2x4x64x32xf32>, memref<2x4x64x32xf32>
    mask_mod {
    ^bb0(%b: index, %h: index, %i: index, %j: index, %x: tensor<2x64xi32>, %y: tensor<2x64xi32>):
      %a = tensor.extract %x[%b, %i] : tensor<2x64xi32>
      %c = tensor.extract %y[%b, %j] : tensor<2x64xi32>
      %same = arith.cmpi eq, %a, %c : i32
      fa.yield %same : i1
    }
  return
}

// Both regions on a score tile, with its coordinates (batch, head, first
// query row, first key).
// CHECK-LABEL: func.func @score_tile
// CHECK: fa.score_tile %{{.*}}, %{{.*}} -> %{{.*}} at [%{{.*}}, %{{.*}}] coordinates(%{{.*}}, %{{.*}}, %{{.*}}, %{{.*}}) captures(%{{.*}} : memref<4xf32>)
// CHECK: score_mod {
// CHECK: mask_mod {
func.func @score_tile(%q: memref<16x32xf32>, %k: memref<16x32xf32>, %s: memref<16x16xf32>, %i0: index, %b: index, %h: index, %slopes: memref<4xf32>) {
  fa.score_tile %q, %k -> %s at [%i0, %i0] coordinates(%b, %h, %i0, %i0) captures(%slopes : memref<4xf32>) {scale = 1.0 : f32}
      : memref<16x32xf32>, memref<16x32xf32> -> memref<16x16xf32>
    score_mod {
    ^bb0(%x: f32, %bb: index, %hh: index, %i: index, %j: index, %m: tensor<4xf32>):
      %slope = tensor.extract %m[%hh] : tensor<4xf32>
      %r = arith.addf %x, %slope : f32
      fa.yield %r : f32
    } mask_mod {
    ^bb0(%bb: index, %hh: index, %i: index, %j: index, %m: tensor<4xf32>):
      %keep = arith.cmpi ule, %j, %i : index
      fa.yield %keep : i1
    }
  return
}
