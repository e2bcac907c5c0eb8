// Input of predicted-bytes.test (not a test itself).
func.func @causal(%q: memref<2x8x1000x128xf16>, %k: memref<2x2x1000x128xf16>,
                  %o: memref<2x8x1000x128xf16>, %l: memref<2x8x1000xf32>) {
  fa.attention %q, %k, %k outs(%o, %l : memref<2x8x1000x128xf16>, memref<2x8x1000xf32>)
      {causal} : memref<2x8x1000x128xf16>, memref<2x2x1000x128xf16>, memref<2x2x1000x128xf16>
  return
}
