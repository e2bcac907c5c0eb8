// RUN: fa-opt %s --split-input-file --convert-fagpu-to-nvvm | FileCheck %s

// fagpu.widen_tile: an e4m3 cache's K tile [64, 128] (one 128-byte line of
// codes a row) widened into a 16-bit tile's two 64-column blocks. Piece p
// (8 codes) is row p / 16, columns 8 (p mod 16) ..: 1024 pieces, 8 a
// thread, 8 rows (1024 bytes, the swizzle's period) apart, so a thread's
// addresses are computed once and stepped. Each piece reads 8 bytes at its
// swizzled place in the e4m3 line, converts 4 pairs, and writes 16 bytes
// into column block (p mod 16) / 8 of the 16-bit tile (8192 bytes apart),
// chunk p mod 8 XOR row mod 8; then the fence for the async proxy and the
// warpgroup's barrier.

// CHECK-LABEL: llvm.func @widen_f16
// CHECK-NOT: scf.if
// CHECK: arith.muli %{{.*}}, %c8192_i32
// CHECK: llvm.load {{.*}} {alignment = 8 : i64} : !llvm.ptr<3> -> vector<4xi16>
// CHECK-COUNT-4: nvvm.convert.f8x2.to.f16x2 {{.*}} : vector<2xi8>(f8E4M3FN) -> vector<2xf16>
// CHECK: llvm.store {{.*}} {alignment = 16 : i64} : vector<4xi32>, !llvm.ptr<3>
// CHECK: %c1024_i32
// CHECK-COUNT-24: nvvm.convert.f8x2.to.f16x2
// CHECK: %c7168_i32
// CHECK-COUNT-4: nvvm.convert.f8x2.to.f16x2
// CHECK-NOT: nvvm.convert.f8x2.to.f16x2
// CHECK: nvvm.fence.proxy {kind = #nvvm.proxy_kind<async.shared>, space = #nvvm.shared_space<cta>}
// CHECK: nvvm.barrier id = %{{.*}} number_of_threads = %c128_i32
gpu.module @fa_kernels {
  llvm.mlir.global external @fa_smem() {addr_space = 3 : i32, alignment = 1024 : i64} : !llvm.array<0 x i8>
  llvm.func @widen_f16(%barrier: i32) {
    %codes = fagpu.shared_tile offset 0 : !fagpu.smem_tile<64x128xf8E4M3FN>
    %k = fagpu.shared_tile offset 8192 : !fagpu.smem_tile<64x128xf16>
    fagpu.widen_tile %codes to %k barrier %barrier : !fagpu.smem_tile<64x128xf8E4M3FN> to !fagpu.smem_tile<64x128xf16>
    llvm.return
  }
}

// -----

// bf16: each converted pair goes through f32 (no e4m3 -> bf16 cvt before
// sm_100), exactly.
// CHECK-LABEL: llvm.func @widen_bf16
// CHECK: nvvm.convert.f8x2.to.f16x2
// CHECK-NEXT: llvm.fpext {{.*}} : vector<2xf16> to vector<2xf32>
// CHECK-NEXT: llvm.fptrunc {{.*}} : vector<2xf32> to vector<2xbf16>
gpu.module @fa_kernels {
  llvm.mlir.global external @fa_smem() {addr_space = 3 : i32, alignment = 1024 : i64} : !llvm.array<0 x i8>
  llvm.func @widen_bf16(%barrier: i32) {
    %codes = fagpu.shared_tile offset 0 : !fagpu.smem_tile<64x128xf8E4M3FN>
    %k = fagpu.shared_tile offset 8192 : !fagpu.smem_tile<64x128xbf16>
    fagpu.widen_tile %codes to %k barrier %barrier : !fagpu.smem_tile<64x128xf8E4M3FN> to !fagpu.smem_tile<64x128xbf16>
    llvm.return
  }
}
