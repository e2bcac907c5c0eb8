// RUN: fa-opt %s --convert-fagpu-to-nvvm | FileCheck %s

// Each sm_100a kernel-body op through its own lowering pattern: the ops of
// one FA4 block (D = 64, B_c = 64) in the three roles.

// init_barriers: thread 0, each operand's barriers in offset order with
// its arrivals (Q: 1; the ring's 4 x 2: 1; s_full: 1; p_full: 128), a
// fence for the async proxy, no CTA barrier.
// CHECK-LABEL: llvm.func @body
// CHECK: scf.if
// CHECK-COUNT-10: nvvm.mbarrier.init %{{.*}}, %c1_i32
// CHECK-COUNT-2: nvvm.mbarrier.init %{{.*}}, %c128_i32
// CHECK-NEXT: nvvm.fence.mbarrier.init
// CHECK-NOT: nvvm.barrier0
// tmem_alloc: warp 5 allocates 256 columns and gives up the permit; the
// CTA barrier between tcgen05 fences publishes the address in the slot.
// CHECK: arith.cmpi eq, %arg9, %c5_i32
// CHECK: nvvm.tcgen05.alloc %{{.*}}, %c256_i32 : !llvm.ptr<3>, i32
// CHECK-NEXT: nvvm.tcgen05.relinquish_alloc_permit
// CHECK: nvvm.tcgen05.fence <before>
// CHECK-NEXT: nvvm.barrier0
// CHECK-NEXT: nvvm.tcgen05.fence <after>
// CHECK-NEXT: %[[TMEM:.*]] = llvm.load %{{.*}} : !llvm.ptr<3> -> i32
// tcgen05_roles: warps 0-3 the softmax ...
// CHECK: %[[SOFTMAX:.*]] = arith.cmpi ult, %arg9, %c4_i32
// CHECK: scf.if %[[SOFTMAX]] {
// barrier_wait: the barrier of use %arg10 (mod 2) in phase (use / 2) mod 2,
// then the tcgen05 fence.
// CHECK: arith.remui %arg10, %c2_i32
// CHECK: arith.divui %arg10, %c2_i32
// CHECK: nvvm.mbarrier.try_wait.parity
// CHECK-NEXT: nvvm.tcgen05.fence <after>
// tmem_load: the warp's lanes (lane field 32 w << 16), 64 columns in two
// 32x32b.x32 loads, one wait.
// CHECK: arith.shli %{{.*}}, %c16_i32
// CHECK-COUNT-2: nvvm.tcgen05.ld %{{.*}} {shape = #nvvm.tcgen05_ldst_shape<shape_32x32b>} : vector<32xi32>
// CHECK-NEXT: nvvm.tcgen05.wait <load>
// softmax_step on a row per thread: no shuffles.
// CHECK-NOT: nvvm.shfl.sync
// CHECK: ex2.approx.ftz.f32
// rescale of O in TMEM under the warp vote: ld, multiply, st per 32
// columns, then wait for the stores.
// CHECK: nvvm.vote.sync any
// CHECK: nvvm.tcgen05.ld
// CHECK: arith.mulf
// CHECK: nvvm.tcgen05.st
// CHECK: nvvm.tcgen05.wait <store>
// tmem_store into an f16 region: pairs packed, one x32 store of 32 columns.
// CHECK: llvm.fptrunc %{{.*}} : vector<2xf32> to vector<2xf16>
// CHECK: nvvm.tcgen05.st
// CHECK-NEXT: nvvm.tcgen05.wait <store>
// barrier_arrive: fence, then the arrival.
// CHECK-NEXT: nvvm.tcgen05.fence <before>
// CHECK: nvvm.mbarrier.arrive %{{.*}} : !llvm.ptr<3>
// store_tmem_rows: 16-byte stores of the thread's row.
// CHECK: nvvm.tcgen05.ld
// CHECK: llvm.store %{{.*}} {alignment = 16 : i64} : vector<4xi32>, !llvm.ptr<1>
// ... lane 0 of warp 4 the loads, lane 0 of warp 5 the MMAs.
// CHECK: arith.cmpi eq, %{{.*}}, %c0_i32
// CHECK: arith.cmpi eq, %arg9, %c4_i32
// CHECK: nvvm.cp.async.bulk.tensor.shared.cluster.global
// CHECK: } else {
// mma S = Q K^T into TMEM: D / 16 = 4 k-steps, the first overwriting;
// instruction descriptor 0x08100010 (f32 D, f16 A/B, N = 64, M = 128).
// CHECK: nvvm.tcgen05.mma %{{.*}}, %{{.*}}, %{{.*}}, %c135266320_i32, %false {{.*}} : (!llvm.ptr<6>, i64, i64, i32, i1)
// CHECK-COUNT-3: nvvm.tcgen05.mma %{{.*}}, %{{.*}}, %{{.*}}, %c135266320_i32, %true
// pipeline_release {commit} and mma_commit: tcgen05.commit on the barriers.
// CHECK: nvvm.tcgen05.commit
// CHECK: nvvm.tcgen05.commit
// mma O += P V: P from TMEM, B MN-major (bit 16), the first k-step adding
// iff %arg11.
// CHECK: nvvm.tcgen05.mma %{{.*}}, %{{.*}}, %{{.*}}, %c135331856_i32, %arg11 {{.*}} : (!llvm.ptr<6>, !llvm.ptr<6>, i64, i32, i1)
// CHECK-COUNT-3: nvvm.tcgen05.mma %{{.*}}, %{{.*}}, %{{.*}}, %c135331856_i32, %true
// tmem_dealloc: CTA barrier, then warp 5 reconverges and frees.
// CHECK: nvvm.barrier0
// CHECK: nvvm.bar.warp.sync
// CHECK: nvvm.tcgen05.dealloc %{{.*}}, %c256_i32 : !llvm.ptr<6>, i32

!q = !fagpu.pipeline<stages = 1, buffers = 1, 128x64xf16, fill_once>
!kv = !fagpu.pipeline<stages = 2, buffers = 2, 64x64xf16>
!row = !fagpu.fragment<128xf32, lanes>
!s = !fagpu.fragment<128x64xf32, lanes>

module attributes {gpu.container_module} {
gpu.module @fa_kernels {
  llvm.mlir.global external @fa_smem() {addr_space = 3 : i32, alignment = 1024 : i64} : !llvm.array<0 x i8>
  llvm.func @body(%qmap: !llvm.ptr, %kmap: !llvm.ptr, %out: !llvm.ptr<1>,
                  %lse: !llvm.ptr<1>, %nq: i32, %nk: i32, %scale: f32,
                  %row: i32, %matrix: i32, %warp: i32, %i: i32,
                  %not_first: i1, %stage: i32) {
    %c0 = arith.constant 0 : i32
    %c64 = arith.constant 64 : i32
    %c128 = arith.constant 128 : i32
    %q = fagpu.create_pipeline {barrier_offset = 49152 : i64, tile_offset = 0 : i64} : !q
    %kv = fagpu.create_pipeline {barrier_offset = 49160 : i64, tile_offset = 16384 : i64} : !kv
    %s_full = fagpu.create_barriers offset 49224 : !fagpu.barriers<1>
    %p_full = fagpu.create_barriers offset 49232 : !fagpu.barriers<2>
    fagpu.init_barriers %q, %kv, %s_full, %p_full arrivals [1, 1, 1, 128]
        : !q, !kv, !fagpu.barriers<1>, !fagpu.barriers<2>
    %tmem = fagpu.tmem_alloc warp %warp alloc_warp 5 slot 49248 : !fagpu.tmem<128x256xf32>
    %o = fagpu.tmem_slice %tmem[%c128] : !fagpu.tmem<128x256xf32> -> !fagpu.tmem<128x64xf32>
    fagpu.tcgen05_roles %warp load_warp 4 mma_warp 5 softmax {
      %ninf = arith.constant 0xFF800000 : f32
      %m0 = fagpu.splat %ninf : !row
      %l0 = fagpu.splat %ninf : !row
      fagpu.barrier_wait %p_full use %i : !fagpu.barriers<2>
      %st = fagpu.tmem_slice %tmem[%c0] : !fagpu.tmem<128x256xf32> -> !fagpu.tmem<128x64xf32>
      %s = fagpu.tmem_load %st : !fagpu.tmem<128x64xf32> -> !s
      %p, %m, %l, %alpha, %moved = fagpu.softmax_step %s, %m0, %l0 keys(%row, %nk) row %row scale %scale {rescale_threshold = 8.0 : f32} : !s, !row -> !s, i1
      fagpu.rescale %o, %alpha if %moved : !fagpu.tmem<128x64xf32>, !row
      %pt = fagpu.tmem_slice %tmem[%c0] : !fagpu.tmem<128x256xf32> -> !fagpu.tmem<128x64xf16>
      fagpu.tmem_store %p, %pt : !s, !fagpu.tmem<128x64xf16>
      fagpu.barrier_arrive %p_full use %i : !fagpu.barriers<2>
      %t, %f = fagpu.row_totals %l : !row
      fagpu.store_tmem_rows %o, %f rows(%row, %matrix, %nq) to %out : !llvm.ptr<1> as f16 : !fagpu.tmem<128x64xf32>, !row
      %lse_rows1 = fagpu.lse_rows %lse[%matrix] rows %nq : !llvm.ptr<1>
      fagpu.store_lse %m, %t rows(%row, %nq) to %lse_rows1 : !llvm.ptr<1> : !row
    } load {
      fagpu.tma_load %qmap[%row, %matrix] into %q[%c0] buffer 0 : !llvm.ptr, !q
    } mma {
      %qt = fagpu.pipeline_tile %q[%c0] buffer 0 : !q -> !fagpu.smem_tile<128x64xf16>
      %kt = fagpu.pipeline_tile %kv[%stage] buffer 0 : !kv -> !fagpu.smem_tile<64x64xf16>
      %st = fagpu.tmem_slice %tmem[%c0] : !fagpu.tmem<128x256xf32> -> !fagpu.tmem<128x64xf32>
      fagpu.mma %qt, %kt acc(%st) : !fagpu.smem_tile<128x64xf16>, !fagpu.smem_tile<64x64xf16>, !fagpu.tmem<128x64xf32>
      fagpu.pipeline_release %kv[%stage] buffer 0 {commit} : !kv
      fagpu.mma_commit %s_full use %i : !fagpu.barriers<1>
      %pt = fagpu.tmem_slice %tmem[%c0] : !fagpu.tmem<128x256xf32> -> !fagpu.tmem<128x64xf16>
      %vt = fagpu.pipeline_tile %kv[%stage] buffer 1 : !kv -> !fagpu.smem_tile<64x64xf16>
      fagpu.mma %pt, %vt acc(%o) accumulate(%not_first) {mn_major} : !fagpu.tmem<128x64xf16>, !fagpu.smem_tile<64x64xf16>, !fagpu.tmem<128x64xf32>
    }
    fagpu.tmem_dealloc %tmem warp %warp alloc_warp 5 : !fagpu.tmem<128x256xf32>
    llvm.return
  }
}
}
