// The GPU back ends read Q, K, V, O as contiguous [B, H, N, D] from the
// aligned base pointer: strided, offset and permuted memrefs are refused
// with a diagnostic (issue 16; before, they were accepted and only the base
// pointer reached the kernel). Kept here by the hardening work; it belongs
// with the fagpu conversion tests.
// RUN: not fa-opt %s --split-input-file --fa-sm80-pipeline 2>&1 | FileCheck %s
// RUN: not fa-opt %s --split-input-file --fa-sm90-pipeline 2>&1 | FileCheck %s
// RUN: not fa-opt %s --split-input-file --fa-sm100-pipeline 2>&1 | FileCheck %s

// CHECK: error: {{.*}}Q must be a contiguous memref (identity layout), got 'memref<1x4x128x64xf16, strided<[65536, 16384, 128, 1]>>'; copy strided views into contiguous buffers first
func.func @strided(%q: memref<1x4x128x64xf16, strided<[65536, 16384, 128, 1]>>, %k: memref<1x4x128x64xf16>, %v: memref<1x4x128x64xf16>, %o: memref<1x4x128x64xf16>) {
  fa.attention %q, %k, %v outs(%o : memref<1x4x128x64xf16>) : memref<1x4x128x64xf16, strided<[65536, 16384, 128, 1]>>, memref<1x4x128x64xf16>, memref<1x4x128x64xf16>
  return
}

// -----

// CHECK: error: {{.*}}K must be a contiguous memref (identity layout), got 'memref<1x4x128x64xf16, strided<[32768, 8192, 64, 1], offset: 64>>'
func.func @offset(%q: memref<1x4x128x64xf16>, %k: memref<1x4x128x64xf16, strided<[32768, 8192, 64, 1], offset: 64>>, %v: memref<1x4x128x64xf16>, %o: memref<1x4x128x64xf16>) {
  fa.attention %q, %k, %v outs(%o : memref<1x4x128x64xf16>) : memref<1x4x128x64xf16>, memref<1x4x128x64xf16, strided<[32768, 8192, 64, 1], offset: 64>>, memref<1x4x128x64xf16>
  return
}

// -----

// CHECK: error: {{.*}}O must be a contiguous memref (identity layout)
func.func @out(%q: memref<1x4x128x64xf16>, %k: memref<1x4x128x64xf16>, %v: memref<1x4x128x64xf16>, %o: memref<1x4x128x64xf16, strided<[65536, 16384, 128, 1]>>) {
  fa.attention %q, %k, %v outs(%o : memref<1x4x128x64xf16, strided<[65536, 16384, 128, 1]>>) : memref<1x4x128x64xf16>, memref<1x4x128x64xf16>, memref<1x4x128x64xf16>
  return
}
