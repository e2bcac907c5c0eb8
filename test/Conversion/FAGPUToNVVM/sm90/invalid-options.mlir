// Bad pass options are diagnosed on the op.
// RUN: not fa-opt %s --fa-sm90-kernel-pipeline=stages=1 2>&1 | FileCheck %s --check-prefix=STAGES
// RUN: not fa-opt %s --fa-sm90-kernel-pipeline=consumer-registers=250 2>&1 | FileCheck %s --check-prefix=REGS
// RUN: not fa-opt %s --fa-sm90-kernel-pipeline="producer-registers=64 consumer-registers=248" 2>&1 | FileCheck %s --check-prefix=BUDGET
// RUN: not fa-opt %s --fa-sm90-kernel-pipeline=poly-exp2-degree=7 2>&1 | FileCheck %s --check-prefix=POLY
// STAGES: fagpu-pipeline-kv: stages must be 2, 3 or 4, got 1
// REGS: fagpu-warp-specialize: setmaxnreg counts must be multiples of 8 in [24, 256], got 250
// BUDGET: fagpu-warp-specialize: producer and consumer registers (64, 248) exceed the 64K registers of an SM
// POLY: fa-poly-exp2: expected exp2_poly_

func.func @attention(%q: memref<1x1x64x64xf16>, %o: memref<1x1x64x64xf16>, %l: memref<1x1x64xf32>) {
  fa.attention %q, %q, %q outs(%o, %l : memref<1x1x64x64xf16>, memref<1x1x64xf32>)
      : memref<1x1x64x64xf16>, memref<1x1x64x64xf16>, memref<1x1x64x64xf16>
  return
}
