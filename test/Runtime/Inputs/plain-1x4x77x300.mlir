// Input of predicted-bytes.test (not a test itself).
func.func @plain(%q: memref<1x4x77x64xf16>, %k: memref<1x4x300x64xf16>,
                 %o: memref<1x4x77x64xf16>, %l: memref<1x4x77xf32>) {
  fa.attention %q, %k, %k outs(%o, %l : memref<1x4x77x64xf16>, memref<1x4x77xf32>)
      : memref<1x4x77x64xf16>, memref<1x4x300x64xf16>, memref<1x4x300x64xf16>
  return
}
