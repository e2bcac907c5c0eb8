// RUN: fa-opt %s --pass-pipeline="builtin.module(func.func(fagpu-tile{target=sm_90a},fa-lower-fa2,fa-map-to-gpu{target=sm_90a}))" | FileCheck %s --check-prefix=MAP
// RUN: fa-opt %s --pass-pipeline="builtin.module(func.func(fagpu-tile{target=sm_90a},fa-lower-fa2,fa-map-to-gpu{target=sm_90a}))" | fa-opt | FileCheck %s --check-prefix=MAP
// RUN: fa-opt %s --split-input-file --fagpu-tile="target=sm_80" --verify-diagnostics
// RUN: not fa-opt %s --fa-sm90-kernel-pipeline 2>&1 | FileCheck %s --check-prefix=KERNEL

// An e4m3 KV cache beside a 16-bit Q on the GPU levels: sm_90a tiles it and
// maps it to fagpu.attention with K's and V's descales (no Q descale, no
// probs_scale: P stays 16-bit), printed and parsed back; the kernel builder
// refuses this one, whose K descale is per (batch, K/V head) and V's per
// tensor (one descale_layout addresses both: fp8-kv-cache.mlir builds a
// kernel of like layouts); other targets refuse it at fa-tile with the way
// to run it.
// MAP: fagpu.attention %{{.*}}, %{{.*}}, %{{.*}} kv_lengths(%{{.*}} : memref<2xi32>) descale(%{{.*}}, %{{.*}} : memref<2x2xf32>, memref<f32>) outs(%{{.*}}) {bottom_right, causal, scale = {{.*}}} : memref<2x8x1x128xf16>, memref<2x2x256x128xf8E4M3FN>, memref<2x2x256x128xf8E4M3FN>, memref<2x8x1x128xf16>
// MAP-NOT: probs_scale
// KERNEL: error: 'fagpu.attention' op cannot be lowered to sm_90a wgmma: an e4m3 K/V cache's descales must be laid out alike (one each, or [B, Hkv] each)
func.func @f(%q: memref<2x8x1x128xf16>, %k: memref<2x2x256x128xf8E4M3FN>, %v: memref<2x2x256x128xf8E4M3FN>, %o: memref<2x8x1x128xf16>, %kd: memref<2x2xf32>, %vd: memref<f32>, %lens: memref<2xi32>) {
  // expected-error @+1 {{fagpu-tile: sm_80: per-sequence key lengths and paged K/V have a GPU kernel on sm_90a only}}
  fa.attention %q, %k, %v descale(%kd, %vd : memref<2x2xf32>, memref<f32>) kv_lengths(%lens : memref<2xi32>) outs(%o : memref<2x8x1x128xf16>) {causal, bottom_right} : memref<2x8x1x128xf16>, memref<2x2x256x128xf8E4M3FN>, memref<2x2x256x128xf8E4M3FN>
  return
}

// -----

// Without a KV cache's lengths (a contiguous e4m3 K/V): sm_80 refuses the
// type pair itself.
func.func @g(%q: memref<2x8x64x128xf16>, %k: memref<2x2x256x128xf8E4M3FN>, %o: memref<2x8x64x128xf16>, %d: memref<f32>) {
  // expected-error @+1 {{an e4m3 K/V beside a 'f16' query has a kernel on sm_90a only (the CPU path runs it: fa-run --kv-dtype e4m3)}}
  fa.attention %q, %k, %k descale(%d, %d : memref<f32>, memref<f32>) outs(%o : memref<2x8x64x128xf16>) : memref<2x8x64x128xf16>, memref<2x2x256x128xf8E4M3FN>, memref<2x2x256x128xf8E4M3FN>
  return
}
