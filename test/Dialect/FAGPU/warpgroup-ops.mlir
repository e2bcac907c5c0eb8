// RUN: fa-opt %s | fa-opt | FileCheck %s

// Round trip of the kernel-body ops and types (what fagpu-build-kernels
// writes): one consumer tile of an FA3 kernel, D = 64, B_c = 64.

!q = !fagpu.pipeline<stages = 1, buffers = 1, 128x64xf16>
!kv = !fagpu.pipeline<stages = 2, buffers = 2, 64x64xf16>
!rows = !fagpu.fragment<64xf32, rows>
!s = !fagpu.fragment<64x64xf32, accumulator>
!p = !fagpu.fragment<64x64xf16, operand_a>
!o = !fagpu.fragment<64x64xf32, accumulator>
!kv80 = !fagpu.pipeline<stages = 2, buffers = 2, 64x64xf16, row_major>
!rows80 = !fagpu.fragment<128xf32, rows>
!p80 = !fagpu.fragment<128x64xf16, operand_a>
!o80 = !fagpu.fragment<128x64xf32, accumulator>

// CHECK-LABEL: llvm.func @body
// CHECK: %[[Q:.*]] = fagpu.create_pipeline {barrier_offset = 65536 : i64, tile_offset = 0 : i64} : <stages = 1, buffers = 1, 128x64xf16>
// CHECK: %[[KV:.*]] = fagpu.create_pipeline {barrier_offset = 65552 : i64, tile_offset = 16384 : i64} : <stages = 2, buffers = 2, 64x64xf16>
// CHECK: fagpu.init_pipelines %[[Q]], %[[KV]] consumer_arrivals 8 : !fagpu.pipeline<stages = 1, buffers = 1, 128x64xf16>, !fagpu.pipeline<stages = 2, buffers = 2, 64x64xf16>
// CHECK: fagpu.warp_specialize %{{.*}} consumers 2 registers(producer = 24, consumer = 240) producer {
// CHECK: fagpu.pipeline_acquire %[[KV]][%{{.*}}] buffer 1 parity %{{.*}} : <stages = 2, buffers = 2, 64x64xf16>
// CHECK: fagpu.tma_load %{{.*}}[%{{.*}}, %{{.*}}] into %[[KV]][%{{.*}}] buffer 1 : !llvm.ptr, <stages = 2, buffers = 2, 64x64xf16>
// CHECK: fagpu.pipeline_commit %[[Q]][%{{.*}}] buffer 0
// CHECK: } consumer {
// CHECK: ^bb0(%[[C:.*]]: i32):
// CHECK: fagpu.wait_turn %{{.*}} threads 256
// CHECK: %[[QT:.*]] = fagpu.pipeline_tile %[[Q]][%{{.*}}] buffer 0 : <stages = 1, buffers = 1, 128x64xf16> -> <128x64xf16>
// CHECK: %[[QR:.*]] = fagpu.tile_rows %[[QT]][%[[C]]] : <128x64xf16> -> <64x64xf16, block_rows = 128>
// CHECK: %[[KT:.*]] = fagpu.pipeline_tile %[[KV]][%{{.*}}] buffer 0
// CHECK: %[[S:.*]] = fagpu.mma %[[QR]], %[[KT]] : !fagpu.smem_tile<64x64xf16, block_rows = 128>, <64x64xf16> -> !fagpu.fragment<64x64xf32, accumulator>
// CHECK: fagpu.pass_turn %{{.*}} threads 256
// CHECK: fagpu.mma_wait pending 0
// CHECK: %[[SP:.*]] = fagpu.pin %[[S]] : <64x64xf32, accumulator>
// CHECK: %{{.*}}, %{{.*}}, %{{.*}}, %{{.*}}, %{{.*}} = fagpu.softmax_step %[[SP]], %{{.*}}, %{{.*}} keys(%{{.*}}, %{{.*}}) row %{{.*}} scale %{{.*}} {causal, masked, rescale_threshold = 8.000000e+00 : f32} : <64x64xf32, accumulator>, <64xf32, rows> -> <64x64xf16, operand_a>, i1
// CHECK: fagpu.rescale %{{.*}}, %{{.*}} if %{{.*}} : !fagpu.fragment<64x64xf32, accumulator>, <64xf32, rows>
// CHECK: fagpu.mma %{{.*}}, %{{.*}} acc(%{{.*}}) {mn_major} : !fagpu.fragment<64x64xf16, operand_a>, <64x64xf16>, !fagpu.fragment<64x64xf32, accumulator> -> !fagpu.fragment<64x64xf32, accumulator>
// CHECK: fagpu.pipeline_release %[[KV]][%{{.*}}] buffer 1
// CHECK: %[[ST:.*]] = fagpu.shared_tile offset 49152 : <128x64xf16>
// CHECK: %[[TOTAL:.*]], %[[FACTOR:.*]] = fagpu.row_totals %{{.*}} : <64xf32, rows>
// CHECK: fagpu.store_wait
// CHECK: fagpu.stage_output %{{.*}}, %[[FACTOR]] into %{{.*}} sync %[[C]] : <64x64xf32, accumulator>, <64xf32, rows>, <64x64xf16, block_rows = 128>
// CHECK: fagpu.tma_store_staged %{{.*}} rows(%{{.*}}, %{{.*}}) to %{{.*}} : !llvm.ptr sync %[[C]] : <64x64xf16, block_rows = 128>
// CHECK: %[[LSEROWS:.*]] = fagpu.lse_rows %{{.*}}[%{{.*}}] rows %{{.*}} : <1>
// CHECK: fagpu.store_lse %{{.*}}, %[[TOTAL]] rows(%{{.*}}, %{{.*}}) to %[[LSEROWS]] : <1> : <64xf32, rows>
// CHECK: fagpu.store_wait
// CHECK-LABEL: llvm.func @split
// CHECK: %[[T:.*]], %[[F:.*]] = fagpu.row_totals %{{.*}} descale %{{.*}} : <64xf32, rows>
// CHECK: %[[OROWS:.*]], %[[OSTRIDE:.*]] = fagpu.output_rows %{{.*}}[%{{.*}}] rows %{{.*}} : <1> as f32 {columns = 32 : i64}
// CHECK: fagpu.store_rows %{{.*}}, %[[F]] rows(%{{.*}}, %{{.*}}) to %[[OROWS]] stride %[[OSTRIDE]] : <1> as f32 {columns = 32 : i64} : <64x64xf32, accumulator>, <64xf32, rows>
// CHECK: fagpu.store_lse %{{.*}}, %[[T]] rows(%{{.*}}, %{{.*}}) to %{{.*}} : <1> {probs_scale = 2.560000e+02 : f32} : <64xf32, rows>
// CHECK: fagpu.merge_splits rows(%{{.*}}, %{{.*}}, %{{.*}}) of %{{.*}} x %{{.*}} arrivals %{{.*}} partials(%{{.*}}, %{{.*}}) to %{{.*}} as f16 lse %{{.*}} {head_dim = 64 : i64} : <1>, <1>, <1>, <1>, !llvm.ptr<1>
// CHECK-LABEL: llvm.func @strided
// CHECK: fagpu.tma_load %{{.*}}[%[[I:.*]], %[[I]], %[[I]]] into
// CHECK: fagpu.output_rows {{.*}} as f16 strided(%[[I]], %[[S:.*]], %[[S]], %[[S]]) {columns = 64 : i64}
// CHECK: fagpu.store_rows
// CHECK: fagpu.stage_output
// CHECK: fagpu.tma_store_staged {{.*}} strided(%[[I]]) sync %[[I]]
// CHECK: fagpu.copy_staged_rows {{.*}} strided(%[[I]], %[[S]], %[[S]], %[[S]]) tma_blocks(%{{.*}} : !llvm.ptr) sync %[[I]] {columns = 48 : i64}
// CHECK: fagpu.merge_splits {{.*}} as f16 strided(%[[I]], %[[S]], %[[S]], %[[S]]) lse
module attributes {gpu.container_module} {
gpu.module @fa_kernels {
  llvm.mlir.global external @fa_smem() {addr_space = 3 : i32, alignment = 1024 : i64} : !llvm.array<0 x i8>
  llvm.func @body(%qmap: !llvm.ptr, %kmap: !llvm.ptr, %vmap: !llvm.ptr, %omap: !llvm.ptr,
                  %lse: !llvm.ptr<1>, %nq: i32, %nk: i32, %scale: f32, %wg: i32,
                  %stage: i32, %parity: i32, %row: i32, %matrix: i32) {
    %q = fagpu.create_pipeline {barrier_offset = 65536 : i64, tile_offset = 0 : i64} : !q
    %kv = fagpu.create_pipeline {barrier_offset = 65552 : i64, tile_offset = 16384 : i64} : !kv
    fagpu.init_pipelines %q, %kv consumer_arrivals 8 : !q, !kv
    fagpu.warp_specialize %wg consumers 2 registers(producer = 24, consumer = 240) producer {
      fagpu.pipeline_acquire %kv[%stage] buffer 1 parity %parity : !kv
      fagpu.tma_load %vmap[%row, %matrix] into %kv[%stage] buffer 1 : !llvm.ptr, !kv
      fagpu.pipeline_commit %q[%stage] buffer 0 : !q
    } consumer {
    ^bb0(%c: i32):
      %zero = arith.constant 0.0 : f32
      %ninf = arith.constant 0xFF800000 : f32
      %m0 = fagpu.splat %ninf : !rows
      %l0 = fagpu.splat %zero : !rows
      %o0 = fagpu.splat %zero : !o
      fagpu.wait_turn %c threads 256
      fagpu.pipeline_wait %q[%stage] buffer 0 parity %parity : !q
      %qt = fagpu.pipeline_tile %q[%stage] buffer 0 : !q -> !fagpu.smem_tile<128x64xf16>
      %qr = fagpu.tile_rows %qt[%c] : !fagpu.smem_tile<128x64xf16> -> !fagpu.smem_tile<64x64xf16, block_rows = 128>
      %kt = fagpu.pipeline_tile %kv[%stage] buffer 0 : !kv -> !fagpu.smem_tile<64x64xf16>
      %s = fagpu.mma %qr, %kt : !fagpu.smem_tile<64x64xf16, block_rows = 128>, !fagpu.smem_tile<64x64xf16> -> !s
      fagpu.pass_turn %c threads 256
      fagpu.mma_wait pending 0
      %sp = fagpu.pin %s : !s
      fagpu.pipeline_release %kv[%stage] buffer 0 : !kv
      %p, %m, %l, %alpha, %moved = fagpu.softmax_step %sp, %m0, %l0 keys(%row, %nk) row %row scale %scale {masked, causal, rescale_threshold = 8.0 : f32} : !s, !rows -> !p, i1
      %or = fagpu.rescale %o0, %alpha if %moved : !o, !rows
      %vt = fagpu.pipeline_tile %kv[%stage] buffer 1 : !kv -> !fagpu.smem_tile<64x64xf16>
      %o = fagpu.mma %p, %vt acc(%or) {mn_major} : !p, !fagpu.smem_tile<64x64xf16>, !o -> !o
      fagpu.mma_wait pending 0
      %op = fagpu.pin %o : !o
      fagpu.pipeline_release %kv[%stage] buffer 1 : !kv
      %st = fagpu.shared_tile offset 49152 : !fagpu.smem_tile<128x64xf16>
      %sr = fagpu.tile_rows %st[%c] : !fagpu.smem_tile<128x64xf16> -> !fagpu.smem_tile<64x64xf16, block_rows = 128>
      %total, %factor = fagpu.row_totals %l : !rows
      fagpu.store_wait
      fagpu.stage_output %op, %factor into %sr sync %c : !o, !rows, !fagpu.smem_tile<64x64xf16, block_rows = 128>
      fagpu.tma_store_staged %sr rows(%row, %matrix) to %omap : !llvm.ptr sync %c : !fagpu.smem_tile<64x64xf16, block_rows = 128>
      %lse_rows1 = fagpu.lse_rows %lse[%matrix] rows %nq : !llvm.ptr<1>
      fagpu.store_lse %m, %total rows(%row, %nq) to %lse_rows1 : !llvm.ptr<1> : !rows
      fagpu.store_wait
    }
    llvm.return
  }

  // Split-KV: a chunk's partial O in f32 from registers, then the merge.
  llvm.func @split(%i: i32, %p: !llvm.ptr<1>) {
    %zero = arith.constant 0.0 : f32
    %o = fagpu.splat %zero : !fagpu.fragment<64x64xf32, accumulator>
    %m = fagpu.splat %zero : !fagpu.fragment<64xf32, rows>
    %vd = arith.constant 0.5 : f32
    %t, %f = fagpu.row_totals %m descale %vd : !fagpu.fragment<64xf32, rows>
    %orows1, %ostride1 = fagpu.output_rows %p[%i] rows %i : !llvm.ptr<1> as f32 {columns = 32 : i64}
    fagpu.store_rows %o, %f rows(%i, %i) to %orows1 stride %ostride1 : !llvm.ptr<1> as f32 {columns = 32 : i64} : !fagpu.fragment<64x64xf32, accumulator>, !fagpu.fragment<64xf32, rows>
    %lse_rows2 = fagpu.lse_rows %p[%i] rows %i : !llvm.ptr<1>
    fagpu.store_lse %m, %t rows(%i, %i) to %lse_rows2 : !llvm.ptr<1> {probs_scale = 2.560000e+02 : f32} : !fagpu.fragment<64xf32, rows>
    fagpu.merge_splits rows(%i, %i, %i) of %i x %i arrivals %p partials(%p, %p) to %p as f16 lse %p {head_dim = 64 : i64} : !llvm.ptr<1>, !llvm.ptr<1>, !llvm.ptr<1>, !llvm.ptr<1>, !llvm.ptr<1>
    llvm.return
  }

  // Strided tensors: a rank-4 map's (row, head, batch); O of Hq = %i heads
  // at strides %s.
  llvm.func @strided(%i: i32, %s: i64, %p: !llvm.ptr<1>, %map: !llvm.ptr) {
    %tile = fagpu.shared_tile offset 49152 : !fagpu.smem_tile<128x64xf16>
    %st = fagpu.tile_rows %tile[%i] : !fagpu.smem_tile<128x64xf16> -> !fagpu.smem_tile<64x64xf16, block_rows = 128>
    %kv = fagpu.create_pipeline {barrier_offset = 65552 : i64, tile_offset = 16384 : i64} : !fagpu.pipeline<stages = 2, buffers = 2, 64x64xf16>
    fagpu.tma_load %map[%i, %i, %i] into %kv[%i] buffer 0 : !llvm.ptr, !fagpu.pipeline<stages = 2, buffers = 2, 64x64xf16>
    %zero = arith.constant 0.0 : f32
    %o = fagpu.splat %zero : !fagpu.fragment<64x64xf32, accumulator>
    %m = fagpu.splat %zero : !fagpu.fragment<64xf32, rows>
    %t, %f = fagpu.row_totals %m : !fagpu.fragment<64xf32, rows>
    %orows2, %ostride2 = fagpu.output_rows %p[%i] rows %i : !llvm.ptr<1> as f16 strided(%i, %s, %s, %s) {columns = 64 : i64}
    fagpu.store_rows %o, %f rows(%i, %i) to %orows2 stride %ostride2 : !llvm.ptr<1> as f16 : !fagpu.fragment<64x64xf32, accumulator>, !fagpu.fragment<64xf32, rows>
    fagpu.stage_output %o, %f into %st sync %i : !fagpu.fragment<64x64xf32, accumulator>, !fagpu.fragment<64xf32, rows>, !fagpu.smem_tile<64x64xf16, block_rows = 128>
    fagpu.tma_store_staged %st rows(%i, %i) to %map : !llvm.ptr strided(%i) sync %i : !fagpu.smem_tile<64x64xf16, block_rows = 128>
    fagpu.copy_staged_rows %st rows(%i, %i, %i) to %p : !llvm.ptr<1> strided(%i, %s, %s, %s) tma_blocks(%map : !llvm.ptr) sync %i {columns = 48 : i64} : !fagpu.smem_tile<64x64xf16, block_rows = 128>
    fagpu.merge_splits rows(%i, %i, %i) of %i x %i arrivals %p partials(%p, %p) to %p as f16 strided(%i, %s, %s, %s) lse %p {head_dim = 64 : i64} : !llvm.ptr<1>, !llvm.ptr<1>, !llvm.ptr<1>, !llvm.ptr<1>, !llvm.ptr<1>
    llvm.return
  }

  // A paged cache's K/V block gathered from four pages of 16 rows.
  // CHECK-LABEL: llvm.func @pages
  // CHECK: fagpu.tma_load_pages %{{.*}}[%{{.*}}, %{{.*}}, pages %{{.*}}, %{{.*}}, %{{.*}}, %{{.*}}] into %{{.*}}[%{{.*}}] buffer 1 {page_rows = 16 : i64}
  llvm.func @pages(%i: i32, %p0: i32, %p1: i32, %map: !llvm.ptr) {
    %kv = fagpu.create_pipeline {barrier_offset = 65552 : i64, tile_offset = 16384 : i64} : !fagpu.pipeline<stages = 2, buffers = 2, 64x64xf16>
    fagpu.tma_load_pages %map[%i, %i, pages %p0, %p1, %p0, %p1] into %kv[%i] buffer 1 {page_rows = 16 : i64} : !llvm.ptr, !fagpu.pipeline<stages = 2, buffers = 2, 64x64xf16>
    llvm.return
  }

  // The mma.sync (sm_80) forms: row-major tiles and a cp.async ring,
  // fragments of 128 rows (two row tiles per warp), synchronous MMAs.
  llvm.func @mma_sync_body(%qptr: !llvm.ptr<1>, %kptr: !llvm.ptr<1>,
                           %optr: !llvm.ptr<1>, %row: i32, %nk: i32,
                           %stage: i32, %scale: f32, %matrix: i32) {
    %qt = fagpu.shared_tile offset 0 : !fagpu.smem_tile<128x64xf16, row_major>
    %kv = fagpu.create_pipeline {barrier_offset = 0 : i64, tile_offset = 16384 : i64} : !kv80
    %kt = fagpu.pipeline_tile %kv[%stage] buffer 0 : !kv80 -> !fagpu.smem_tile<64x64xf16, row_major>
    %vt = fagpu.pipeline_tile %kv[%stage] buffer 1 : !kv80 -> !fagpu.smem_tile<64x64xf16, row_major>
    fagpu.copy_async %qptr[%row] bound %nk into %qt threads 128 : !llvm.ptr<1>, !fagpu.smem_tile<128x64xf16, row_major>
    fagpu.copy_async %kptr[%row] bound %nk into %kt threads 128 : !llvm.ptr<1>, !fagpu.smem_tile<64x64xf16, row_major>
    fagpu.copy_commit
    fagpu.copy_wait pending 0
    %qf = fagpu.load_fragment %qt : !fagpu.smem_tile<128x64xf16, row_major> -> !p80
    %zero = arith.constant 0.0 : f32
    %m0 = fagpu.splat %zero : !rows80
    %o0 = fagpu.splat %zero : !o80
    %s = fagpu.mma %qf, %kt : !p80, !fagpu.smem_tile<64x64xf16, row_major> -> !o80
    %s2 = fagpu.mma %qt, %kt : !fagpu.smem_tile<128x64xf16, row_major>, !fagpu.smem_tile<64x64xf16, row_major> -> !o80
    %p, %m, %l, %alpha = fagpu.softmax_step %s, %m0, %m0 keys(%row, %nk) row %row scale %scale : !o80, !rows80 -> !p80
    %or = fagpu.rescale %o0, %alpha : !o80, !rows80
    %p2, %m2, %l2, %alpha2, %os = fagpu.softmax_step %s2, %m0, %m0 rescale(%or : !o80 -> !o80) keys(%row, %nk) row %row scale %scale {masked, causal, tree_row_max} : !o80, !rows80 -> !p80
    %o = fagpu.mma %p, %vt acc(%os) {mn_major} : !p80, !fagpu.smem_tile<64x64xf16, row_major>, !o80 -> !o80
    %o1 = fagpu.row_tile %o[1] : !o80 -> !o
    %m1 = fagpu.row_tile %m[1] : !rows80 -> !rows
    %l1 = fagpu.row_tile %l[1] : !rows80 -> !rows
    %t1, %f1 = fagpu.row_totals %l1 : !rows
    %orows3, %ostride3 = fagpu.output_rows %optr[%matrix] rows %nk : !llvm.ptr<1> as f16 {columns = 64 : i64}
    fagpu.store_rows %o1, %f1 rows(%row, %nk) to %orows3 stride %ostride3 : !llvm.ptr<1> as f16 : !o, !rows
    %lse_rows3 = fagpu.lse_rows %optr[%matrix] rows %nk : !llvm.ptr<1>
    fagpu.store_lse %m1, %t1 rows(%row, %nk) to %lse_rows3 : !llvm.ptr<1> : !rows
    llvm.return
  }
}
}

// CHECK-LABEL: llvm.func @mma_sync_body
// CHECK: %[[QT:.*]] = fagpu.shared_tile offset 0 : <128x64xf16, row_major>
// CHECK: %[[KV:.*]] = fagpu.create_pipeline {barrier_offset = 0 : i64, tile_offset = 16384 : i64} : <stages = 2, buffers = 2, 64x64xf16, row_major>
// CHECK: %[[KT:.*]] = fagpu.pipeline_tile %[[KV]][%{{.*}}] buffer 0 : <stages = 2, buffers = 2, 64x64xf16, row_major> -> <64x64xf16, row_major>
// CHECK: fagpu.copy_async %{{.*}}[%{{.*}}] bound %{{.*}} into %[[QT]] threads 128 : <1>, <128x64xf16, row_major>
// CHECK: fagpu.copy_commit
// CHECK: fagpu.copy_wait pending 0
// CHECK: %[[QF:.*]] = fagpu.load_fragment %[[QT]] : <128x64xf16, row_major> -> <128x64xf16, operand_a>
// CHECK: fagpu.mma %[[QF]], %[[KT]] : !fagpu.fragment<128x64xf16, operand_a>, <64x64xf16, row_major> -> !fagpu.fragment<128x64xf32, accumulator>
// CHECK: fagpu.mma %[[QT]], %[[KT]] : !fagpu.smem_tile<128x64xf16, row_major>, <64x64xf16, row_major> -> !fagpu.fragment<128x64xf32, accumulator>
// CHECK: fagpu.softmax_step {{.*}} : <128x64xf32, accumulator>, <128xf32, rows> -> <128x64xf16, operand_a>
// CHECK: fagpu.rescale
// CHECK: fagpu.softmax_step %{{.*}}, %{{.*}}, %{{.*}} rescale(%{{.*}} : !fagpu.fragment<128x64xf32, accumulator> -> !fagpu.fragment<128x64xf32, accumulator>) keys(%{{.*}}, %{{.*}}) row %{{.*}} scale %{{.*}} {causal, masked, tree_row_max}
// CHECK: fagpu.mma %{{.*}}, %{{.*}} acc(%{{.*}}) {mn_major} : !fagpu.fragment<128x64xf16, operand_a>, <64x64xf16, row_major>, !fagpu.fragment<128x64xf32, accumulator> -> !fagpu.fragment<128x64xf32, accumulator>
// CHECK: %[[O1:.*]] = fagpu.row_tile %{{.*}}[1] : <128x64xf32, accumulator> -> <64x64xf32, accumulator>
// CHECK: %[[M1:.*]] = fagpu.row_tile %{{.*}}[1] : <128xf32, rows> -> <64xf32, rows>
// CHECK: %[[L1:.*]] = fagpu.row_tile %{{.*}}[1] : <128xf32, rows> -> <64xf32, rows>
// CHECK: %[[T1:.*]], %[[F1:.*]] = fagpu.row_totals %[[L1]]
// CHECK: fagpu.store_rows %[[O1]], %[[F1]]
// CHECK: fagpu.store_lse %[[M1]], %[[T1]]

// The dynamic tile scheduler's ops.
// CHECK-LABEL: func.func @scheduler
// CHECK: %[[ID:.*]] = fagpu.fetch_tile %{{.*}} tiles %{{.*}} : !llvm.ptr<1>
// CHECK: fagpu.publish_tile %[[ID]] to %{{.*}} : !llvm.ptr<3>
// CHECK: fagpu.receive_tile %{{.*}} : !llvm.ptr<3>
func.func @scheduler(%counter: !llvm.ptr<1>, %tiles: i32, %slot: !llvm.ptr<3>) -> i32 {
  %id = fagpu.fetch_tile %counter tiles %tiles : !llvm.ptr<1>
  fagpu.publish_tile %id to %slot : !llvm.ptr<3>
  %got = fagpu.receive_tile %slot : !llvm.ptr<3>
  return %got : i32
}

// A TMA load from a first column (an e4m3 V^T tile's first key).
// CHECK-LABEL: llvm.func @column_load
// CHECK: fagpu.tma_load %{{.*}}[%{{.*}}, %{{.*}}, %{{.*}}] column %{{.*}} into %{{.*}}[%{{.*}}] buffer 1 : !llvm.ptr, <stages = 2, buffers = 2, 128x128xf8E4M3FN>
module attributes {gpu.container_module} {
gpu.module @column_kernels {
  llvm.func @column_load(%map: !llvm.ptr, %s: i32, %d: i32, %h: i32, %b: i32, %key: i32) {
    %kv = fagpu.create_pipeline {barrier_offset = 65536 : i64, tile_offset = 0 : i64} : !fagpu.pipeline<stages = 2, buffers = 2, 128x128xf8E4M3FN>
    fagpu.tma_load %map[%d, %h, %b] column %key into %kv[%s] buffer 1 : !llvm.ptr, !fagpu.pipeline<stages = 2, buffers = 2, 128x128xf8E4M3FN>
    llvm.return
  }
}
}

// A ring whose two buffers have their own tile types (the e4m3 kernel's K
// [B_c, D] and V^T [D, B_c] at D = 256, B_c = 128): each buffer's tile.
// CHECK-LABEL: llvm.func @two_tile_types
// CHECK: fagpu.pipeline_tile %{{.*}}[%{{.*}}] buffer 0 : <stages = 3, buffers = 2, 128x256xf8E4M3FN, 256x128xf8E4M3FN> -> <128x256xf8E4M3FN>
// CHECK: fagpu.pipeline_tile %{{.*}}[%{{.*}}] buffer 1 : <stages = 3, buffers = 2, 128x256xf8E4M3FN, 256x128xf8E4M3FN> -> <256x128xf8E4M3FN>
module attributes {gpu.container_module} {
gpu.module @two_tile_kernels {
  llvm.func @two_tile_types(%s: i32) {
    %kv = fagpu.create_pipeline {barrier_offset = 196608 : i64, tile_offset = 0 : i64} : !fagpu.pipeline<stages = 3, buffers = 2, 128x256xf8E4M3FN, 256x128xf8E4M3FN>
    %k = fagpu.pipeline_tile %kv[%s] buffer 0 : !fagpu.pipeline<stages = 3, buffers = 2, 128x256xf8E4M3FN, 256x128xf8E4M3FN> -> !fagpu.smem_tile<128x256xf8E4M3FN>
    %vt = fagpu.pipeline_tile %kv[%s] buffer 1 : !fagpu.pipeline<stages = 3, buffers = 2, 128x256xf8E4M3FN, 256x128xf8E4M3FN> -> !fagpu.smem_tile<256x128xf8E4M3FN>
    llvm.return
  }
}
}

// B_c = 224 on e4m3 (D = 128): V^T's 224-byte rows in 32-byte swizzled
// column blocks; the swizzle is printed where it is not 128 bytes, on the
// tile and on the pipeline's buffer-1 tile.
// CHECK-LABEL: llvm.func @narrow_swizzle
// CHECK: fagpu.pipeline_tile %{{.*}}[%{{.*}}] buffer 1 : <stages = 2, buffers = 2, 224x128xf8E4M3FN, 128x224xf8E4M3FN, swizzle = 32> -> <128x224xf8E4M3FN, swizzle = 32>
module attributes {gpu.container_module} {
gpu.module @narrow_swizzle_kernels {
  llvm.func @narrow_swizzle(%s: i32) {
    %kv = fagpu.create_pipeline {barrier_offset = 131072 : i64, tile_offset = 0 : i64} : !fagpu.pipeline<stages = 2, buffers = 2, 224x128xf8E4M3FN, 128x224xf8E4M3FN, swizzle = 32>
    %vt = fagpu.pipeline_tile %kv[%s] buffer 1 : !fagpu.pipeline<stages = 2, buffers = 2, 224x128xf8E4M3FN, 128x224xf8E4M3FN, swizzle = 32> -> !fagpu.smem_tile<128x224xf8E4M3FN, swizzle = 32>
    llvm.return
  }
}
}

// The e4m3 row sums by MMA: the ones-column tile, P against it, the
// per-thread l, and the softmax step without its FADD sums.
// CHECK-LABEL: func.func @row_sums
// CHECK: fagpu.init_row_sum_tile %{{.*}} barrier %{{.*}} : <8x224xf8E4M3FN, block_rows = 16, swizzle = 32>
// CHECK: fagpu.row_partials %{{.*}} : <64x8xf32, accumulator> -> <64xf32, rows>
// CHECK: fagpu.softmax_step {{.*}} {no_row_sum, probs_scale = 2.560000e+02 : f32}
func.func @row_sums(%ones: !fagpu.smem_tile<8x224xf8E4M3FN, block_rows = 16, swizzle = 32>, %b: i32, %acc: !fagpu.fragment<64x8xf32, accumulator>, %s: !fagpu.fragment<64x224xf32, accumulator>, %m: !fagpu.fragment<64xf32, rows>, %k: i32, %scale: f32) {
  fagpu.init_row_sum_tile %ones barrier %b : !fagpu.smem_tile<8x224xf8E4M3FN, block_rows = 16, swizzle = 32>
  %l = fagpu.row_partials %acc : !fagpu.fragment<64x8xf32, accumulator> -> !fagpu.fragment<64xf32, rows>
  %p, %m2, %l2, %alpha = fagpu.softmax_step %s, %m, %l keys(%k, %k) row %k scale %scale {probs_scale = 2.560000e+02 : f32, no_row_sum} : !fagpu.fragment<64x224xf32, accumulator>, !fagpu.fragment<64xf32, rows> -> !fagpu.fragment<64x224xf8E4M3FN, operand_a>
  return
}

// An e4m3 cache's K tile widened into the 16-bit ring's.
// CHECK-LABEL: func.func @widen
// CHECK: fagpu.widen_tile %{{.*}} to %{{.*}} barrier %{{.*}} : <64x128xf8E4M3FN> to <64x128xf16>
// CHECK: fagpu.widen_tile %{{.*}} to %{{.*}} barrier %{{.*}} : <64x256xf8E4M3FN> to <64x256xbf16>
func.func @widen(%k8: !fagpu.smem_tile<64x128xf8E4M3FN>, %k: !fagpu.smem_tile<64x128xf16>, %w8: !fagpu.smem_tile<64x256xf8E4M3FN>, %w: !fagpu.smem_tile<64x256xbf16>, %b: i32) {
  fagpu.widen_tile %k8 to %k barrier %b : !fagpu.smem_tile<64x128xf8E4M3FN> to !fagpu.smem_tile<64x128xf16>
  fagpu.widen_tile %w8 to %w barrier %b : !fagpu.smem_tile<64x256xf8E4M3FN> to !fagpu.smem_tile<64x256xbf16>
  return
}
