// The reference reads q, k, v by the op's shapes: arguments that are not the
// op's operands are refused (issue 16; before, the reference read the
// 4-row argument %q as if it held 64 rows: a heap overflow).
// RUN: not fa-run %s 2>&1 | FileCheck %s
// CHECK: fa-run: error: argument 0 of @attention holds 32 elements but fa.attention's q has 512: the arguments must be the op's operands (q, k, v, o[, lse])

func.func @attention(%q: memref<1x1x4x8xf32>, %k: memref<1x1x16x8xf32>,
                     %v: memref<1x1x16x8xf32>, %o: memref<1x1x4x8xf32>) {
  %big = memref.alloc() : memref<1x1x64x8xf32>
  %obig = memref.alloc() : memref<1x1x64x8xf32>
  fa.attention %big, %k, %v outs(%obig : memref<1x1x64x8xf32>)
      : memref<1x1x64x8xf32>, memref<1x1x16x8xf32>, memref<1x1x16x8xf32>
  return
}
