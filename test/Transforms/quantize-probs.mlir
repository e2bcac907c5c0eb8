// RUN: fa-opt %s --fa-tile="block-r=16 block-c=32" --fa-lower-fa2 --fa-quantize-probs | FileCheck %s
// RUN: fa-opt %s --fa-tile="block-r=16 block-c=32" --fa-lower-fa2 --fa-quantize-probs="scale=16" | FileCheck %s --check-prefix=SCALE16
// RUN: fa-opt %s --fa-tile="block-r=16 block-c=32" --fa-lower-fa2 --fa-conditional-rescale="threshold=0" --fa-quantize-probs | FileCheck %s
// RUN: not fa-opt %s --fa-tile="block-r=16 block-c=32" --fa-lower-fa2 --fa-conditional-rescale --fa-quantize-probs 2>&1 | FileCheck %s --check-prefix=SATURATES
// RUN: not fa-opt %s --fa-tile="block-r=16 block-c=32" --fa-lower-fa2 --fa-quantize-probs="scale=3" 2>&1 | FileCheck %s --check-prefix=NOT-POW2

// fa-quantize-probs: the P V product of e4m3 values rounds P to e4m3 after
// scaling it by 2^8 (P <= 1 maps to <= 256 < 448; the underflow threshold
// moves from 2^-10 to 2^-18).
// CHECK-LABEL: func @attention
// CHECK: fa.pv_accumulate %{{.*}}, %{{.*}} -> %{{.*}} descale %{{.*}} {probs_scale = 2.560000e+02 : f32} : memref<16x32xf32>, memref<?x16xf8E4M3FN
// SCALE16: {probs_scale = 1.600000e+01 : f32}

// Conditional rescaling lets P reach 2^threshold: 256 * 2^8 would saturate.
// SATURATES: error: fa-quantize-probs: expected probs scale * 2^threshold to be at most 448 (e4m3's largest), got 256 * 2^8
// NOT-POW2: error: fa-quantize-probs: expected probs scale to be a power of two in [1, 256], got 3
func.func @attention(%q: memref<1x2x37x16xf8E4M3FN>, %k: memref<1x1x45x16xf8E4M3FN>, %v: memref<1x1x45x16xf8E4M3FN>, %o: memref<1x2x37x16xbf16>, %qd: memref<f32>, %kd: memref<f32>, %vd: memref<f32>) {
  fa.attention %q, %k, %v descale(%qd, %kd, %vd : memref<f32>, memref<f32>, memref<f32>) outs(%o : memref<1x2x37x16xbf16>) {causal} : memref<1x2x37x16xf8E4M3FN>, memref<1x1x45x16xf8E4M3FN>, memref<1x1x45x16xf8E4M3FN>
  return
}

// Attentions on f16 keep P in f32.
// CHECK-LABEL: func @f16
// CHECK-NOT: probs_scale
func.func @f16(%q: memref<1x1x8x16xf16>, %o: memref<1x1x8x16xf16>) {
  fa.attention %q, %q, %q outs(%o : memref<1x1x8x16xf16>) : memref<1x1x8x16xf16>, memref<1x1x8x16xf16>, memref<1x1x8x16xf16>
  return
}

// An e4m3 KV cache beside a 16-bit Q keeps P at Q's precision: its products
// run on the dequantised K/V, not on e4m3 MMAs.
// CHECK-LABEL: func @fp8_key_values
// CHECK: fa.pv_accumulate
// CHECK-NOT: probs_scale
// CHECK: return
func.func @fp8_key_values(%q: memref<1x2x1x16xf16>, %k: memref<1x1x45x16xf8E4M3FN>, %v: memref<1x1x45x16xf8E4M3FN>, %o: memref<1x2x1x16xf16>, %kd: memref<f32>, %vd: memref<f32>) {
  fa.attention %q, %k, %v descale(%kd, %vd : memref<f32>, memref<f32>) outs(%o : memref<1x2x1x16xf16>) : memref<1x2x1x16xf16>, memref<1x1x45x16xf8E4M3FN>, memref<1x1x45x16xf8E4M3FN>
  return
}
