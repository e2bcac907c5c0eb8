// RUN: fa-opt %s --split-input-file --fa-quantize-fp8 --fa-incoherent-processing="seed=7" --verify-diagnostics | FileCheck %s
// RUN: fa-opt %s --split-input-file --fa-quantize-fp8 --fa-incoherent-processing="seed=8" --verify-diagnostics | FileCheck %s --check-prefix=SEED8

// fa-incoherent-processing: Q and K go through one fa.hadamard each, with
// the same signs (Q M (K M)^T = Q K^T needs the same M on both sides),
// before their quantisation; V is not transformed; the f32 rotated copies
// are freed after the attention.
// CHECK-LABEL: func @attention
// CHECK-SAME: (%[[Q:.*]]: memref<1x2x70x8xf16>, %[[K:.*]]: memref<1x1x90x8xf16>, %[[V:.*]]: memref<1x1x90x8xf16>
// CHECK:      %[[QR:.*]] = memref.alloc() : memref<1x2x70x8xf32>
// CHECK:      fa.hadamard %[[Q]] -> %[[QR]] {signs = array<i1: [[SIGNS:.*]]>} : memref<1x2x70x8xf16> -> memref<1x2x70x8xf32>
// CHECK:      fa.quantize %[[QR]] -> %[[Q8:[^,]*]], %{{.*}} :
// CHECK:      %[[KR:.*]] = memref.alloc() : memref<1x1x90x8xf32>
// CHECK:      fa.hadamard %[[K]] -> %[[KR]] {signs = array<i1: [[SIGNS]]>}
// CHECK:      fa.quantize %[[KR]] -> %[[K8:[^,]*]], %{{.*}} :
// CHECK-NOT:  fa.hadamard
// CHECK:      fa.quantize %[[V]] ->
// CHECK:      fa.attention %[[Q8]], %[[K8]],
// CHECK-DAG:  memref.dealloc %[[QR]]
// CHECK-DAG:  memref.dealloc %[[KR]]
// Another seed, other signs.
// SEED8:      fa.hadamard %{{.*}} -> %{{.*}} {signs = array<i1: [[SIGNS8:.*]]>}
// SEED8:      fa.hadamard %{{.*}} -> %{{.*}} {signs = array<i1: [[SIGNS8]]>}
func.func @attention(%q: memref<1x2x70x8xf16>, %k: memref<1x1x90x8xf16>, %v: memref<1x1x90x8xf16>, %o: memref<1x2x70x8xf16>) {
  fa.attention %q, %k, %v outs(%o : memref<1x2x70x8xf16>) : memref<1x2x70x8xf16>, memref<1x1x90x8xf16>, memref<1x1x90x8xf16>
  return
}

// -----

// H_D exists for D a power of two only.
func.func @d_not_power_of_two(%q: memref<1x1x8x12xf32>, %o: memref<1x1x8x12xf32>) {
  // expected-error @+1 {{fa-incoherent-processing: expected the head dim D to be a power of two for the Hadamard transform, got 12}}
  fa.attention %q, %q, %q outs(%o : memref<1x1x8x12xf32>) : memref<1x1x8x12xf32>, memref<1x1x8x12xf32>, memref<1x1x8x12xf32>
  return
}

// -----

// Inputs quantised elsewhere: nothing to transform before.
func.func @prequantised(%q: memref<1x1x8x8xf8E4M3FN>, %o: memref<1x1x8x8xf32>, %d: memref<f32>) {
  // expected-error @+1 {{has e4m3 Q or K not made by fa.quantize here; fa-incoherent-processing transforms them before quantisation (run fa-quantize-fp8 first)}}
  fa.attention %q, %q, %q descale(%d, %d, %d : memref<f32>, memref<f32>, memref<f32>) outs(%o : memref<1x1x8x8xf32>) : memref<1x1x8x8xf8E4M3FN>, memref<1x1x8x8xf8E4M3FN>, memref<1x1x8x8xf8E4M3FN>
  return
}

// -----

// Q and K from one fa.quantize (one buffer for both): one transform.
// CHECK-LABEL: func @shared
// CHECK-COUNT-1: fa.hadamard
// CHECK-NOT: fa.hadamard
func.func @shared(%x: memref<1x1x8x8xf32>, %v: memref<1x1x8x8xf8E4M3FN>, %vd: memref<f32>, %o: memref<1x1x8x8xf32>) {
  %x8 = memref.alloc() : memref<1x1x8x8xf8E4M3FN>
  %d = memref.alloc() : memref<f32>
  fa.quantize %x -> %x8, %d : memref<1x1x8x8xf32> -> memref<1x1x8x8xf8E4M3FN>, memref<f32>
  fa.attention %x8, %x8, %v descale(%d, %d, %vd : memref<f32>, memref<f32>, memref<f32>) outs(%o : memref<1x1x8x8xf32>) : memref<1x1x8x8xf8E4M3FN>, memref<1x1x8x8xf8E4M3FN>, memref<1x1x8x8xf8E4M3FN>
  return
}

// -----

// V from the same fa.quantize: transforming it would change O.
func.func @shared_with_v(%x: memref<1x1x8x8xf32>, %o: memref<1x1x8x8xf32>) {
  %x8 = memref.alloc() : memref<1x1x8x8xf8E4M3FN>
  %d = memref.alloc() : memref<f32>
  fa.quantize %x -> %x8, %d : memref<1x1x8x8xf32> -> memref<1x1x8x8xf8E4M3FN>, memref<f32>
  // expected-error @+1 {{quantises V with the fa.quantize of Q or K; fa-incoherent-processing transforms Q and K only (quantise V separately)}}
  fa.attention %x8, %x8, %x8 descale(%d, %d, %d : memref<f32>, memref<f32>, memref<f32>) outs(%o : memref<1x1x8x8xf32>) : memref<1x1x8x8xf8E4M3FN>, memref<1x1x8x8xf8E4M3FN>, memref<1x1x8x8xf8E4M3FN>
  return
}
