// Bad pass options are diagnosed on the op.
// RUN: not fa-opt %s --fa-sm90-kernel-pipeline=stages=1 2>&1 | FileCheck %s --check-prefix=STAGES
// RUN: not fa-opt %s --fa-sm90-kernel-pipeline=consumer-registers=250 2>&1 | FileCheck %s --check-prefix=REGS
// RUN: not fa-opt %s --fa-sm90-kernel-pipeline="producer-registers=64 consumer-registers=248" 2>&1 | FileCheck %s --check-prefix=BUDGET
// A CTA of three warpgroups launches with 168 registers a thread (64,512 in
// all), and setmaxnreg only moves registers within that: 32 + 2 x 240 needs
// 65,536 (its increase would wait forever on the H200, measured).
// RUN: not fa-opt %s --split-input-file --fa-sm90-kernel-pipeline="producer-registers=32 consumer-registers=240" 2>&1 | FileCheck %s --check-prefix=POOL
// RUN: not fa-opt %s --fa-sm90-kernel-pipeline=poly-exp2-degree=7 2>&1 | FileCheck %s --check-prefix=POLY
// STAGES: fagpu-pipeline-kv: stages must be 2, 3 or 4, got 1
// REGS: fagpu-warp-specialize: setmaxnreg counts must be multiples of 8 in [24, 256], got 250
// BUDGET: fagpu-warp-specialize: producer and consumer registers (64, 248) need 103424 registers, more than the 65536 a CTA of 512 threads launches with (128 each)
// POOL: fagpu-warp-specialize: producer and consumer registers (32, 240) need 65536 registers, more than the 64512 a CTA of 384 threads launches with (168 each)
// POLY: fa-poly-exp2: expected exp2_poly_

func.func @attention(%q: memref<1x1x64x64xf16>, %o: memref<1x1x64x64xf16>, %l: memref<1x1x64xf32>) {
  fa.attention %q, %q, %q outs(%o, %l : memref<1x1x64x64xf16>, memref<1x1x64xf32>)
      : memref<1x1x64x64xf16>, memref<1x1x64x64xf16>, memref<1x1x64x64xf16>
  return
}

// -----

// D = 128: two consumer warpgroups, 384 threads.
func.func @d128(%q: memref<1x1x64x128xf16>, %o: memref<1x1x64x128xf16>, %l: memref<1x1x64xf32>) {
  fa.attention %q, %q, %q outs(%o, %l : memref<1x1x64x128xf16>, memref<1x1x64xf32>)
      : memref<1x1x64x128xf16>, memref<1x1x64x128xf16>, memref<1x1x64x128xf16>
  return
}
