// RUN: fa-opt %s --convert-fagpu-to-nvvm | FileCheck %s

// Each kernel-body op through its own lowering pattern (sm_90a): the ops of
// one FA3 consumer tile (D = 64, B_c = 64), and a fragment carried by a loop.

// init_pipelines: one thread initialises, stage by stage, the full
// barriers (one producer arrival) then the empty ones (8 consumer warps).
// CHECK-LABEL: llvm.func @body
// CHECK: scf.if
// CHECK: nvvm.mbarrier.init %{{.*}}, %c1_i32
// CHECK: nvvm.mbarrier.init %{{.*}}, %c8_i32
// CHECK: nvvm.fence.mbarrier.init
// CHECK: nvvm.barrier0
// warp_specialize: the role branch and the register budgets.
// CHECK: scf.if
// CHECK-NEXT: nvvm.setmaxregister  decrease 24
// pipeline_acquire: the empty barrier of V (buffer 1), the given parity.
// CHECK: nvvm.mbarrier.try_wait.parity %{{.*}}, %arg10,
// tma_load: the tile's bytes announced, one 64-column box (D = 64).
// CHECK: nvvm.mbarrier.arrive.expect_tx %[[FULL:.*]], %c8192_i32
// CHECK: nvvm.cp.async.bulk.tensor.shared.cluster.global %{{.*}}, %arg2, %[[FULL]], box[%c0_i32{{.*}}, %arg11, %arg12]
// CHECK-NOT: nvvm.cp.async.bulk.tensor.shared.cluster.global
// pipeline_commit: an arrival without bytes.
// CHECK: nvvm.mbarrier.arrive %{{.*}} : !llvm.ptr<3>
// CHECK: nvvm.setmaxregister  increase 240
// wait_turn: the named barrier of the two consumers' 256 threads.
// CHECK: nvvm.barrier id = %{{.*}} number_of_threads = %c256_i32
// CHECK: nvvm.mbarrier.try_wait.parity
// mma (shared A and B): fence, D / 16 = 4 k-steps, the first ignoring the
// accumulator, one commit.
// CHECK: nvvm.wgmma.fence.aligned
// CHECK: nvvm.wgmma.mma_async {{.*}} <m = 64, n = 64, k = 16>, D[<f32>, <zero>]
// CHECK-COUNT-3: nvvm.wgmma.mma_async {{.*}} <m = 64, n = 64, k = 16>, D[<f32>, <one>]
// CHECK: nvvm.wgmma.commit.group.sync.aligned
// pass_turn, mma_wait, pin (an empty asm per register).
// CHECK: nvvm.barrier.arrive id = %{{.*}} number_of_threads = %c256_i32
// CHECK-NEXT: nvvm.wgmma.wait.group.sync.aligned 0
// CHECK-COUNT-32: llvm.inline_asm has_side_effects "", "=f,0"
// pipeline_release: lane 0 of each warp arrives on the empty barrier.
// CHECK: arith.cmpi eq
// CHECK-NEXT: scf.if
// CHECK-NEXT: nvvm.mbarrier.arrive
// softmax_step: row max over the quad, exp2 on the MUFU.
// CHECK: nvvm.shfl.sync  bfly %{{.*}}, %{{.*}}, %c1_i32
// CHECK: nvvm.shfl.sync  bfly %{{.*}}, %{{.*}}, %c2_i32
// CHECK: ex2.approx.ftz.f32
// rescale with the FA4 flag: a warp vote guards the 32 multiplies.
// CHECK: %[[ANY:.*]] = nvvm.vote.sync  any
// CHECK-NEXT: scf.if %[[ANY]] -> (f32, f32, f32, f32, f32, f32, f32, f32, f32, f32, f32, f32, f32, f32, f32, f32, f32, f32, f32, f32, f32, f32, f32, f32, f32, f32, f32, f32, f32, f32, f32, f32)
// mma (A in registers, V MN-major): one wgmma asm per k-step, trans-b = 1.
// CHECK: nvvm.wgmma.fence.aligned
// CHECK-COUNT-4: wgmma.mma_async.sync.aligned.m64n64k16.f32.f16.f16 {{.*}} p, 1, 1, 1;
// CHECK: nvvm.wgmma.commit.group.sync.aligned
// The epilogue through the staging tile: wait for the previous store,
// stmatrix (D / 16 = 4), proxy fence, one TMA store, the LSE rows.
// CHECK: nvvm.cp.async.bulk.wait_group 0 {read}
// CHECK: nvvm.barrier id = %[[C:.*]] number_of_threads = %c128_i32
// CHECK-COUNT-4: nvvm.stmatrix
// CHECK: nvvm.fence.proxy {kind = #nvvm.proxy_kind<async.shared>
// CHECK: nvvm.cp.async.bulk.tensor.global.shared.cta %arg3
// CHECK-NEXT: nvvm.cp.async.bulk.commit.group
// CHECK: lg2.approx.ftz.f32
// store_wait
// CHECK: nvvm.cp.async.bulk.wait_group 0
// CHECK-NOT: fagpu.
// CHECK: llvm.return
// CHECK-LABEL: llvm.func @split
// CHECK: llvm.store %{{.*}}, %{{.*}} {alignment = 8 : i64} : vector<2xf32>, !llvm.ptr<1>
// CHECK: scf.if
// CHECK: nvvm.memory.barrier <gpu>
// CHECK: nvvm.bar.warp.sync %c-1_i32
// CHECK: llvm.atomicrmw add %{{.*}}, %{{.*}} syncscope("device") acq_rel
// CHECK: nvvm.shfl.sync idx
// CHECK: %[[LAST:.*]] = arith.cmpi eq
// CHECK: scf.if %[[LAST]]
// CHECK: llvm.store %c0_i32
// CHECK: scf.for {{.*}} step %c4_i32
// CHECK: scf.for {{.*}} step %c32_i32{{.*}} iter_args({{.*}}) -> (f32, f32, f32, f32)
// CHECK-COUNT-4: llvm.load volatile
// CHECK-COUNT-4: arith.maximumf
// CHECK-COUNT-20: nvvm.shfl.sync bfly
// CHECK: scf.for {{.*}} step %c4_i32{{.*}} iter_args({{.*}}) -> (f32, f32, f32, f32, f32, f32, f32, f32, f32, f32, f32, f32)
// CHECK-COUNT-16: llvm.load %{{.*}} {alignment = 8 : i64} : !llvm.ptr<1> -> vector<2xf32>
// CHECK-NOT: llvm.load
// CHECK-COUNT-16: ex2.approx.ftz.f32
// CHECK-NOT: llvm.load
// CHECK: scf.yield
// CHECK-COUNT-4: llvm.fptrunc {{.*}} : vector<2xf32> to vector<2xf16>
// CHECK: lg2.approx.ftz.f32
// CHECK-NOT: fagpu.

// CHECK-LABEL: llvm.func @scheduler(
// CHECK-SAME: %[[CTR:.*]]: !llvm.ptr<1>, %[[TILES:.*]]: i32, %[[SLOT:.*]]: !llvm.ptr<3>)
// CHECK: %[[TAKEN:.*]] = llvm.atomicrmw add %[[CTR]], %{{.*}} monotonic : !llvm.ptr<1>, i32
// CHECK: %[[LASTID:.*]] = arith.subi %[[TILES]], %c1_i32
// CHECK: %[[IS_LAST:.*]] = arith.cmpi eq, %[[TAKEN]], %[[LASTID]]
// CHECK: scf.if %[[IS_LAST]] {
// CHECK: llvm.atomicrmw xchg %[[CTR]], %{{.*}} monotonic
// CHECK: %[[GRID:.*]] = nvvm.read.ptx.sreg.nctaid.x
// CHECK: %[[ID:.*]] = arith.addi %[[GRID]], %[[TAKEN]]
// CHECK: llvm.store volatile %[[ID]], %[[SLOT]] {alignment = 4 : i64} : i32, !llvm.ptr<3>
// CHECK: llvm.load volatile %[[SLOT]] {alignment = 4 : i64} : !llvm.ptr<3> -> i32
// CHECK-NOT: fagpu.

// CHECK-LABEL: llvm.func @carried
// CHECK: scf.for %{{.*}} = %{{.*}} to %arg0 step %{{.*}} iter_args({{.*}}) -> (f32, f32, f32, f32, f32, f32, f32, f32, f32, f32, f32, f32, f32, f32, f32, f32, f32, f32, f32, f32, f32, f32, f32, f32, f32, f32, f32, f32, f32, f32, f32, f32)
// CHECK-COUNT-32: llvm.inline_asm has_side_effects "", "=f,0"
// CHECK-NEXT: scf.yield

// A head dim padded to the tiles' (D = 96 on D = 128 tiles): O has 32 of
// the fragment's 64 columns, so its rows are 32 elements apart and each
// row of a thread is one run of 32 columns, not two. The quad transposes
// the run's 4 x 4 words (lane c gets n8 block c: word j from lane j) along
// its diagonals: selects on the lane's bits, one butterfly shuffle by 1,
// 2 and 3, selects back; then one 16-byte store a lane and row, at column
// 8 c.
// CHECK-LABEL: llvm.func @padded_columns
// CHECK: arith.constant 32 : i64
// CHECK: %[[BIT0:.*]] = arith.trunci %[[LANE:.*]] : i32 to i1
// CHECK: %[[HIGH:.*]] = arith.shrui %[[LANE]], %c1_i32
// CHECK: %[[BIT1:.*]] = arith.trunci %[[HIGH]] : i32 to i1
// CHECK-COUNT-3: arith.select
// CHECK: arith.select %[[BIT0]]
// CHECK: arith.select %[[BIT0]]
// CHECK: arith.select %[[BIT1]]
// CHECK: nvvm.shfl.sync  bfly %{{.*}}, %{{.*}}, %c1_i32{{.*}} : i32 -> i32
// CHECK-COUNT-3: arith.select
// CHECK: nvvm.shfl.sync  bfly %{{.*}}, %{{.*}}, %c2_i32{{.*}} : i32 -> i32
// CHECK-COUNT-3: arith.select
// CHECK: nvvm.shfl.sync  bfly %{{.*}}, %{{.*}}, %c3_i32{{.*}} : i32 -> i32
// CHECK-COUNT-12: arith.select
// CHECK: scf.if
// CHECK: arith.muli %[[LANE]], %c8_i32
// CHECK: llvm.store {{.*}} {alignment = 16 : i64} : vector<4xi32>, !llvm.ptr<1>
// CHECK-NEXT: }

// CHECK-LABEL: llvm.func @copy_rows
// CHECK-NOT: nvvm.cp.async.bulk.wait_group
// CHECK: nvvm.barrier id
// CHECK-COUNT-4: nvvm.stmatrix
// CHECK-NOT: nvvm.fence.proxy
// CHECK: nvvm.barrier id
// CHECK: arith.divui %{{.*}}, %c4_i32
// CHECK: arith.remui %{{.*}}, %c4_i32
// CHECK: arith.xori
// CHECK: arith.cmpi ult
// CHECK: scf.if
// CHECK: llvm.load %{{.*}} {alignment = 16 : i64} : !llvm.ptr<3> -> vector<4xi32>
// CHECK: llvm.store %{{.*}}, %{{.*}} {alignment = 16 : i64} : vector<4xi32>, !llvm.ptr<1>
// CHECK: scf.if
// CHECK: llvm.load %{{.*}} : !llvm.ptr<3> -> vector<4xi32>
// CHECK: llvm.store %{{.*}} : vector<4xi32>, !llvm.ptr<1>
// CHECK-NOT: vector<4xi32>
// CHECK-NOT: nvvm.cp.async.bulk
// CHECK: llvm.return

// CHECK-LABEL: llvm.func @copy_rows_tma_blocks
// CHECK: nvvm.cp.async.bulk.wait_group 0 {read}
// CHECK: nvvm.barrier id
// CHECK-COUNT-4: nvvm.stmatrix
// CHECK: nvvm.fence.proxy {kind = #nvvm.proxy_kind<async.shared>
// CHECK: nvvm.barrier id
// CHECK: %[[END:.*]] = arith.addi %{{.*}}, %c64_i32 : i32
// CHECK: %[[WHOLE:.*]] = arith.cmpi ule, %[[END]], %arg1 : i32
// CHECK: scf.if %[[WHOLE]] {
// CHECK: scf.if
// CHECK: nvvm.cp.async.bulk.tensor.global.shared.cta %arg7, %{{.*}}, box[%c0_i32{{.*}}, %arg1, %{{.*}}, %{{.*}}]
// CHECK-NEXT: nvvm.cp.async.bulk.commit.group
// CHECK: } else {
// CHECK-NOT: nvvm.cp.async.bulk
// CHECK-COUNT-4: llvm.store %{{.*}}, %{{.*}} {alignment = 16 : i64} : vector<4xi32>, !llvm.ptr<1>
// CHECK-NOT: nvvm.cp.async.bulk
// CHECK: llvm.return

// Its split-KV merge: head_dim 96 gives each lane 3 columns, 12 bytes apart
// in the f32 partials and 6 in O, so they move one at a time (vectors and
// pairs would be misaligned): three f32 loads per chunk, three 2-byte
// stores.
// CHECK-LABEL: llvm.func @padded_merge
// CHECK-COUNT-3: llvm.load %{{.*}} {alignment = 4 : i64} : !llvm.ptr<1> -> vector<1xf32>
// CHECK: arith.truncf %{{.*}} : f32 to bf16
// CHECK-NEXT: llvm.store %{{.*}} {alignment = 2 : i64} : bf16, !llvm.ptr<1>
// CHECK: arith.truncf
// CHECK-NEXT: llvm.store %{{.*}} {alignment = 2 : i64} : bf16, !llvm.ptr<1>
// CHECK: arith.truncf
// CHECK-NEXT: llvm.store %{{.*}} {alignment = 2 : i64} : bf16, !llvm.ptr<1>

!q = !fagpu.pipeline<stages = 1, buffers = 1, 128x64xf16>
!kv = !fagpu.pipeline<stages = 2, buffers = 2, 64x64xf16>
!rows = !fagpu.fragment<64xf32, rows>
!s = !fagpu.fragment<64x64xf32, accumulator>
!p = !fagpu.fragment<64x64xf16, operand_a>
!o = !fagpu.fragment<64x64xf32, accumulator>

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

  // Split-KV: the partial O leaves in f32 pairs (8 B per 2 columns), then
  // each warp of the rows below Nq counts itself in; the last chunk's warp
  // resets its counter and merges four of its rows at once: the max of the
  // chunks' LSE (the lanes read 32 chunks at once, then a butterfly),
  // weights exp2((LSE_s - m) log2 e) and the sums four chunks a step, each
  // step's loads (4 rows x 4 chunks) issued before any is used; the LSE
  // read past L1 (volatile), a lane's O columns as one vector, f16 pairs
  // out.
  llvm.func @split(%i: i32, %p: !llvm.ptr<1>) {
    %zero = arith.constant 0.0 : f32
    %o = fagpu.splat %zero : !o
    %m = fagpu.splat %zero : !rows
    %t, %f = fagpu.row_totals %m : !rows
    %orows1, %ostride1 = fagpu.output_rows %p[%i] rows %i : !llvm.ptr<1> as f32 {columns = 64 : i64}
    fagpu.store_rows %o, %f rows(%i, %i) to %orows1 stride %ostride1 : !llvm.ptr<1> as f32 : !o, !rows
    %lse_rows2 = fagpu.lse_rows %p[%i] rows %i : !llvm.ptr<1>
    fagpu.store_lse %m, %t rows(%i, %i) to %lse_rows2 : !llvm.ptr<1> : !rows
    fagpu.merge_splits rows(%i, %i, %i) of %i x %i arrivals %p partials(%p, %p) to %p as f16 lse %p {head_dim = 64 : i64} : !llvm.ptr<1>, !llvm.ptr<1>, !llvm.ptr<1>, !llvm.ptr<1>, !llvm.ptr<1>
    llvm.return
  }

  // The dynamic tile scheduler: the producer's fetch is gridDim.x plus the
  // counter's old value (relaxed), the fetch of the last count swaps the
  // counter back to 0; the id reaches the consumers through a volatile
  // shared-memory slot.
  llvm.func @scheduler(%counter: !llvm.ptr<1>, %tiles: i32, %slot: !llvm.ptr<3>) {
    %id = fagpu.fetch_tile %counter tiles %tiles : !llvm.ptr<1>
    fagpu.publish_tile %id to %slot : !llvm.ptr<3>
    %got = fagpu.receive_tile %slot : !llvm.ptr<3>
    llvm.return
  }

  // Fragments carried by a loop become one iter_arg per register.
  llvm.func @carried(%n: i32) {
    %zero = arith.constant 0.0 : f32
    %o0 = fagpu.splat %zero : !o
    %c0 = arith.constant 0 : i32
    %c1 = arith.constant 1 : i32
    %r = scf.for %i = %c0 to %n step %c1 iter_args(%o = %o0) -> (!o) : i32 {
      %p = fagpu.pin %o : !o
      scf.yield %p : !o
    }
    llvm.return
  }

  llvm.func @padded_columns(%i: i32, %p: !llvm.ptr<1>) {
    %zero = arith.constant 0.0 : f32
    %o = fagpu.splat %zero : !o
    %m = fagpu.splat %zero : !rows
    %t, %f = fagpu.row_totals %m : !rows
    %orows2, %ostride2 = fagpu.output_rows %p[%i] rows %i : !llvm.ptr<1> as f16 {columns = 32 : i64}
    fagpu.store_rows %o, %f rows(%i, %i) to %orows2 stride %ostride2 : !llvm.ptr<1> as f16 {columns = 32 : i64} : !o, !rows
    llvm.return
  }

  // copy_rows, strided, O of 32 columns: 4 pieces of 16 B a row, 64 rows
  // by 128 threads in 2 rounds; each thread's piece lies at its swizzled
  // chunk (XOR row mod 8), loads 16 B of shared memory and stores them
  // where row < Nq, at batch * stride_b + head * stride_h + row * stride_n
  // + 8 piece. The tile needs no proxy fence and no TMA wait.
  llvm.func @copy_rows(%c: i32, %i: i32, %heads: i32, %sb: i64, %sh: i64,
                       %sn: i64, %p: !llvm.ptr<1>) {
    %zero = arith.constant 0.0 : f32
    %o = fagpu.splat %zero : !o
    %m = fagpu.splat %zero : !rows
    %st = fagpu.shared_tile offset 49152 : !fagpu.smem_tile<128x64xbf16>
    %sr = fagpu.tile_rows %st[%c] : !fagpu.smem_tile<128x64xbf16> -> !fagpu.smem_tile<64x64xbf16, block_rows = 128>
    %t, %f = fagpu.row_totals %m : !rows
    fagpu.stage_output %o, %f into %sr sync %c : !o, !rows, !fagpu.smem_tile<64x64xbf16, block_rows = 128>
    fagpu.copy_staged_rows %sr rows(%i, %i, %i) to %p : !llvm.ptr<1> strided(%heads, %sb, %sh, %sn) sync %c {columns = 32 : i64} : !fagpu.smem_tile<64x64xbf16, block_rows = 128>
    llvm.return
  }

  // copy_rows with tma_blocks (a varlen kernel's epilogue): the same
  // stmatrix, after the previous TMA store has read the tile; a proxy
  // fence; then a warpgroup whose 64 rows all lie below Nq (its first row,
  // row0 - 16 w - lane / 4, plus 64 at most Nq) stores them by one TMA
  // store, and only one reaching past Nq copies its rows.
  llvm.func @copy_rows_tma_blocks(%c: i32, %i: i32, %heads: i32, %sb: i64,
                                  %sh: i64, %sn: i64, %p: !llvm.ptr<1>,
                                  %map: !llvm.ptr) {
    %zero = arith.constant 0.0 : f32
    %o = fagpu.splat %zero : !o
    %m = fagpu.splat %zero : !rows
    %st = fagpu.shared_tile offset 49152 : !fagpu.smem_tile<128x64xf16>
    %sr = fagpu.tile_rows %st[%c] : !fagpu.smem_tile<128x64xf16> -> !fagpu.smem_tile<64x64xf16, block_rows = 128>
    %t, %f = fagpu.row_totals %m : !rows
    fagpu.store_wait
    fagpu.stage_output %o, %f into %sr sync %c : !o, !rows, !fagpu.smem_tile<64x64xf16, block_rows = 128>
    fagpu.copy_staged_rows %sr rows(%i, %i, %i) to %p : !llvm.ptr<1> strided(%heads, %sb, %sh, %sn) tma_blocks(%map : !llvm.ptr) sync %c : !fagpu.smem_tile<64x64xf16, block_rows = 128>
    llvm.return
  }

  llvm.func @padded_merge(%i: i32, %p: !llvm.ptr<1>) {
    fagpu.merge_splits rows(%i, %i, %i) of %i x %i arrivals %p partials(%p, %p) to %p as bf16 {head_dim = 96 : i64} : !llvm.ptr<1>, !llvm.ptr<1>, !llvm.ptr<1>, !llvm.ptr<1>
    llvm.return
  }
}
}
