// RUN: fa-opt %s --fagpu-build-kernels | FileCheck %s

// fagpu-build-kernels writes the sm_100a kernel with FlashAttention-4's
// structure in fagpu ops (convert-fagpu-to-nvvm lowers them;
// tcgen05-to-nvvm.mlir checks each lowering).

// CHECK-LABEL: func.func @fa4
// CHECK: gpu.launch_func @fa_kernels::@fa4_sm100_d128_br128_bc128_s3_f16_causal
// Shared memory: Q (filled once), the K/V ring, then the TMEM hand-off
// barriers s_full[2], p_full[2], o_done after the ring's 4 x 3.
// CHECK: %[[Q:.*]] = fagpu.create_pipeline {barrier_offset = 229376 : i64, tile_offset = 0 : i64} : <stages = 1, buffers = 1, 128x128xf16, fill_once>
// CHECK: %[[KV:.*]] = fagpu.create_pipeline {barrier_offset = 229384 : i64, tile_offset = 32768 : i64} : <stages = 3, buffers = 2, 128x128xf16>
// CHECK: %[[SFULL:.*]] = fagpu.create_barriers offset 229480 : <2>
// CHECK: %[[PFULL:.*]] = fagpu.create_barriers offset 229496 : <2>
// CHECK: %[[ODONE:.*]] = fagpu.create_barriers offset 229512 : <1>
// p_full counts the 128 softmax threads; the others one arrival.
// CHECK: fagpu.init_barriers %[[Q]], %[[KV]], %[[SFULL]], %[[PFULL]], %[[ODONE]] arrivals [1, 1, 1, 128, 1]
// TMEM: 2 x 128 columns of S/P and 128 of O, rounded to 512.
// CHECK: %[[TMEM:.*]] = fagpu.tmem_alloc warp %[[WARP:.*]] alloc_warp 5 slot {{.*}} : <128x512xf32>
// CHECK: fagpu.tcgen05_roles %[[WARP]] load_warp 4 mma_warp 5 softmax {
// O at column 2 B_c = 256.
// CHECK: %[[O:.*]] = fagpu.tmem_slice %[[TMEM]][%c256_i32] : <128x512xf32> -> <128x128xf32>
// The softmax: a row per thread (lanes), S_j from TMEM ...
// CHECK: scf.for {{.*}} -> (!fagpu.fragment<128xf32, lanes>, !fagpu.fragment<128xf32, lanes>)
// CHECK: fagpu.barrier_wait %[[SFULL]] use %[[I:.*]] : <2>
// CHECK: %[[S:.*]] = fagpu.tmem_load %{{.*}} : <128x128xf32> -> <128x128xf32, lanes>
// CHECK: %[[P:.*]], %{{.*}}, %{{.*}}, %[[ALPHA:.*]], %[[MOVED:.*]] = fagpu.softmax_step %[[S]]
// ... O rescaled in TMEM once P_{j-1} V_{j-1} landed, FA4: if a row moved ...
// CHECK: fagpu.barrier_wait %[[ODONE]] use
// CHECK: fagpu.rescale %[[O]], %[[ALPHA]] if %[[MOVED]] : !fagpu.tmem<128x128xf32>, <128xf32, lanes>
// ... and P_j as f16 pairs over its S buffer, handed to the MMA thread.
// CHECK: %[[PT:.*]] = fagpu.tmem_slice %[[TMEM]][%{{.*}}] : <128x512xf32> -> <128x128xf16>
// CHECK: fagpu.tmem_store %[[P]], %[[PT]] : <128x128xf32, lanes>, <128x128xf16>
// CHECK: fagpu.barrier_arrive %[[PFULL]] use %[[I]] : <2>
// Epilogue: O / l from TMEM, the LSE from the lanes' m and l.
// CHECK: %[[TOTAL:.*]], %[[FACTOR:.*]] = fagpu.row_totals %{{.*}} : <128xf32, lanes>
// CHECK: fagpu.store_tmem_rows %[[O]], %[[FACTOR]] {{.*}} : <128x128xf32>, <128xf32, lanes>
// CHECK: fagpu.store_lse %{{.*}}, %[[TOTAL]] {{.*}} : <128xf32, lanes>
// The load thread: Q once, then the ring, as on Hopper.
// CHECK: } load {
// CHECK: fagpu.tma_load %arg0[%{{.*}}, %{{.*}}] into %[[Q]][%{{.*}}] buffer 0
// CHECK: fagpu.pipeline_acquire %[[KV]][%{{.*}}] buffer 0
// CHECK: fagpu.tma_load %arg1
// CHECK: fagpu.pipeline_acquire %[[KV]][%{{.*}}] buffer 1
// CHECK: fagpu.tma_load %arg2
// The MMA thread: S = Q K^T into a TMEM buffer; K released and S
// announced by commits when the MMAs complete.
// CHECK: } mma {
// CHECK: fagpu.pipeline_wait %[[Q]]
// CHECK: fagpu.mma %{{.*}}, %{{.*}} acc(%{{.*}}) : !fagpu.smem_tile<128x128xf16>, <128x128xf16>, !fagpu.tmem<128x128xf32>
// CHECK-NEXT: fagpu.pipeline_release %[[KV]][%{{.*}}] buffer 0 {commit}
// CHECK-NEXT: fagpu.mma_commit %[[SFULL]] use
// O += P_j V_j with P from TMEM, accumulating after the first block.
// CHECK: fagpu.barrier_wait %[[PFULL]] use
// CHECK: fagpu.pipeline_wait %[[KV]][%{{.*}}] buffer 1
// CHECK: fagpu.mma %{{.*}}, %{{.*}} acc(%{{.*}}) accumulate(%{{.*}}) {mn_major} : !fagpu.tmem<128x128xf16>, <128x128xf16>, !fagpu.tmem<128x128xf32>
// CHECK-NEXT: fagpu.pipeline_release %[[KV]][%{{.*}}] buffer 1 {commit}
// CHECK-NEXT: fagpu.mma_commit %[[ODONE]] use
// CHECK: fagpu.tmem_dealloc %[[TMEM]] warp %[[WARP]] alloc_warp 5 : <128x512xf32>

func.func @fa4(%q: memref<?x?x?x128xf16>, %k: memref<?x?x?x128xf16>, %v: memref<?x?x?x128xf16>,
    %o: memref<?x?x?x128xf16>, %lse: memref<?x?x?xf32>) {
  fagpu.attention %q, %k, %v outs(%o, %lse) {target = #fagpu.target<sm_100a>, scale = 0.125 : f32, causal, rescale_threshold = 8.0 : f32,
      schedule = #fagpu.schedule<block_r = 128, block_c = 128, consumers = 0, ctas_per_sm = 1, producer_registers = 0, consumer_registers = 0, stages = 3, ping_pong = false, overlap_softmax = false, scheduler = single, q_buffers = 1, epilogue = registers, q_in_registers = false, tmem_columns = 512>}
    : memref<?x?x?x128xf16>, memref<?x?x?x128xf16>, memref<?x?x?x128xf16>, memref<?x?x?x128xf16>, memref<?x?x?xf32>
  return
}
