// RUN: fa-opt %s --split-input-file --fa-tile="target=sm_90a" --verify-diagnostics
// RUN: fa-opt %s --split-input-file --fa-tile="target=sm_80" --verify-diagnostics

// An e4m3 KV cache beside a 16-bit Q runs on the CPU path; fa-tile refuses
// a GPU target for it with the way to run it, rather than handing the GPU
// levels a mixed-type attention they would treat as one type.
func.func @f(%q: memref<1x8x1x128xf16>, %k: memref<1x2x256x128xf8E4M3FN>, %v: memref<1x2x256x128xf8E4M3FN>, %o: memref<1x8x1x128xf16>, %kd: memref<f32>, %vd: memref<f32>) {
  // expected-error @+1 {{an e4m3 K/V beside a 'f16' query has no GPU kernel yet (it runs on the CPU path: fa-run --kv-dtype e4m3)}}
  fa.attention %q, %k, %v descale(%kd, %vd : memref<f32>, memref<f32>) outs(%o : memref<1x8x1x128xf16>) : memref<1x8x1x128xf16>, memref<1x2x256x128xf8E4M3FN>, memref<1x2x256x128xf8E4M3FN>
  return
}
