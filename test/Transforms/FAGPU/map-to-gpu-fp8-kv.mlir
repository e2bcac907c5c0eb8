// RUN: not fa-opt %s --split-input-file --pass-pipeline="builtin.module(func.func(fa-tile{block-r=64 block-c=128},fa-lower-fa2,fa-map-to-gpu{target=sm_80}))" 2>&1 | FileCheck %s --check-prefix=SM80
// RUN: fa-opt %s --split-input-file --pass-pipeline="builtin.module(func.func(fa-tile{block-r=64 block-c=128},fa-lower-fa2,fa-map-to-gpu{target=sm_90a}))" | FileCheck %s

// A tile-level nest of an e4m3 K/V beside an f16 Q (tiled for the CPU path,
// then handed to the GPU mapping): sm_90a maps it, K's descale read
// directly by the score tile (not a product with Q's), V's by P V; sm_80
// refuses it with the reason, not mapped as an f16 kernel reading e4m3
// bytes.
// SM80: error: fa-map-to-gpu: cannot be mapped to sm_80: an e4m3 K/V beside a 16-bit Q has a kernel on sm_90a only (the CPU path runs it: fa-run --kv-dtype e4m3)
// CHECK: fagpu.attention {{.*}} descale(%{{.*}}, %{{.*}} : memref<2x2xf32>, memref<f32>) outs(%{{.*}}) {{.*}} : memref<2x4x64x128xf16>, memref<2x2x256x128xf8E4M3FN>, memref<2x2x256x128xf8E4M3FN>, memref<2x4x64x128xf16>
func.func @fp8_key_values(%q: memref<2x4x64x128xf16>, %k: memref<2x2x256x128xf8E4M3FN>, %v: memref<2x2x256x128xf8E4M3FN>, %o: memref<2x4x64x128xf16>, %kd: memref<2x2xf32>, %vd: memref<f32>) {
  fa.attention %q, %k, %v descale(%kd, %vd : memref<2x2xf32>, memref<f32>) outs(%o : memref<2x4x64x128xf16>) : memref<2x4x64x128xf16>, memref<2x2x256x128xf8E4M3FN>, memref<2x2x256x128xf8E4M3FN>
  return
}
