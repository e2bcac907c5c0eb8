// RUN: fa-opt %s --split-input-file --convert-fagpu-to-nvvm | FileCheck %s

// The e4m3 row sums on the tensor cores (fagpu-row-sum-mma), op by op.

!sums = !fagpu.fragment<64x8xf32, accumulator>
!rows = !fagpu.fragment<64xf32, rows>
!p8 = !fagpu.fragment<64x224xf8E4M3FN, operand_a>
!tiles = !fagpu.smem_tile<16x224xf8E4M3FN, swizzle = 32>
!ones = !fagpu.smem_tile<8x224xf8E4M3FN, block_rows = 16, swizzle = 32>
!s = !fagpu.fragment<64x224xf32, accumulator>

// The tile of consumer 1: rows 8 .. 15 of the 16-row tile, 256 bytes into
// each 512-byte column block of 32 keys. Its 7 blocks x 16 pieces of 16
// bytes, one a thread: the first 2 pieces of each block (row 0) are e4m3
// ones (0x38383838), the rest zero; then the fence for the async proxy and
// the warpgroup's barrier.
// CHECK-LABEL: llvm.func @init_tile
// CHECK: %[[IN:.*]] = arith.cmpi ult, %[[PIECE:.*]], %c112_i32
// CHECK: scf.if %[[IN]]
// CHECK: %[[CHUNK:.*]] = arith.remui %[[PIECE]], %c16_i32
// CHECK: %[[BLOCK:.*]] = arith.divui %[[PIECE]], %c16_i32
// CHECK: arith.muli %[[BLOCK]], %c512_i32
// CHECK: %[[ONES:.*]] = arith.cmpi ult, %[[CHUNK]], %c2_i32
// CHECK: arith.select %[[ONES]], %c943208504_i32, %c0_i32
// CHECK: llvm.store {{.*}} {alignment = 16 : i64} : vector<4xi32>, !llvm.ptr<3>
// CHECK: nvvm.fence.proxy {kind = #nvvm.proxy_kind<async.shared>, space = #nvvm.shared_space<cta>}
// CHECK: nvvm.barrier id = %{{.*}} number_of_threads = %c128_i32
// P against the tile: seven m64n8k32 e4m3 MMAs into the four registers of
// the sums, each k-step's descriptor 512 bytes (32 in 16-byte units) on.
// CHECK: nvvm.wgmma.fence.aligned
// CHECK-COUNT-7: wgmma.mma_async.sync.aligned.m64n8k32.f32.e4m3.e4m3 {$0, $1, $2, $3}
// CHECK: nvvm.wgmma.commit.group.sync.aligned
gpu.module @fa_kernels {
  llvm.mlir.global external @fa_smem() {addr_space = 3 : i32, alignment = 1024 : i64} : !llvm.array<0 x i8>
  llvm.func @init_tile(%consumer: i32, %barrier: i32, %row: i32, %scale: f32) {
    %zero = arith.constant 0.0 : f32
    %ninf = arith.constant 0xFF800000 : f32
    %m0 = fagpu.splat %ninf : !rows
    %s = fagpu.splat %scale : !s
    %p, %m, %l1, %alpha = fagpu.softmax_step %s, %m0, %m0 keys(%row, %row) row %row scale %scale {probs_scale = 2.560000e+02 : f32, no_row_sum} : !s, !rows -> !p8
    %all = fagpu.shared_tile offset 1024 : !tiles
    %ones = fagpu.tile_rows %all[%consumer] : !tiles -> !ones
    fagpu.init_row_sum_tile %ones barrier %barrier : !ones
    %l0 = fagpu.splat %zero : !sums
    %l = fagpu.mma %p, %ones acc(%l0) : !p8, !ones, !sums -> !sums
    llvm.return
  }
}

// -----

!sums = !fagpu.fragment<64x8xf32, accumulator>
!rows = !fagpu.fragment<64xf32, rows>

// A thread's part of each row's sum: its two columns of row g (registers 0
// and 1) and of row g + 8 (2 and 3).
// CHECK-LABEL: llvm.func @partials
// CHECK-SAME: (%[[A:.*]]: f32, %[[B:.*]]: f32, %[[C:.*]]: f32, %[[D:.*]]: f32)
// CHECK: arith.addf %[[A]], %[[B]] : f32
// CHECK: arith.addf %[[C]], %[[D]] : f32
gpu.module @fa_kernels {
  llvm.func @partials(%a: f32, %b: f32, %c: f32, %d: f32) {
    %acc = builtin.unrealized_conversion_cast %a, %b, %c, %d : f32, f32, f32, f32 to !sums
    %l = fagpu.row_partials %acc : !sums -> !rows
    llvm.return
  }
}

// -----

!rows = !fagpu.fragment<64xf32, rows>
!p8 = !fagpu.fragment<64x32xf8E4M3FN, operand_a>
!s = !fagpu.fragment<64x32xf32, accumulator>

// no_row_sum: l' = alpha l, and no score is added to a row sum: the only
// adds are the two rows' log2(2^8) on their base. With the sums (the
// default) each of the thread's 16 P values is added after its ex2.
// CHECK-LABEL: llvm.func @no_row_sum
// CHECK-COUNT-2: arith.addf %{{.*}}, %cst{{.*}} : f32
// CHECK-NOT: arith.addf
// CHECK: nvvm.convert.f32x2.to.f8x2
// CHECK-LABEL: llvm.func @row_sum
// CHECK-COUNT-2: arith.addf %{{.*}}, %cst{{.*}} : f32
// CHECK: %[[P:.*]] = llvm.inline_asm {{.*}}ex2.approx.ftz.f32
// CHECK-NEXT: arith.addf %cst{{.*}}, %[[P]] : f32
gpu.module @fa_kernels {
  llvm.func @no_row_sum(%row: i32, %nk: i32, %scale: f32) {
    %zero = arith.constant 0.0 : f32
    %ninf = arith.constant 0xFF800000 : f32
    %m0 = fagpu.splat %ninf : !rows
    %l0 = fagpu.splat %zero : !rows
    %s = fagpu.splat %scale : !s
    %p, %m, %l, %alpha = fagpu.softmax_step %s, %m0, %l0 keys(%row, %nk) row %row scale %scale {probs_scale = 2.560000e+02 : f32, no_row_sum} : !s, !rows -> !p8
    llvm.return
  }
  llvm.func @row_sum(%row: i32, %nk: i32, %scale: f32) {
    %zero = arith.constant 0.0 : f32
    %ninf = arith.constant 0xFF800000 : f32
    %m0 = fagpu.splat %ninf : !rows
    %l0 = fagpu.splat %zero : !rows
    %s = fagpu.splat %scale : !s
    %p, %m, %l, %alpha = fagpu.softmax_step %s, %m0, %l0 keys(%row, %nk) row %row scale %scale {probs_scale = 2.560000e+02 : f32} : !s, !rows -> !p8
    llvm.return
  }
}
