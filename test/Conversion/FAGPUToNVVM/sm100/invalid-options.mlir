// Bad pass options are diagnosed on the op.
// RUN: not fa-opt %s --fa-sm100-kernel-pipeline=stages=5 2>&1 | FileCheck %s --check-prefix=STAGES
// RUN: not fa-opt %s --fa-sm100-kernel-pipeline=poly-exp2-degree=1 2>&1 | FileCheck %s --check-prefix=POLY
// RUN: not fa-opt %s --fa-sm100-kernel-pipeline="poly-exp2-period=0" 2>&1 | FileCheck %s --check-prefix=POLY
// STAGES: fagpu-pipeline-kv: stages must be 2, 3 or 4, got 5
// POLY: fa-poly-exp2: expected exp2_poly_

func.func @attention(%q: memref<1x1x64x64xf16>, %o: memref<1x1x64x64xf16>, %l: memref<1x1x64xf32>) {
  fa.attention %q, %q, %q outs(%o, %l : memref<1x1x64x64xf16>, memref<1x1x64xf32>)
      : memref<1x1x64x64xf16>, memref<1x1x64x64xf16>, memref<1x1x64x64xf16>
  return
}
