// RUN: fa-opt %s | fa-opt | FileCheck %s
// RUN: fa-opt %s --mlir-print-op-generic | fa-opt | FileCheck %s

// CHECK-LABEL: func @attention_tensor
// CHECK: %{{.*}}:2 = fa.attention %{{.*}}, %{{.*}}, %{{.*}} {causal, scale = 1.250000e-01 : f32, softcap = 3.000000e+01 : f32, window = 128 : i64}
// CHECK-SAME: : tensor<2x8x128x64xf16>, tensor<2x2x128x64xf16>, tensor<2x2x128x32xf16> -> tensor<2x8x128x32xf16>, tensor<2x8x128xf32>
func.func @attention_tensor(%q: tensor<2x8x128x64xf16>, %k: tensor<2x2x128x64xf16>,
                            %v: tensor<2x2x128x32xf16>) -> (tensor<2x8x128x32xf16>, tensor<2x8x128xf32>) {
  %o, %lse = fa.attention %q, %k, %v {causal, scale = 0.125 : f32, window = 128 : i64, softcap = 30.0 : f32}
      : tensor<2x8x128x64xf16>, tensor<2x2x128x64xf16>, tensor<2x2x128x32xf16>
      -> tensor<2x8x128x32xf16>, tensor<2x8x128xf32>
  return %o, %lse : tensor<2x8x128x32xf16>, tensor<2x8x128xf32>
}

// CHECK-LABEL: func @attention_tensor_dynamic
// CHECK: fa.attention %{{.*}}, %{{.*}}, %{{.*}} : tensor<?x?x?x128xbf16>, tensor<?x?x?x128xbf16>, tensor<?x?x?x128xbf16> -> tensor<?x?x?x128xbf16>
func.func @attention_tensor_dynamic(%q: tensor<?x?x?x128xbf16>, %k: tensor<?x?x?x128xbf16>,
                                    %v: tensor<?x?x?x128xbf16>) -> tensor<?x?x?x128xbf16> {
  %o = fa.attention %q, %k, %v : tensor<?x?x?x128xbf16>, tensor<?x?x?x128xbf16>, tensor<?x?x?x128xbf16> -> tensor<?x?x?x128xbf16>
  return %o : tensor<?x?x?x128xbf16>
}

// CHECK-LABEL: func @attention_memref
// CHECK: fa.attention %{{.*}}, %{{.*}}, %{{.*}} outs(%{{.*}}, %{{.*}} : memref<1x4x77x64xf32>, memref<1x4x77xf32>) {block_c = 64 : i64, block_r = 32 : i64}
// CHECK-SAME: : memref<1x4x77x64xf32>, memref<1x4x131x64xf32>, memref<1x4x131x64xf32>
func.func @attention_memref(%q: memref<1x4x77x64xf32>, %k: memref<1x4x131x64xf32>,
                            %v: memref<1x4x131x64xf32>, %o: memref<1x4x77x64xf32>,
                            %lse: memref<1x4x77xf32>) {
  fa.attention %q, %k, %v outs(%o, %lse : memref<1x4x77x64xf32>, memref<1x4x77xf32>) {block_r = 32 : i64, block_c = 64 : i64}
      : memref<1x4x77x64xf32>, memref<1x4x131x64xf32>, memref<1x4x131x64xf32>
  return
}

// CHECK-LABEL: func @tile_ops
func.func @tile_ops(%q: memref<?x64xf16, strided<[64, 1], offset: ?>>,
                    %k: memref<?x64xf16, strided<[64, 1], offset: ?>>,
                    %v: memref<?x32xf16, strided<[32, 1], offset: ?>>,
                    %s: memref<16x32xf32>, %m: memref<16xf32>, %l: memref<16xf32>,
                    %alpha: memref<16xf32>, %acc: memref<16x32xf32>,
                    %lse: memref<?xf32, strided<[1], offset: ?>>, %i: index, %j: index) {
  // CHECK: fa.init_state %{{.*}}, %{{.*}}, %{{.*}} : memref<16xf32>, memref<16xf32>, memref<16x32xf32>
  fa.init_state %m, %l, %acc : memref<16xf32>, memref<16xf32>, memref<16x32xf32>
  // CHECK: fa.score_tile %{{.*}}, %{{.*}} -> %{{.*}} at [%{{.*}}, %{{.*}}] {causal, scale = 1.250000e-01 : f32, softcap = 5.000000e+01 : f32, window = 8 : i64}
  fa.score_tile %q, %k -> %s at [%i, %j] {causal, scale = 0.125 : f32, window = 8 : i64, softcap = 50.0 : f32}
      : memref<?x64xf16, strided<[64, 1], offset: ?>>, memref<?x64xf16, strided<[64, 1], offset: ?>> -> memref<16x32xf32>
  // CHECK: fa.softmax_update %{{.*}}, %{{.*}}, %{{.*}} -> %{{.*}} : memref<16x32xf32>, memref<16xf32>, memref<16xf32> -> memref<16xf32>
  fa.softmax_update %s, %m, %l -> %alpha : memref<16x32xf32>, memref<16xf32>, memref<16xf32> -> memref<16xf32>
  // CHECK: fa.rescale %{{.*}}, %{{.*}} : memref<16x32xf32>, memref<16xf32>
  fa.rescale %acc, %alpha : memref<16x32xf32>, memref<16xf32>
  // CHECK: fa.pv_accumulate %{{.*}}, %{{.*}} -> %{{.*}} : memref<16x32xf32>, memref<?x32xf16, strided<[32, 1], offset: ?>> -> memref<16x32xf32>
  fa.pv_accumulate %s, %v -> %acc : memref<16x32xf32>, memref<?x32xf16, strided<[32, 1], offset: ?>> -> memref<16x32xf32>
  // CHECK: fa.normalize %{{.*}}, %{{.*}} : memref<16x32xf32>, memref<16xf32>
  fa.normalize %acc, %l : memref<16x32xf32>, memref<16xf32>
  // CHECK: fa.logsumexp %{{.*}}, %{{.*}} -> %{{.*}} : memref<16xf32>, memref<16xf32> -> memref<?xf32, strided<[1], offset: ?>>
  fa.logsumexp %m, %l -> %lse : memref<16xf32>, memref<16xf32> -> memref<?xf32, strided<[1], offset: ?>>
  return
}

// CHECK-LABEL: func @fa4_ops
// CHECK: %{{.*}} = fa.conditional_softmax_update %{{.*}}, %{{.*}}, %{{.*}} -> %{{.*}} counters(%{{.*}} : memref<3xf64>) {exp2_poly_degree = 3 : i64, exp2_poly_period = 8 : i64, threshold = 8.000000e+00 : f32}
// CHECK: fa.softmax_update %{{.*}}, %{{.*}}, %{{.*}} -> %{{.*}} {exp2_poly_degree = 4 : i64, exp2_poly_period = 1 : i64}
func.func @fa4_ops(%s: memref<16x32xf32>, %m: memref<16xf32>, %l: memref<16xf32>, %a: memref<16xf32>,
                   %c: memref<3xf64>) -> i1 {
  %moved = fa.conditional_softmax_update %s, %m, %l -> %a counters(%c : memref<3xf64>)
      {threshold = 8.0 : f32, exp2_poly_degree = 3 : i64, exp2_poly_period = 8 : i64}
      : memref<16x32xf32>, memref<16xf32>, memref<16xf32> -> memref<16xf32>
  fa.softmax_update %s, %m, %l -> %a {exp2_poly_degree = 4 : i64, exp2_poly_period = 1 : i64}
      : memref<16x32xf32>, memref<16xf32>, memref<16xf32> -> memref<16xf32>
  return %moved : i1
}

// CHECK-LABEL: func @merge
// CHECK: fa.merge_partials %{{.*}}, %{{.*}} -> %{{.*}}, %{{.*}} : memref<4x?x128xf32>, memref<4x?xf32> -> memref<?x128xbf16>, memref<?xf32>
func.func @merge(%po: memref<4x?x128xf32>, %pl: memref<4x?xf32>, %o: memref<?x128xbf16>, %l: memref<?xf32>) {
  fa.merge_partials %po, %pl -> %o, %l : memref<4x?x128xf32>, memref<4x?xf32> -> memref<?x128xbf16>, memref<?xf32>
  return
}
