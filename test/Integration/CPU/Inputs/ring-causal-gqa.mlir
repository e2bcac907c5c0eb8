// Input of ring-attention.test (not a test itself): causal GQA self-attention
// over a sequence of 96 rows.
func.func @ring(%q: memref<2x4x96x32xf16>, %k: memref<2x2x96x32xf16>, %v: memref<2x2x96x32xf16>, %o: memref<2x4x96x32xf16>, %l: memref<2x4x96xf32>) {
  fa.attention %q, %k, %v outs(%o, %l : memref<2x4x96x32xf16>, memref<2x4x96xf32>) {causal} : memref<2x4x96x32xf16>, memref<2x2x96x32xf16>, memref<2x2x96x32xf16>
  return
}
