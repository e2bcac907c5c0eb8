// RUN: fa-opt %s --fa-tile="block-r=16 block-c=32" --fa-lower-fa2 --cse | FileCheck %s
// RUN: fa-opt %s --fa-tile="block-r=16 block-c=32" --fa-lower-fa1 --cse | FileCheck %s --check-prefix=FA1

// The loop orders on e4m3 inputs with FlashAttention-3's [B, Hkv] descales:
// each tile's descale is loaded at (batch, K/V head) -- the query head h
// reads group h / (Hq / Hkv) -- and S's is q_descale * k_descale, V's
// multiplies P V. The e4m3 tiles are copied as e4m3 (widened in the tile
// ops' lowering, not here).
// CHECK-LABEL: func @attention
// CHECK-SAME: %[[QD:[^:]*]]: memref<2x2xf32>, %[[KD:[^:]*]]: memref<2x2xf32>, %[[VD:[^:]*]]: memref<2x2xf32>)
// CHECK:      scf.forall (%[[B:.*]], %[[H:.*]], %{{.*}}) in (2, 4, 3)
// CHECK:        %[[G:.*]] = arith.divui %[[H]], %c2
// CHECK:        memref.alloc() : memref<16x32xf8E4M3FN>
// CHECK:        %[[QDV:.*]] = memref.load %[[QD]][%[[B]], %[[G]]] : memref<2x2xf32>
// CHECK:        %[[VDV:.*]] = memref.load %[[VD]][%[[B]], %[[G]]] : memref<2x2xf32>
// CHECK:        scf.for
// CHECK:          %[[KDV:.*]] = memref.load %[[KD]][%[[B]], %[[G]]] : memref<2x2xf32>
// CHECK:          %[[S:.*]] = arith.mulf %[[QDV]], %[[KDV]] : f32
// CHECK:          fa.score_tile {{.*}} descale %[[S]] {scale = 0.176776692 : f32}
// CHECK:          fa.pv_accumulate {{.*}} descale %[[VDV]] : memref<16x32xf32>, memref<?x64xf8E4M3FN
// CHECK-NOT:      probs_scale
// The same descales with the K/V-outer loop order: the K one in the outer
// loop, the Q one in the inner loop.
// FA1-LABEL: func @attention
// FA1-SAME: %[[QD:[^:]*]]: memref<2x2xf32>, %[[KD:[^:]*]]: memref<2x2xf32>, %[[VD:[^:]*]]: memref<2x2xf32>)
// FA1:      memref.load %[[VD]]
// FA1:      scf.for
// FA1:        %[[KDV:.*]] = memref.load %[[KD]][%{{.*}}, %{{.*}}] : memref<2x2xf32>
// FA1:        scf.for
// FA1:          %[[QDV:.*]] = memref.load %[[QD]][%{{.*}}, %{{.*}}] : memref<2x2xf32>
// FA1:          arith.mulf %[[QDV]], %[[KDV]] : f32
func.func @attention(%q: memref<2x4x40x32xf8E4M3FN>, %k: memref<2x2x70x32xf8E4M3FN>, %v: memref<2x2x70x64xf8E4M3FN>, %o: memref<2x4x40x64xf16>, %qd: memref<2x2xf32>, %kd: memref<2x2xf32>, %vd: memref<2x2xf32>) {
  fa.attention %q, %k, %v descale(%qd, %kd, %vd : memref<2x2xf32>, memref<2x2xf32>, memref<2x2xf32>) outs(%o : memref<2x4x40x64xf16>) : memref<2x4x40x32xf8E4M3FN>, memref<2x2x70x32xf8E4M3FN>, memref<2x2x70x64xf8E4M3FN>
  return
}

// An e4m3 KV cache beside an f16 Q: the K/V tiles are copied as e4m3, the
// Q tile as f16; S's descale is K's alone, V's multiplies P V.
// CHECK-LABEL: func @fp8_key_values
// CHECK-SAME: %[[KD:[^:]*]]: memref<2x2xf32>, %[[VD:[^:]*]]: memref<f32>)
// CHECK:      scf.forall (%[[B:.*]], %[[H:.*]], %{{.*}}) in (2, 4, 1)
// CHECK:        %[[G:.*]] = arith.divui %[[H]], %c2
// CHECK:        memref.alloc() : memref<1x32xf16>
// CHECK:        memref.alloc() : memref<32x32xf8E4M3FN>
// CHECK:        %[[VDV:.*]] = memref.load %[[VD]][] : memref<f32>
// CHECK:        scf.for
// CHECK:          %[[KDV:.*]] = memref.load %[[KD]][%[[B]], %[[G]]] : memref<2x2xf32>
// CHECK-NOT:      arith.mulf
// CHECK:          fa.score_tile {{.*}} descale %[[KDV]] {{.*}} : memref<?x32xf16{{.*}}>, memref<?x32xf8E4M3FN
// CHECK:          fa.pv_accumulate {{.*}} descale %[[VDV]] : memref<1x32xf32>, memref<?x64xf8E4M3FN
func.func @fp8_key_values(%q: memref<2x4x1x32xf16>, %k: memref<2x2x70x32xf8E4M3FN>, %v: memref<2x2x70x64xf8E4M3FN>, %o: memref<2x4x1x64xf16>, %kd: memref<2x2xf32>, %vd: memref<f32>) {
  fa.attention %q, %k, %v descale(%kd, %vd : memref<2x2xf32>, memref<f32>) outs(%o : memref<2x4x1x64xf16>) : memref<2x4x1x32xf16>, memref<2x2x70x32xf8E4M3FN>, memref<2x2x70x64xf8E4M3FN>
  return
}
