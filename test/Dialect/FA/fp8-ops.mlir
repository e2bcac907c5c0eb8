// RUN: fa-opt %s | fa-opt | FileCheck %s

// The fp8 forms print and parse back: fa.attention with descales (per
// tensor, [B, Hkv], per tile), fa.quantize, fa.hadamard and the tile ops'
// descale and probs_scale.

// CHECK-LABEL: func @attention_e4m3
// CHECK: fa.attention %{{.*}}, %{{.*}}, %{{.*}} descale(%{{.*}}, %{{.*}}, %{{.*}} : memref<f32>, memref<f32>, memref<f32>) outs(%{{.*}} : memref<1x4x77x64xbf16>) {causal}
func.func @attention_e4m3(%q: memref<1x4x77x64xf8E4M3FN>, %k: memref<1x2x131x64xf8E4M3FN>, %v: memref<1x2x131x64xf8E4M3FN>, %o: memref<1x4x77x64xbf16>, %qd: memref<f32>, %kd: memref<f32>, %vd: memref<f32>) {
  fa.attention %q, %k, %v descale(%qd, %kd, %vd : memref<f32>, memref<f32>, memref<f32>) outs(%o : memref<1x4x77x64xbf16>) {causal} : memref<1x4x77x64xf8E4M3FN>, memref<1x2x131x64xf8E4M3FN>, memref<1x2x131x64xf8E4M3FN>
  return
}

// CHECK-LABEL: func @attention_e4m3_tensor
// CHECK: fa.attention %{{.*}}, %{{.*}}, %{{.*}} descale(%{{.*}}, %{{.*}}, %{{.*}} : tensor<2x2xf32>, tensor<2x2xf32>, tensor<2x2xf32>) : {{.*}} -> tensor<2x4x128x64xf16>, tensor<2x4x128xf32>
func.func @attention_e4m3_tensor(%q: tensor<2x4x128x64xf8E4M3FN>, %k: tensor<2x2x128x64xf8E4M3FN>, %v: tensor<2x2x128x64xf8E4M3FN>, %d: tensor<2x2xf32>) -> (tensor<2x4x128x64xf16>, tensor<2x4x128xf32>) {
  %o, %lse = fa.attention %q, %k, %v descale(%d, %d, %d : tensor<2x2xf32>, tensor<2x2xf32>, tensor<2x2xf32>) : tensor<2x4x128x64xf8E4M3FN>, tensor<2x2x128x64xf8E4M3FN>, tensor<2x2x128x64xf8E4M3FN> -> tensor<2x4x128x64xf16>, tensor<2x4x128xf32>
  return %o, %lse : tensor<2x4x128x64xf16>, tensor<2x4x128xf32>
}

// CHECK-LABEL: func @per_block
// CHECK: fa.attention {{.*}} descale(%{{.*}}, %{{.*}}, %{{.*}} : memref<1x2x3xf32>, memref<1x2x2xf32>, memref<f32>)
func.func @per_block(%q: memref<1x2x70x32xf8E4M3FN>, %k: memref<1x2x64x32xf8E4M3FN>, %v: memref<1x2x64x32xf8E4M3FN>, %o: memref<1x2x70x32xf32>, %qd: memref<1x2x3xf32>, %kd: memref<1x2x2xf32>, %vd: memref<f32>) {
  fa.attention %q, %k, %v descale(%qd, %kd, %vd : memref<1x2x3xf32>, memref<1x2x2xf32>, memref<f32>) outs(%o : memref<1x2x70x32xf32>) {block_r = 32 : i64, block_c = 32 : i64} : memref<1x2x70x32xf8E4M3FN>, memref<1x2x64x32xf8E4M3FN>, memref<1x2x64x32xf8E4M3FN>
  return
}

// CHECK-LABEL: func @prepare
// CHECK: fa.hadamard %{{.*}} -> %{{.*}} {signs = array<i1: false, true, true, false>} : memref<1x2x70x4xf16> -> memref<1x2x70x4xf32>
// CHECK: fa.quantize %{{.*}} -> %{{.*}}, %{{.*}} {block = 32 : i64} : memref<1x2x70x4xf32> -> memref<1x2x70x4xf8E4M3FN>, memref<1x2x3xf32>
// CHECK: fa.quantize %{{.*}} -> %{{.*}}, %{{.*}} : memref<1x2x70x4xf32> -> memref<1x2x70x4xf8E4M3FN>, memref<f32>
func.func @prepare(%x: memref<1x2x70x4xf16>, %r: memref<1x2x70x4xf32>, %y: memref<1x2x70x4xf8E4M3FN>, %b: memref<1x2x3xf32>, %t: memref<f32>) {
  fa.hadamard %x -> %r {signs = array<i1: false, true, true, false>} : memref<1x2x70x4xf16> -> memref<1x2x70x4xf32>
  fa.quantize %r -> %y, %b {block = 32 : i64} : memref<1x2x70x4xf32> -> memref<1x2x70x4xf8E4M3FN>, memref<1x2x3xf32>
  fa.quantize %r -> %y, %t : memref<1x2x70x4xf32> -> memref<1x2x70x4xf8E4M3FN>, memref<f32>
  return
}

// CHECK-LABEL: func @tiles
// CHECK: fa.score_tile %{{.*}}, %{{.*}} -> %{{.*}} at [%{{.*}}, %{{.*}}] descale %{{.*}} {scale = 1.250000e-01 : f32}
// CHECK: fa.pv_accumulate %{{.*}}, %{{.*}} -> %{{.*}} descale %{{.*}} {probs_scale = 2.560000e+02 : f32}
func.func @tiles(%q: memref<16x64xf8E4M3FN>, %k: memref<32x64xf8E4M3FN>, %s: memref<16x32xf32>, %v: memref<32x64xf8E4M3FN>, %o: memref<16x64xf32>, %i: index, %d: f32) {
  fa.score_tile %q, %k -> %s at [%i, %i] descale %d {scale = 0.125 : f32} : memref<16x64xf8E4M3FN>, memref<32x64xf8E4M3FN> -> memref<16x32xf32>
  fa.pv_accumulate %s, %v -> %o descale %d {probs_scale = 256.0 : f32} : memref<16x32xf32>, memref<32x64xf8E4M3FN> -> memref<16x64xf32>
  return
}

// An e4m3 KV cache beside a 16-bit Q: K's and V's descales (per K/V head).
// CHECK-LABEL: func @fp8_key_values
// CHECK: fa.attention %{{.*}}, %{{.*}}, %{{.*}} descale(%{{.*}}, %{{.*}} : memref<2x2xf32>, memref<2x2xf32>) kv_lengths(%{{.*}} : memref<2xi32>) outs(%{{.*}} : memref<2x8x1x64xf16>) : memref<2x8x1x64xf16>, memref<2x2x256x64xf8E4M3FN>, memref<2x2x256x64xf8E4M3FN>
func.func @fp8_key_values(%q: memref<2x8x1x64xf16>, %k: memref<2x2x256x64xf8E4M3FN>, %v: memref<2x2x256x64xf8E4M3FN>, %kd: memref<2x2xf32>, %vd: memref<2x2xf32>, %lens: memref<2xi32>, %o: memref<2x8x1x64xf16>) {
  fa.attention %q, %k, %v descale(%kd, %vd : memref<2x2xf32>, memref<2x2xf32>) kv_lengths(%lens : memref<2xi32>) outs(%o : memref<2x8x1x64xf16>) : memref<2x8x1x64xf16>, memref<2x2x256x64xf8E4M3FN>, memref<2x2x256x64xf8E4M3FN>
  return
}
