// RUN: fa-opt %s --split-input-file --fa-tile="block-r=32 block-c=32" --fa-block-quantize --verify-diagnostics | FileCheck %s

// fa-block-quantize when Q and K come from one fa.quantize (one buffer for
// both): with equal tiles it is quantised per block once and both read its
// descales.
// CHECK-LABEL: func @shared
// CHECK: %[[B:.*]] = memref.alloc() : memref<1x1x2xf32>
// CHECK: fa.quantize %{{.*}} -> %[[X8:[^,]*]], %[[B]] {block = 32 : i64}
// CHECK: fa.attention %[[X8]], %[[X8]], %[[V8:[^ ]*]] descale(%[[B]], %[[B]], %[[VD:[^ ]*]] : memref<1x1x2xf32>, memref<1x1x2xf32>, memref<f32>)
// CHECK: memref.dealloc %[[B]]
func.func @shared(%x: memref<1x1x64x8xf32>, %v: memref<1x1x64x8xf32>, %o: memref<1x1x64x8xf32>) {
  %x8 = memref.alloc() : memref<1x1x64x8xf8E4M3FN>
  %d = memref.alloc() : memref<f32>
  fa.quantize %x -> %x8, %d : memref<1x1x64x8xf32> -> memref<1x1x64x8xf8E4M3FN>, memref<f32>
  %v8 = memref.alloc() : memref<1x1x64x8xf8E4M3FN>
  %vd = memref.alloc() : memref<f32>
  fa.quantize %v -> %v8, %vd : memref<1x1x64x8xf32> -> memref<1x1x64x8xf8E4M3FN>, memref<f32>
  fa.attention %x8, %x8, %v8 descale(%d, %d, %vd : memref<f32>, memref<f32>, memref<f32>) outs(%o : memref<1x1x64x8xf32>) : memref<1x1x64x8xf8E4M3FN>, memref<1x1x64x8xf8E4M3FN>, memref<1x1x64x8xf8E4M3FN>
  return
}

// -----

// V from the same fa.quantize: blocking it would change V's quantisation.
func.func @shared_with_v(%x: memref<1x1x64x8xf32>, %o: memref<1x1x64x8xf32>) {
  %x8 = memref.alloc() : memref<1x1x64x8xf8E4M3FN>
  %d = memref.alloc() : memref<f32>
  fa.quantize %x -> %x8, %d : memref<1x1x64x8xf32> -> memref<1x1x64x8xf8E4M3FN>, memref<f32>
  // expected-error @+1 {{quantises V with the fa.quantize of Q or K; fa-block-quantize keeps V per tensor (quantise it separately)}}
  fa.attention %x8, %x8, %x8 descale(%d, %d, %d : memref<f32>, memref<f32>, memref<f32>) outs(%o : memref<1x1x64x8xf32>) : memref<1x1x64x8xf8E4M3FN>, memref<1x1x64x8xf8E4M3FN>, memref<1x1x64x8xf8E4M3FN>
  return
}
