// RUN: fa-opt %s --convert-fagpu-to-nvvm | FileCheck %s

// The e4m3 (FP8) forms of the kernel-body ops, each through its own
// lowering pattern: the tensor-core pieces of FlashAttention-3's e4m3 path
// (the kernel that uses them is issue 18's next step).

// CHECK-LABEL: llvm.func @value_tile(
// CHECK-SAME: %[[D:arg2]]: i32, %[[H:arg3]]: i32, %[[B:arg4]]: i32, %[[KEY:arg5]]: i32)
// CHECK: nvvm.mbarrier.arrive.expect_tx %{{.*}}, %c16384_i32
// CHECK: %[[COL:.*]] = arith.addi %[[KEY]], %c0_i32
// CHECK: nvvm.cp.async.bulk.tensor.shared.cluster.global %{{.*}}, %arg0, %{{.*}}, box[%[[COL]], %[[D]], %[[H]], %[[B]]]
// CHECK-NOT: nvvm.cp.async.bulk.tensor

// S = Q K^T on e4m3 tiles: k = 32 per wgmma (32 bytes of each row, as a
// 16-bit k-step), so D = 128 takes 4 k-steps inside one 128-byte column
// block.
// CHECK-LABEL: llvm.func @scores
// CHECK: nvvm.wgmma.fence.aligned
// CHECK: nvvm.wgmma.mma_async {{.*}} <m = 64, n = 128, k = 32>, D[<f32>, <zero>], A[<e4m3>, <one>, <row>], B[<e4m3>, <one>, <col>]
// CHECK-COUNT-3: nvvm.wgmma.mma_async {{.*}} <m = 64, n = 128, k = 32>, D[<f32>, <one>], A[<e4m3>, <one>, <row>], B[<e4m3>, <one>, <col>]
// CHECK-NOT: nvvm.wgmma.mma_async
// CHECK: nvvm.wgmma.commit.group.sync.aligned

// The softmax step with an e4m3 P: exp2 offset by log2(256) = 8 (P scaled
// by 2^8, l with it), then P packed four keys a register with cvt (nearest
// even, saturating): 64 scores a thread -> 32 pairs -> 16 registers.
// CHECK-LABEL: llvm.func @probabilities
// CHECK: arith.addf %{{.*}}, %cst{{.*}} : f32
// CHECK: ex2.approx.ftz.f32
// CHECK-COUNT-32: nvvm.convert.f32x2.to.f8x2 {{.*}} {rnd = #nvvm.fp_rnd_mode<rn>, sat = #nvvm.sat_mode<satfinite>} : i16(f8E4M3FN)
// CHECK-NOT: nvvm.convert.f32x2.to.f8x2

// O += P V^T with P (e4m3) in registers and V^T K-major (the 8-bit wgmma
// has no transpose): one asm per k-step of 32 keys, no trans-b immediate.
// CHECK: nvvm.wgmma.fence.aligned
// CHECK-COUNT-4: wgmma.mma_async.sync.aligned.m64n128k32.f32.e4m3.e4m3 {{.*}} p, 1, 1;
// CHECK-NOT: wgmma.mma_async.sync
// CHECK: nvvm.wgmma.commit.group.sync.aligned
// CHECK-NOT: fagpu.

// B_c = 224 (FlashAttention-3's FP8 tile at D = 128): V^T's rows are 224
// bytes, in 32-byte swizzled column blocks (!fagpu.smem_tile<128x224x
// f8E4M3FN, swizzle = 32>). Its TMA load is 7 boxes of 32 keys, 4 KiB
// apart (128 rows x 32 bytes), at columns key + 32 i; 28 KiB announced.
// CHECK-LABEL: llvm.func @narrow_value_tile(
// CHECK-SAME: %[[KEY2:arg5]]: i32)
// CHECK: nvvm.mbarrier.arrive.expect_tx %{{.*}}, %c28672_i32
// CHECK: arith.addi %[[KEY2]], %c0_i32
// CHECK: nvvm.cp.async.bulk.tensor.shared.cluster.global
// CHECK: arith.addi %[[KEY2]], %c32_i32
// CHECK: nvvm.cp.async.bulk.tensor.shared.cluster.global
// CHECK: arith.addi %[[KEY2]], %c192_i32
// CHECK: nvvm.cp.async.bulk.tensor.shared.cluster.global
// CHECK-NOT: nvvm.cp.async.bulk.tensor
// O += P V^T over 224 keys: 7 k-steps of 32, each a whole 32-byte column
// block; the descriptor's layout bits are 3 (32-byte swizzle) << 62, its
// stride 8 rows x 32 bytes = 256 (16 << 32), its leading offset 16 (1 <<
// 16): -4611685949707845632.
// CHECK-LABEL: llvm.func @narrow_value_mma
// CHECK: nvvm.wgmma.fence.aligned
// CHECK: arith.constant -4611685949707845632 : i64
// CHECK-COUNT-7: wgmma.mma_async.sync.aligned.m64n128k32.f32.e4m3.e4m3 {{.*}} p, 1, 1;
// CHECK-NOT: wgmma.mma_async.sync
// CHECK: nvvm.wgmma.commit.group.sync.aligned

!kv8 = !fagpu.pipeline<stages = 2, buffers = 2, 128x128xf8E4M3FN>
!rows = !fagpu.fragment<64xf32, rows>
!s = !fagpu.fragment<64x128xf32, accumulator>
!p = !fagpu.fragment<64x128xf8E4M3FN, operand_a>
!kv224 = !fagpu.pipeline<stages = 2, buffers = 2, 224x128xf8E4M3FN, 128x224xf8E4M3FN, swizzle = 32>
!s224 = !fagpu.fragment<64x224xf32, accumulator>
!p224 = !fagpu.fragment<64x224xf8E4M3FN, operand_a>
!o = !fagpu.fragment<64x128xf32, accumulator>

module attributes {gpu.container_module} {
gpu.module @fa_kernels {
  llvm.mlir.global external @fa_smem() {addr_space = 3 : i32, alignment = 1024 : i64} : !llvm.array<0 x i8>
  // A V^T tile of e4m3 ([Dv = 128, 128 keys]) by TMA: 16 KiB announced,
  // one box (128 e4m3 columns fill one 128-byte column block) at column
  // %key, the block's first key.
  llvm.func @value_tile(%vmap: !llvm.ptr, %stage: i32, %d: i32, %head: i32, %batch: i32, %key: i32) {
    %kv = fagpu.create_pipeline {barrier_offset = 65536 : i64, tile_offset = 0 : i64} : !kv8
    fagpu.tma_load %vmap[%d, %head, %batch] column %key into %kv[%stage] buffer 1 : !llvm.ptr, !kv8
    llvm.return
  }
  llvm.func @scores() {
    %qt = fagpu.shared_tile offset 0 : <64x128xf8E4M3FN>
    %kt = fagpu.shared_tile offset 8192 : <128x128xf8E4M3FN>
    %s = fagpu.mma %qt, %kt : !fagpu.smem_tile<64x128xf8E4M3FN>, !fagpu.smem_tile<128x128xf8E4M3FN> -> !s
    fagpu.mma_wait pending 0
    %pinned = fagpu.pin %s : !s
    llvm.return
  }
  llvm.func @probabilities(%row: i32, %nk: i32, %scale: f32) {
    %zero = arith.constant 0.0 : f32
    %ninf = arith.constant 0xFF800000 : f32
    %s = fagpu.splat %zero : !s
    %m0 = fagpu.splat %ninf : !rows
    %l0 = fagpu.splat %zero : !rows
    %p, %m, %l, %alpha = fagpu.softmax_step %s, %m0, %l0 keys(%row, %nk) row %row scale %scale {probs_scale = 256.0 : f32} : !s, !rows -> !p
    // O += P V^T
    %vt = fagpu.shared_tile offset 0 : <128x128xf8E4M3FN>
    %r = fagpu.mma %p, %vt acc(%s) : !p, !fagpu.smem_tile<128x128xf8E4M3FN>, !s -> !s
    fagpu.mma_wait pending 0
    %pinned = fagpu.pin %r : !s
    llvm.return
  }
  llvm.func @narrow_value_tile(%vmap: !llvm.ptr, %stage: i32, %d: i32, %head: i32, %batch: i32, %key: i32) {
    %kv = fagpu.create_pipeline {barrier_offset = 131072 : i64, tile_offset = 0 : i64} : !kv224
    fagpu.tma_load %vmap[%d, %head, %batch] column %key into %kv[%stage] buffer 1 : !llvm.ptr, !kv224
    llvm.return
  }
  llvm.func @narrow_value_mma(%row: i32, %nk: i32, %scale: f32) {
    %zero = arith.constant 0.0 : f32
    %ninf = arith.constant 0xFF800000 : f32
    %s = fagpu.splat %zero : !s224
    %m0 = fagpu.splat %ninf : !fagpu.fragment<64xf32, rows>
    %l0 = fagpu.splat %zero : !fagpu.fragment<64xf32, rows>
    %p, %m, %l, %alpha = fagpu.softmax_step %s, %m0, %l0 keys(%row, %nk) row %row scale %scale {probs_scale = 256.0 : f32} : !s224, !fagpu.fragment<64xf32, rows> -> !p224
    %o = fagpu.splat %zero : !o
    %vt = fagpu.shared_tile offset 0 : <128x224xf8E4M3FN, swizzle = 32>
    %r = fagpu.mma %p, %vt acc(%o) : !p224, !fagpu.smem_tile<128x224xf8E4M3FN, swizzle = 32>, !o -> !o
    fagpu.mma_wait pending 0
    %pinned = fagpu.pin %r : !o
    llvm.return
  }
}
}
