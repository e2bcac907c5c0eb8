// RUN: not fa-opt %s --fa-sm90-kernel-pipeline 2>&1 | FileCheck %s

// K's descale per (batch, K/V head), V's per tensor: one descale_layout
// cannot address both, so the kernel builder refuses it.
// CHECK: error: {{.*}}an e4m3 K/V cache's descales must be laid out alike
func.func @mixed(%q: memref<2x8x1x128xf16>, %k: memref<2x2x256x128xf8E4M3FN>,
                 %v: memref<2x2x256x128xf8E4M3FN>, %o: memref<2x8x1x128xf16>,
                 %kd: memref<2x2xf32>, %vd: memref<f32>) {
  fa.attention %q, %k, %v descale(%kd, %vd : memref<2x2xf32>, memref<f32>)
      outs(%o : memref<2x8x1x128xf16>)
      : memref<2x8x1x128xf16>, memref<2x2x256x128xf8E4M3FN>, memref<2x2x256x128xf8E4M3FN>
  return
}
