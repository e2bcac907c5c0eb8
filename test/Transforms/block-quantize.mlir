// RUN: fa-opt %s --split-input-file --fa-quantize-fp8 --fa-tile="block-r=32 block-c=64" --fa-block-quantize --verify-diagnostics | FileCheck %s
// RUN: fa-opt %s --split-input-file --fa-quantize-fp8 --fa-tile="block-r=32 block-c=64" --fa-block-quantize --fa-lower-fa2 --verify-diagnostics | FileCheck %s --check-prefix=LOWER

// fa-block-quantize: Q per block_r rows and K per block_c rows of each
// (batch, head), [B, H, ceil(N / tile)] descales (70 rows / 32 = 3 blocks,
// 90 / 64 = 2); V stays per tensor; the per-tensor descales are gone.
// CHECK-LABEL: func @attention
// CHECK:      %[[QD:.*]] = memref.alloc() : memref<1x2x3xf32>
// CHECK:      fa.quantize %{{.*}} -> %[[Q8:[^,]*]], %[[QD]] {block = 32 : i64} : memref<1x2x70x8xf32> -> memref<1x2x70x8xf8E4M3FN>, memref<1x2x3xf32>
// CHECK:      %[[KD:.*]] = memref.alloc() : memref<1x1x2xf32>
// CHECK:      fa.quantize %{{.*}} -> %[[K8:[^,]*]], %[[KD]] {block = 64 : i64}
// CHECK:      fa.quantize %{{.*}} -> %[[V8:[^,]*]], %[[VD:.*]] : memref<1x1x90x8xf32> -> memref<1x1x90x8xf8E4M3FN>, memref<f32>
// CHECK:      fa.attention %[[Q8]], %[[K8]], %[[V8]] descale(%[[QD]], %[[KD]], %[[VD]] : memref<1x2x3xf32>, memref<1x1x2xf32>, memref<f32>)
// CHECK-NOT:  memref.alloc() : memref<f32>
// CHECK-COUNT-6: memref.dealloc
// CHECK-NEXT: return

// Lowered, a score tile's descale is one scalar: Q block i's descale (per
// query head h) times K block j's (per K/V head), folded into its scale.
// LOWER-LABEL: func @attention
// LOWER:      scf.forall (%[[B:.*]], %[[H:.*]], %[[I:.*]]) in (1, 2, 3)
// LOWER:        %[[KVH:.*]] = arith.divui %[[H]], %c2
// LOWER:        %[[QDI:.*]] = memref.load %{{.*}}[%[[B]], %[[H]], %[[I]]] : memref<1x2x3xf32>
// LOWER:        %[[VDS:.*]] = memref.load %{{.*}}[] : memref<f32>
// LOWER:        scf.for %[[J:.*]] =
// LOWER:          %[[KDJ:.*]] = memref.load %{{.*}}[%[[B]], %[[KVH]], %[[J]]] : memref<1x1x2xf32>
// LOWER:          %[[D:.*]] = arith.mulf %[[QDI]], %[[KDJ]] : f32
// LOWER:          fa.score_tile {{.*}} descale %[[D]]
// LOWER:          fa.pv_accumulate {{.*}} descale %[[VDS]] :
func.func @attention(%q: memref<1x2x70x8xf32>, %k: memref<1x1x90x8xf32>, %v: memref<1x1x90x8xf32>, %o: memref<1x2x70x8xf32>) {
  fa.attention %q, %k, %v outs(%o : memref<1x2x70x8xf32>) {causal} : memref<1x2x70x8xf32>, memref<1x1x90x8xf32>, memref<1x1x90x8xf32>
  return
}

// -----

func.func @prequantised(%q: memref<1x1x8x8xf8E4M3FN>, %o: memref<1x1x8x8xf32>, %d: memref<f32>) {
  // expected-error @+1 {{has e4m3 Q or K not made by fa.quantize here; fa-block-quantize changes how they are quantised (run fa-quantize-fp8 first)}}
  fa.attention %q, %q, %q descale(%d, %d, %d : memref<f32>, memref<f32>, memref<f32>) outs(%o : memref<1x1x8x8xf32>) : memref<1x1x8x8xf8E4M3FN>, memref<1x1x8x8xf8E4M3FN>, memref<1x1x8x8xf8E4M3FN>
  return
}

// -----

// Q and K from one fa.quantize cannot be blocked by both block_r = 32 and
// block_c = 64 (equal tiles: block-quantize-shared.mlir).
func.func @shared_unequal_tiles(%x: memref<1x1x64x8xf32>, %v: memref<1x1x64x8xf8E4M3FN>, %vd: memref<f32>, %o: memref<1x1x64x8xf32>) {
  %x8 = memref.alloc() : memref<1x1x64x8xf8E4M3FN>
  %d = memref.alloc() : memref<f32>
  fa.quantize %x -> %x8, %d : memref<1x1x64x8xf32> -> memref<1x1x64x8xf8E4M3FN>, memref<f32>
  // expected-error @+1 {{quantises Q and K with one fa.quantize, whose blocks of 32 rows cannot be both tiles (block_r = 32, block_c = 64)}}
  fa.attention %x8, %x8, %v descale(%d, %d, %vd : memref<f32>, memref<f32>, memref<f32>) outs(%o : memref<1x1x64x8xf32>) : memref<1x1x64x8xf8E4M3FN>, memref<1x1x64x8xf8E4M3FN>, memref<1x1x64x8xf8E4M3FN>
  return
}
