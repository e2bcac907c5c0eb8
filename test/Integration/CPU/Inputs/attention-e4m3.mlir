// An e4m3 attention with per-tensor descales and a bf16 output (fp8.test).
func.func @attention(%q: memref<1x2x37x16xf8E4M3FN>, %k: memref<1x1x45x16xf8E4M3FN>, %v: memref<1x1x45x16xf8E4M3FN>, %o: memref<1x2x37x16xbf16>, %qd: memref<f32>, %kd: memref<f32>, %vd: memref<f32>) {
  fa.attention %q, %k, %v descale(%qd, %kd, %vd : memref<f32>, memref<f32>, memref<f32>) outs(%o : memref<1x2x37x16xbf16>) {causal} : memref<1x2x37x16xf8E4M3FN>, memref<1x1x45x16xf8E4M3FN>, memref<1x1x45x16xf8E4M3FN>
  return
}
