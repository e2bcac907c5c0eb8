// e4m3 (FP8) through the GPU path's first half on sm_90a: fa-tile (B_c =
// 224 at D = 128, FlashAttention-3's FP8 tile), the FA2 nest, fa-quantize-probs
// (P scaled by 2^8 before its e4m3 cast), then fa-map-to-gpu carries the
// per-tensor descales and the probs scale onto fagpu.attention; the kernel
// pipeline then builds the e4m3 wgmma kernel and its V layout kernel
// (sm90/build-kernels-e4m3.mlir checks them at the fagpu level).
// RUN: fa-opt %s --split-input-file --pass-pipeline="builtin.module(func.func(fa-attention-to-buffers,fagpu-tile{target=sm_90a},fa-lower-fa2,fa-quantize-probs,fa-map-to-gpu{target=sm_90a}))" | FileCheck %s
// RUN: fa-opt %s --split-input-file --fa-sm90-kernel-pipeline=rescale-threshold=0 | FileCheck %s --check-prefix=KERNEL
// RUN: not fa-opt %s --split-input-file --fa-sm90-kernel-pipeline=rescale-threshold=8 2>&1 | FileCheck %s --check-prefix=THRESHOLD

// CHECK-LABEL: func.func @fp8
// CHECK-SAME: (%[[Q:.*]]: memref<2x4x300x128xf8E4M3FN>, %[[K:.*]]: memref<2x2x500x128xf8E4M3FN>, %[[V:.*]]: memref<2x2x500x128xf8E4M3FN>, %[[O:.*]]: memref<2x4x300x128xbf16>, %[[QD:.*]]: memref<f32>, %[[KD:.*]]: memref<f32>, %[[VD:.*]]: memref<f32>)
// CHECK: fagpu.attention %[[Q]], %[[K]], %[[V]] descale(%[[QD]], %[[KD]], %[[VD]] : memref<f32>, memref<f32>, memref<f32>) outs(%[[O]], %{{.*}})
// CHECK-SAME: causal
// CHECK-SAME: probs_scale = 2.560000e+02 : f32
// CHECK-SAME: schedule = #fagpu.schedule<block_r = 128, block_c = 224,
// CHECK-SAME: : memref<2x4x300x128xf8E4M3FN>, memref<2x2x500x128xf8E4M3FN>, memref<2x2x500x128xf8E4M3FN>, memref<2x4x300x128xbf16>
// CHECK-NOT: scf.forall
// KERNEL: gpu.launch_func async {{.*}} @fa_kernels::@fa_e4m3_v_layout_d128
// KERNEL: gpu.launch_func async {{.*}} @fa_kernels::@fa3_sm90_d128_br128_bc224_s2_e4m3_bf16_causal_persistent_q2_stg_cr0_ps256
// KERNEL: llvm.func @fa_e4m3_v_layout_d128(
// KERNEL: llvm.func @fa3_sm90_d128_br128_bc224_s2_e4m3_bf16_causal_persistent_q2_stg_cr0_ps256(
// Conditional rescaling leaves P up to 2^8, which 2^8 more would saturate.
// THRESHOLD: error: fa-quantize-probs: expected probs scale * 2^threshold to be at most 448
func.func @fp8(%q: memref<2x4x300x128xf8E4M3FN>, %k: memref<2x2x500x128xf8E4M3FN>, %v: memref<2x2x500x128xf8E4M3FN>, %o: memref<2x4x300x128xbf16>, %qd: memref<f32>, %kd: memref<f32>, %vd: memref<f32>) {
  %lse = memref.alloc() : memref<2x4x300xf32>
  fa.attention %q, %k, %v descale(%qd, %kd, %vd : memref<f32>, memref<f32>, memref<f32>) outs(%o, %lse : memref<2x4x300x128xbf16>, memref<2x4x300xf32>) {causal} : memref<2x4x300x128xf8E4M3FN>, memref<2x2x500x128xf8E4M3FN>, memref<2x2x500x128xf8E4M3FN>
  memref.dealloc %lse : memref<2x4x300xf32>
  return
}

// -----

// FA3's [B, Hkv] descales: the nest loads them at (batch, K/V head), which
// the mapping recognises; the kernel then reads a (batch, K/V head)'s each
// tile, and the launch passes descale_layout 1 (the last i32 before the
// dynamic scheduler's counter).
// CHECK-LABEL: func.func @per_head
// CHECK: fagpu.attention {{.*}} descale(%{{.*}}, %{{.*}}, %{{.*}} : memref<2x2xf32>, memref<2x2xf32>, memref<2x2xf32>)
// KERNEL-LABEL: func.func @per_head
// KERNEL: %[[STRIDE:.*]] = arith.constant 1 : i32
// KERNEL: gpu.launch_func async {{.*}} @fa_kernels::@fa3_sm90_d128_br128_bc224_s2_e4m3_bf16_causal_persistent_q2_stg_cr0_ps256
// KERNEL-SAME: %[[STRIDE]] : i32, %{{.*}} : !llvm.ptr<1>)
func.func @per_head(%q: memref<2x4x300x128xf8E4M3FN>, %k: memref<2x2x500x128xf8E4M3FN>, %v: memref<2x2x500x128xf8E4M3FN>, %o: memref<2x4x300x128xbf16>, %qd: memref<2x2xf32>, %kd: memref<2x2xf32>, %vd: memref<2x2xf32>) {
  %lse = memref.alloc() : memref<2x4x300xf32>
  fa.attention %q, %k, %v descale(%qd, %kd, %vd : memref<2x2xf32>, memref<2x2xf32>, memref<2x2xf32>) outs(%o, %lse : memref<2x4x300x128xbf16>, memref<2x4x300xf32>) {causal} : memref<2x4x300x128xf8E4M3FN>, memref<2x2x500x128xf8E4M3FN>, memref<2x2x500x128xf8E4M3FN>
  memref.dealloc %lse : memref<2x4x300xf32>
  return
}

// -----

// Block quantisation (fa-block-quantize's layout, the attention's tiles the
// kernel's 128 x 128): Q's descales per (batch, head, query block), K's per
// (batch, K/V head, K/V block), V's one; the nest loads Q's at its tile and
// K's at the K/V loop's block, which the mapping recognises; the launch
// passes descale_layout 2.
// CHECK-LABEL: func.func @per_block
// CHECK: fagpu.attention {{.*}} descale(%{{.*}}, %{{.*}}, %{{.*}} : memref<2x4x3xf32>, memref<2x2x4xf32>, memref<f32>)
// KERNEL-LABEL: func.func @per_block
// KERNEL: gpu.launch_func async {{.*}} @fa_kernels::@fa3_sm90_d128_br128_bc128_s3_e4m3_bf16_causal_persistent_q2_stg_cr0_ps256
// KERNEL-SAME: %c2_i32{{[_0-9]*}} : i32, %{{.*}} : !llvm.ptr<1>)
func.func @per_block(%q: memref<2x4x300x128xf8E4M3FN>, %k: memref<2x2x500x128xf8E4M3FN>, %v: memref<2x2x500x128xf8E4M3FN>, %o: memref<2x4x300x128xbf16>, %qd: memref<2x4x3xf32>, %kd: memref<2x2x4xf32>, %vd: memref<f32>) {
  %lse = memref.alloc() : memref<2x4x300xf32>
  fa.attention %q, %k, %v descale(%qd, %kd, %vd : memref<2x4x3xf32>, memref<2x2x4xf32>, memref<f32>) outs(%o, %lse : memref<2x4x300x128xbf16>, memref<2x4x300xf32>) {causal, block_r = 128 : i64, block_c = 128 : i64} : memref<2x4x300x128xf8E4M3FN>, memref<2x2x500x128xf8E4M3FN>, memref<2x2x500x128xf8E4M3FN>
  memref.dealloc %lse : memref<2x4x300xf32>
  return
}
