// A permuted (non-strided) layout is refused by fagpu-tile{target} before the
// loop nest takes views of it, naming the operand and saying what to do
// (before, an upstream verifier refused it with "base type '...' is not
// strided": no pass named, no advice).
// RUN: not fa-opt %s --fa-sm80-pipeline 2>&1 | FileCheck %s
// RUN: not fa-opt %s --fa-sm90-pipeline 2>&1 | FileCheck %s

// CHECK: error: {{.*}}must be a contiguous memref (identity layout), got 'memref<1x4x128x64xf16, affine_map<(d0, d1, d2, d3) -> (d0, d2, d1, d3)>>'
func.func @permuted(%q: memref<1x4x128x64xf16>, %k: memref<1x4x128x64xf16>, %v: memref<1x4x128x64xf16, affine_map<(d0, d1, d2, d3) -> (d0, d2, d1, d3)>>, %o: memref<1x4x128x64xf16>) {
  fa.attention %q, %k, %v outs(%o : memref<1x4x128x64xf16>) : memref<1x4x128x64xf16>, memref<1x4x128x64xf16>, memref<1x4x128x64xf16, affine_map<(d0, d1, d2, d3) -> (d0, d2, d1, d3)>>
  return
}
