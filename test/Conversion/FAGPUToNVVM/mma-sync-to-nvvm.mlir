// RUN: fa-opt %s --convert-fagpu-to-nvvm --cse | FileCheck %s

// The sm_80 forms of the kernel-body ops, each through its own lowering
// pattern: cp.async copies into row-major tiles, the group commit and wait,
// ldmatrix fragment loads, mma.sync MMAs on 128-row fragments (two m16 row
// tiles per warp), and the softmax ops on them. D = 64, B_c = 64, f16.

!kv = !fagpu.pipeline<stages = 2, buffers = 2, 64x64xf16, row_major>
!rows = !fagpu.fragment<128xf32, rows>
!p = !fagpu.fragment<128x64xf16, operand_a>
!o = !fagpu.fragment<128x64xf32, accumulator>

// CHECK-LABEL: llvm.func @body
// Row-major tiles need no 1 KiB alignment: the global's address as it is.
// CHECK: %[[SMEM:.*]] = llvm.mlir.addressof @fa_smem : !llvm.ptr<3>
// CHECK-NOT: llvm.ptrtoint
// copy_async: 128 x 64 f16 = 1024 chunks of 16 B, 8 per thread; rows past
// the bound read row 0 with source size 0 (zero fill).
// CHECK: arith.cmpi ult
// CHECK: arith.select %{{.*}}, %c16_i32, %c0_i32
// CHECK-COUNT-8: nvvm.cp.async.shared.global %{{.*}}, %{{.*}}, 16, cache = cg, %{{.*}} : !llvm.ptr<3>, !llvm.ptr<1>, i32
// CHECK-NOT: nvvm.cp.async.shared.global
// copy_commit, copy_wait: the group, then the CTA.
// CHECK: nvvm.cp.async.commit.group
// CHECK-NEXT: nvvm.cp.async.wait.group 0
// CHECK-NEXT: nvvm.barrier0
// load_fragment: 2 row tiles x D / 16 = 4 k-steps of ldmatrix.x4.
// CHECK-COUNT-8: nvvm.ldmatrix {{.*}}layout = #nvvm.mma_layout<row>, num = 4
// mma (S = Q K^T): per k-step (4 of them) 2 K loads, each x4 holding the
// B fragments of two n8 tiles and feeding both row tiles: 4 mma.sync each.
// CHECK: nvvm.ldmatrix {{.*}}layout = #nvvm.mma_layout<row>, num = 4
// CHECK-COUNT-4: nvvm.mma.sync A[{{.*}}] B[{{.*}}] C[{{.*}}] {layoutA = #nvvm.mma_layout<row>, layoutB = #nvvm.mma_layout<col>, shape = #nvvm.shape<m = 16, n = 8, k = 16>}
// CHECK: nvvm.ldmatrix
// softmax_step on both row tiles: the quad's row max per row (2 tiles x
// 2 rows), MUFU exp2.
// CHECK-COUNT-4: nvvm.shfl.sync  bfly %{{.*}}, %{{.*}}, %c1_i32
// CHECK: ex2.approx.ftz.f32
// mma (O += P V): V read transposed.
// CHECK: nvvm.ldmatrix {{.*}}layout = #nvvm.mma_layout<col>, num = 4
// CHECK-COUNT-4: nvvm.mma.sync
// store_rows and store_lse: rows of both row tiles.
// CHECK: nvvm.shfl.sync  bfly %{{.*}}, %{{.*}}, %c3_i32{{.*}} : i32 -> i32
// CHECK: llvm.store %{{.*}}, %{{.*}} {alignment = 16 : i64} : vector<4xi32>, !llvm.ptr<1>
// CHECK: llvm.inline_asm "lg2.approx.ftz.f32 $0, $1;"
// CHECK-NOT: fagpu.
module attributes {gpu.container_module} {
gpu.module @fa_kernels {
  llvm.mlir.global external @fa_smem() {addr_space = 3 : i32, alignment = 16 : i64} : !llvm.array<0 x i8>
  llvm.func @body(%qptr: !llvm.ptr<1>, %kptr: !llvm.ptr<1>, %optr: !llvm.ptr<1>,
                  %lse: !llvm.ptr<1>, %row: i32, %nk: i32, %stage: i32,
                  %scale: f32, %matrix: i32) {
    %qt = fagpu.shared_tile offset 0 : !fagpu.smem_tile<128x64xf16, row_major>
    %kv = fagpu.create_pipeline {barrier_offset = 0 : i64, tile_offset = 16384 : i64} : !kv
    fagpu.copy_async %qptr[%row] bound %nk into %qt threads 128 : !llvm.ptr<1>, !fagpu.smem_tile<128x64xf16, row_major>
    fagpu.copy_commit
    fagpu.copy_wait pending 0
    %qf = fagpu.load_fragment %qt : !fagpu.smem_tile<128x64xf16, row_major> -> !p
    %zero = arith.constant 0.0 : f32
    %ninf = arith.constant 0xFF800000 : f32
    %m0 = fagpu.splat %ninf : !rows
    %l0 = fagpu.splat %zero : !rows
    %o0 = fagpu.splat %zero : !o
    %kt = fagpu.pipeline_tile %kv[%stage] buffer 0 : !kv -> !fagpu.smem_tile<64x64xf16, row_major>
    %vt = fagpu.pipeline_tile %kv[%stage] buffer 1 : !kv -> !fagpu.smem_tile<64x64xf16, row_major>
    %s = fagpu.mma %qf, %kt : !p, !fagpu.smem_tile<64x64xf16, row_major> -> !o
    %p, %m, %l, %alpha = fagpu.softmax_step %s, %m0, %l0 keys(%row, %nk) row %row scale %scale : !o, !rows -> !p
    %or = fagpu.rescale %o0, %alpha : !o, !rows
    %o = fagpu.mma %p, %vt acc(%or) {mn_major} : !p, !fagpu.smem_tile<64x64xf16, row_major>, !o -> !o
    %t, %f = fagpu.row_totals %l : !rows
    %orows1, %ostride1 = fagpu.output_rows %optr[%matrix] rows %nk : !llvm.ptr<1> as f16 {columns = 64 : i64}
    fagpu.store_rows %o, %f rows(%row, %nk) to %orows1 stride %ostride1 : !llvm.ptr<1> as f16 : !o, !rows
    %lse_rows1 = fagpu.lse_rows %lse[%matrix] rows %nk : !llvm.ptr<1>
    fagpu.store_lse %m, %t rows(%row, %nk) to %lse_rows1 : !llvm.ptr<1> : !rows
    llvm.return
  }

  // row_tile: tile 1 of a 128-row fragment is the second half of its
  // registers, so storing it writes one row tile: two rows of two 16-byte
  // runs (D = 64), the first tile's values untouched.
  llvm.func @second_row_tile(%out: !llvm.ptr<1>, %row: i32, %nq: i32) {
    %zero = arith.constant 0.0 : f32
    %one = arith.constant 1.0 : f32
    %o = fagpu.splat %zero : !o
    %l = fagpu.splat %one : !rows
    %o1 = fagpu.row_tile %o[1] : !o -> !fagpu.fragment<64x64xf32, accumulator>
    %l1 = fagpu.row_tile %l[1] : !rows -> !fagpu.fragment<64xf32, rows>
    %t, %f = fagpu.row_totals %l1 : !fagpu.fragment<64xf32, rows>
    %base, %stride = fagpu.output_rows %out[%row] rows %nq : !llvm.ptr<1> as f16 {columns = 64 : i64}
    fagpu.store_rows %o1, %f rows(%row, %nq) to %base stride %stride : !llvm.ptr<1> as f16 : !fagpu.fragment<64x64xf32, accumulator>, !fagpu.fragment<64xf32, rows>
    llvm.return
  }
}
}

// CHECK-LABEL: llvm.func @second_row_tile
// CHECK-COUNT-4: llvm.store %{{.*}}, %{{.*}} {alignment = 16 : i64} : vector<4xi32>, !llvm.ptr<1>
// CHECK-NOT: llvm.store
// CHECK-NOT: fagpu.
// CHECK: llvm.return
