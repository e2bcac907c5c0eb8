// Input of predicted-bytes.test (not a test itself): the causal GQA case in
// e4m3 with a bf16 O.
func.func @causal_e4m3(%q: memref<2x8x1000x128xf8E4M3FN>,
                       %k: memref<2x2x1000x128xf8E4M3FN>,
                       %o: memref<2x8x1000x128xbf16>, %l: memref<2x8x1000xf32>,
                       %d: memref<f32>) {
  fa.attention %q, %k, %k descale(%d, %d, %d : memref<f32>, memref<f32>, memref<f32>)
      outs(%o, %l : memref<2x8x1000x128xbf16>, memref<2x8x1000xf32>)
      {causal} : memref<2x8x1000x128xf8E4M3FN>, memref<2x2x1000x128xf8E4M3FN>, memref<2x2x1000x128xf8E4M3FN>
  return
}
