// RUN: not fa-opt %s --pass-pipeline="builtin.module(func.func(fa-tile{block-r=64 block-c=128},fa-lower-fa2,fa-map-to-gpu{target=sm_90a}))" 2>&1 | FileCheck %s

// A tile-level nest of an e4m3 K/V beside an f16 Q (tiled for the CPU path,
// then handed to the GPU mapping): refused with the reason, not mapped as an
// f16 kernel reading e4m3 bytes.
// CHECK: error: fa-map-to-gpu: an e4m3 K/V beside a f16 query has no GPU kernel yet (it runs on the CPU path: fa-run --kv-dtype e4m3)
func.func @fp8_key_values(%q: memref<2x4x64x128xf16>, %k: memref<2x2x256x128xf8E4M3FN>, %v: memref<2x2x256x128xf8E4M3FN>, %o: memref<2x4x64x128xf16>, %kd: memref<2x2xf32>, %vd: memref<f32>) {
  fa.attention %q, %k, %v descale(%kd, %vd : memref<2x2xf32>, memref<f32>) outs(%o : memref<2x4x64x128xf16>) : memref<2x4x64x128xf16>, memref<2x2x256x128xf8E4M3FN>, memref<2x2x256x128xf8E4M3FN>
  return
}
