// RUN: fa-opt %s --fa-expand-fp8-casts | FileCheck %s
// RUN: fa-opt %s --fa-expand-fp8-casts --convert-arith-to-llvm --reconcile-unrealized-casts | FileCheck %s --check-prefix=LLVM

// e4m3 -> f32: the bits rebased (normal), m * 2^-9 (subnormal), NaN for
// S.1111.111; no float cast from f8 is left.
// CHECK-LABEL: func @widen
// CHECK-DAG:  arith.constant 960 : i32
// CHECK-DAG:  arith.constant 0.001953125 : f32
// CHECK-DAG:  arith.constant 2143289344 : i32
// CHECK:      %[[BITS8:.*]] = arith.bitcast %{{.*}} : f8E4M3FN to i8
// CHECK:      %[[BITS:.*]] = arith.extui %[[BITS8]] : i8 to i32
// CHECK:      arith.uitofp
// CHECK-NOT:  arith.extf %{{.*}} : f8E4M3FN
// CHECK:      return
// The arith-to-LLVM conversion then takes every op (f8 is i8 there).
// LLVM-LABEL: func.func @widen
// LLVM-NOT:   arith.
// LLVM:       llvm.bitcast %{{.*}} : i32 to f32
// LLVM-NEXT:  return
func.func @widen(%x: f8E4M3FN) -> f32 {
  %y = arith.extf %x : f8E4M3FN to f32
  return %y : f32
}

// To f16 through f32, exactly.
// CHECK-LABEL: func @widen_f16
// CHECK:      arith.bitcast %{{.*}} : i32 to f32
// CHECK:      arith.truncf %{{.*}} : f32 to f16
func.func @widen_f16(%x: f8E4M3FN) -> f16 {
  %y = arith.extf %x : f8E4M3FN to f16
  return %y : f16
}

// f32 -> e4m3: mantissa rounded to 3 bits nearest even (+0x7ffff + lsb,
// >> 20, - 960), subnormals by +-2^23, NaN (0x7f) past 448 or for NaN.
// CHECK-LABEL: func @narrow
// CHECK-DAG:  arith.constant 524287 : i32
// CHECK-DAG:  arith.constant 0x4B000000 : f32
// CHECK-DAG:  arith.constant 1015021568 : i32
// CHECK-DAG:  arith.constant 126 : i32
// CHECK:      %[[B:.*]] = arith.trunci %{{.*}} : i32 to i8
// CHECK:      arith.bitcast %[[B]] : i8 to f8E4M3FN
// CHECK-NOT:  arith.truncf
func.func @narrow(%x: f32) -> f8E4M3FN {
  %y = arith.truncf %x : f32 to f8E4M3FN
  return %y : f8E4M3FN
}

// Other casts are left alone.
// CHECK-LABEL: func @others
// CHECK: arith.extf %{{.*}} : f16 to f32
func.func @others(%x: f16) -> f32 {
  %y = arith.extf %x : f16 to f32
  return %y : f32
}
