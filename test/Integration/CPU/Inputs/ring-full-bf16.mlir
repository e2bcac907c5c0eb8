// Input of ring-attention.test (not a test itself): bf16 attention with a
// softcap over 90 rows (chunks of 15: not a multiple of the tiles).
func.func @ring(%q: memref<1x3x90x64xbf16>, %o: memref<1x3x90x64xbf16>, %l: memref<1x3x90xf32>) {
  fa.attention %q, %q, %q outs(%o, %l : memref<1x3x90x64xbf16>, memref<1x3x90xf32>) {softcap = 20.0 : f32} : memref<1x3x90x64xbf16>, memref<1x3x90x64xbf16>, memref<1x3x90x64xbf16>
  return
}
