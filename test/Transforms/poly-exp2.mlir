// RUN: fa-opt %s --fa-tile --fa-lower-fa2 --fa-poly-exp2 | FileCheck %s
// RUN: fa-opt %s --fa-tile --fa-lower-fa2 --fa-conditional-rescale --fa-poly-exp2="degree=5 period=1" | FileCheck %s --check-prefix=ALL
// RUN: not fa-opt %s --fa-poly-exp2="degree=6" 2>&1 | FileCheck %s --check-prefix=DEG
// RUN: not fa-opt %s --fa-poly-exp2="period=0" 2>&1 | FileCheck %s --check-prefix=PER

// CHECK: fa.softmax_update {{.*}} {exp2_poly_degree = 3 : i64, exp2_poly_period = 8 : i64}
// ALL: fa.conditional_softmax_update {{.*}} {exp2_poly_degree = 5 : i64, exp2_poly_period = 1 : i64, threshold = 8.000000e+00 : f32}
// DEG: fa-poly-exp2: expected exp2_poly_degree in [2, 5], got 6
// PER: fa-poly-exp2: expected exp2_poly_period in [1, 1048576], got 0
func.func @attention(%q: memref<1x2x100x64xf16>, %o: memref<1x2x100x64xf16>, %lse: memref<1x2x100xf32>) {
  fa.attention %q, %q, %q outs(%o, %lse : memref<1x2x100x64xf16>, memref<1x2x100xf32>)
      : memref<1x2x100x64xf16>, memref<1x2x100x64xf16>, memref<1x2x100x64xf16>
  return
}
