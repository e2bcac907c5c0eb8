// RUN: fa-opt %s --split-input-file --fagpu-build-kernels | FileCheck %s

// fagpu-build-kernels writes the kernel of each sm_90a fagpu.attention in
// warpgroup-level ops: what each FlashAttention-3 field of the schedule
// becomes, checked at this level (convert-fagpu-to-nvvm lowers the ops;
// warpgroup-to-nvvm.mlir checks each lowering).

// Warp specialisation (24 / 240 registers), the K/V ring of `stages`
// stages, ping-pong turns around each consumer's MMAs, the softmax of block
// j under P V of block j - 1 (one MMA group left in flight), the register
// epilogue, one tile per CTA.
// CHECK-LABEL: func.func @all_on
// CHECK: gpu.launch_func @fa_kernels::@fa3_sm90_d128_br128_bc128_s2_f16_stg
// CHECK: llvm.func @fa3_sm90_d128_br128_bc128_s2_f16_stg(
// The kernel carries its launch grid, one CTA per (query block, head,
// batch) tile (fagpu::launchGrid), and the parameters its signature was
// built from, which fa-compile writes into the launch metadata: q, k, v as
// rank-4 tensor maps of 128-row boxes, ..., the scale.
// CHECK-SAME: fagpu.grid = {x = "ceil(Nq / block_r) * Hq * B", y = 1 : i64, z = 1 : i64}
// CHECK-SAME: fagpu.params = [{box_rows = 128 : i64, dtype = "f16", kind = "tensormap", l2_promotion = 256 : i64, name = "q", rank = 4 : i64, shape = ["B", "Hq", "Nq", "D"]
// CHECK-SAME: {kind = "f32", meaning = "{{[^"]*}}", name = "scale_log2"}
// CHECK: %[[Q:.*]] = fagpu.create_pipeline {{.*}} : <stages = 1, buffers = 1, 128x128xf16>
// CHECK: %[[KV:.*]] = fagpu.create_pipeline {{.*}} : <stages = 2, buffers = 2, 128x128xf16>
// CHECK: fagpu.init_pipelines %[[Q]], %[[KV]] consumer_arrivals 8
// CHECK: fagpu.warp_specialize %{{.*}} consumers 2 registers(producer = 24, consumer = 240) producer {
// Rank-4 tensor maps: loads at (row, head, batch), Q at the query head,
// K and V at its K/V head, both of one batch.
// CHECK: fagpu.pipeline_acquire %[[Q]]
// CHECK: fagpu.tma_load %arg0[%{{.*}}, %{{.*}}, %[[BATCH:[0-9]+]]]
// Block j of the tile is the ring's use j - first: the producer acquires
// its stage with the empty barriers' parity (fagpu.pipeline_position, asked
// where each value is needed).
// CHECK: scf.for %[[J:[a-z0-9]+]] =
// CHECK: %[[USE:.*]] = arith.subi %[[J]], %{{.*}}
// CHECK: %[[STAGE:.*]], %{{.*}} = fagpu.pipeline_position %[[KV]][%[[USE]]] : <stages = 2, buffers = 2, 128x128xf16>
// CHECK: %{{.*}}, %[[FREE:.*]] = fagpu.pipeline_position %[[KV]][%{{.*}}] producer : <stages = 2, buffers = 2, 128x128xf16>
// CHECK: fagpu.pipeline_acquire %[[KV]][%[[STAGE]]] buffer 0 parity %[[FREE]]
// CHECK: fagpu.tma_load %arg1[%{{.*}}, %[[KVHEAD:[0-9]+]], %[[BATCH]]] into %[[KV]][%[[STAGE]]] buffer 0
// CHECK: fagpu.pipeline_acquire %[[KV]][%[[STAGE]]] buffer 1 parity %[[FREE]]
// CHECK: fagpu.tma_load %arg2[%{{.*}}, %[[KVHEAD]], %[[BATCH]]] into %[[KV]][%{{.*}}] buffer 1
// CHECK: } consumer {
// CHECK: fagpu.pass_turn
// CHECK-NOT: scf.while
// The steady-state loop: S_j, then O += P_{j-1} V_{j-1}, the turn passes,
// softmax of S_j under the second MMA.
// The consumers wait for block j's K with its full barrier's parity.
// CHECK: scf.for {{.*}} iter_args({{.*}}) -> (!fagpu.fragment<64x128xf32, accumulator>, !fagpu.fragment<64xf32, rows>, !fagpu.fragment<64xf32, rows>, !fagpu.fragment<64x128xf16, operand_a>, !fagpu.fragment<64xf32, rows>)
// CHECK: %[[KSTAGE:.*]], %{{.*}} = fagpu.pipeline_position %[[KV]][%{{.*}}] : <stages = 2, buffers = 2, 128x128xf16>
// CHECK: fagpu.pipeline_position %[[KV]][%{{.*}}] : <stages = 2, buffers = 2, 128x128xf16>
// CHECK: fagpu.pipeline_wait %[[KV]][%[[KSTAGE]]] buffer 0 parity %{{.*}}
// CHECK: fagpu.wait_turn
// CHECK: %[[S:.*]] = fagpu.mma
// CHECK: fagpu.rescale
// CHECK: fagpu.pipeline_wait %[[KV]][%{{.*}}] buffer 1
// CHECK: fagpu.mma %{{.*}}, %{{.*}} acc(%{{.*}}) {mn_major}
// CHECK-NEXT: fagpu.pass_turn
// CHECK-NEXT: fagpu.mma_wait pending 1
// CHECK-NEXT: fagpu.pin %[[S]]
// CHECK-NEXT: fagpu.pipeline_release %[[KV]][%{{.*}}] buffer 0
// CHECK: fagpu.softmax_step
// CHECK: fagpu.mma_wait pending 0
// O from registers into a strided [B, H, N, D]: Hq heads, o's strides.
// Where the LSE's and O's rows start first, then the rows' totals, O, the
// LSE.
// CHECK: %[[LSEROWS:.*]] = fagpu.lse_rows %arg4[%{{.*}}] rows %arg5 : <1>
// CHECK-NEXT: %[[OROWS:.*]], %[[OSTRIDE:.*]] = fagpu.output_rows %arg3[%{{.*}}] rows %arg5 : <1> as f16 strided(%arg7, %arg11, %arg12, %arg13) {columns = 128 : i64}
// CHECK-NEXT: %[[TOTAL:.*]], %[[FACTOR:.*]] = fagpu.row_totals
// CHECK-NEXT: fagpu.store_rows %{{.*}}, %[[FACTOR]] rows({{.*}}) to %[[OROWS]] stride %[[OSTRIDE]] : <1> as f16 :
// CHECK-NEXT: fagpu.store_lse %{{.*}}, %[[TOTAL]] rows({{.*}}) to %[[LSEROWS]] : <1>


// -----

func.func @all_on(%q: memref<?x?x?x128xf16>, %k: memref<?x?x?x128xf16>, %v: memref<?x?x?x128xf16>,
    %o: memref<?x?x?x128xf16>, %lse: memref<?x?x?xf32>) {
  fagpu.attention %q, %k, %v outs(%o, %lse) {target = #fagpu.target<sm_90a>, scale = 0.125 : f32, 
      schedule = #fagpu.schedule<block_r = 128, block_c = 128, consumers = 2, ctas_per_sm = 1, producer_registers = 24, consumer_registers = 240, stages = 2, ping_pong = true, overlap_softmax = true, scheduler = single, q_buffers = 1, epilogue = registers, q_in_registers = false>}
    : memref<?x?x?x128xf16>, memref<?x?x?x128xf16>, memref<?x?x?x128xf16>, memref<?x?x?x128xf16>, memref<?x?x?xf32>
  return
}

// -----

// Without ping-pong the consumers issue their MMAs without turns.
// CHECK-LABEL: func.func @no_ping_pong
// CHECK: llvm.func @fa3_sm90_d128_br128_bc128_s2_f16_nopp_stg(
// CHECK-NOT: fagpu.wait_turn
// CHECK-NOT: fagpu.pass_turn
// CHECK: llvm.return


// -----

func.func @no_ping_pong(%q: memref<?x?x?x128xf16>, %k: memref<?x?x?x128xf16>, %v: memref<?x?x?x128xf16>,
    %o: memref<?x?x?x128xf16>, %lse: memref<?x?x?xf32>) {
  fagpu.attention %q, %k, %v outs(%o, %lse) {target = #fagpu.target<sm_90a>, scale = 0.125 : f32, 
      schedule = #fagpu.schedule<block_r = 128, block_c = 128, consumers = 2, ctas_per_sm = 1, producer_registers = 24, consumer_registers = 240, stages = 2, ping_pong = false, overlap_softmax = true, scheduler = single, q_buffers = 1, epilogue = registers, q_in_registers = false>}
    : memref<?x?x?x128xf16>, memref<?x?x?x128xf16>, memref<?x?x?x128xf16>, memref<?x?x?x128xf16>, memref<?x?x?xf32>
  return
}

// -----

// Without the softmax/GEMM overlap every MMA is waited for at once.
// CHECK-LABEL: func.func @no_overlap
// CHECK: llvm.func @fa3_sm90_d128_br128_bc128_s3_f16_noovl_stg(
// CHECK: <stages = 3, buffers = 2, 128x128xf16>
// CHECK-NOT: fagpu.mma_wait pending 1
// CHECK: llvm.return


// -----

func.func @no_overlap(%q: memref<?x?x?x128xf16>, %k: memref<?x?x?x128xf16>, %v: memref<?x?x?x128xf16>,
    %o: memref<?x?x?x128xf16>, %lse: memref<?x?x?xf32>) {
  fagpu.attention %q, %k, %v outs(%o, %lse) {target = #fagpu.target<sm_90a>, scale = 0.125 : f32, 
      schedule = #fagpu.schedule<block_r = 128, block_c = 128, consumers = 2, ctas_per_sm = 1, producer_registers = 24, consumer_registers = 240, stages = 3, ping_pong = true, overlap_softmax = false, scheduler = single, q_buffers = 1, epilogue = registers, q_in_registers = false>}
    : memref<?x?x?x128xf16>, memref<?x?x?x128xf16>, memref<?x?x?x128xf16>, memref<?x?x?x128xf16>, memref<?x?x?xf32>
  return
}

// -----

// Persistent CTAs with the dynamic scheduler and two Q buffers: the
// producer fetches tiles from the counter and ends the consumers' loop
// through a Q buffer (a commit without bytes); the consumers carry the
// pending tile (its last P V) into the next.
// CHECK-LABEL: func.func @dynamic
// CHECK: llvm.func @fa3_sm90_d128_br128_bc128_s2_f16_causal_persistent_q2_stg(
// A persistent grid: at most as many CTAs as are resident.
// CHECK-SAME: fagpu.grid = {x = "min(ceil(Nq / block_r) * Hq * B, SMs * ctas_per_sm)", y = 1 : i64, z = 1 : i64}
// CHECK: fagpu.create_pipeline {{.*}} : <stages = 2, buffers = 1, 128x128xf16>
// CHECK: producer {
// CHECK: scf.while
// CHECK: fagpu.publish_tile
// CHECK: fagpu.fetch_tile %{{.*}} tiles %{{.*}} : !llvm.ptr<1>
// CHECK: fagpu.publish_tile
// CHECK: fagpu.pipeline_commit
// CHECK: } consumer {
// CHECK: fagpu.receive_tile
// CHECK: scf.while {{.*}} : (i32, i32, i32, !fagpu.fragment<64x128xf32, accumulator>
// CHECK: fagpu.receive_tile
// CHECK: fagpu.store_rows


// -----

func.func @dynamic(%q: memref<?x?x?x128xf16>, %k: memref<?x?x?x128xf16>, %v: memref<?x?x?x128xf16>,
    %o: memref<?x?x?x128xf16>, %lse: memref<?x?x?xf32>) {
  fagpu.attention %q, %k, %v outs(%o, %lse) {target = #fagpu.target<sm_90a>, scale = 0.125 : f32, causal, 
      schedule = #fagpu.schedule<block_r = 128, block_c = 128, consumers = 2, ctas_per_sm = 1, producer_registers = 24, consumer_registers = 240, stages = 2, ping_pong = true, overlap_softmax = true, scheduler = dynamic, q_buffers = 2, epilogue = registers, q_in_registers = false>}
    : memref<?x?x?x128xf16>, memref<?x?x?x128xf16>, memref<?x?x?x128xf16>, memref<?x?x?x128xf16>, memref<?x?x?xf32>
  return
}

// -----

// The TMA-store epilogue: a staging tile after the ring, or Q's buffer.
// CHECK-LABEL: func.func @tma_store
// CHECK: llvm.func @fa3_sm90_d128_br128_bc128_s2_f16(
// CHECK: %[[STAGING:.*]] = fagpu.shared_tile offset {{[0-9]+}} : <128x128xf16>
// CHECK: %[[ROWS:.*]] = fagpu.tile_rows %[[STAGING]]
// CHECK: %[[TOTAL:.*]], %[[FACTOR:.*]] = fagpu.row_totals
// CHECK-NEXT: fagpu.store_wait
// CHECK-NEXT: fagpu.stage_output %{{.*}}, %[[FACTOR]] into %[[ROWS]] sync %[[SYNC:.*]] : <64x128xf32, accumulator>, <64xf32, rows>, <64x128xf16, block_rows = 128>
// CHECK-NEXT: fagpu.tma_store_staged %[[ROWS]] rows({{.*}}) to %arg3 : !llvm.ptr strided(%arg7) sync %[[SYNC]]
// CHECK-NEXT: fagpu.store_lse %{{.*}}, %[[TOTAL]]
// CHECK-NEXT: fagpu.store_wait


// -----

func.func @tma_store(%q: memref<?x?x?x128xf16>, %k: memref<?x?x?x128xf16>, %v: memref<?x?x?x128xf16>,
    %o: memref<?x?x?x128xf16>, %lse: memref<?x?x?xf32>) {
  fagpu.attention %q, %k, %v outs(%o, %lse) {target = #fagpu.target<sm_90a>, scale = 0.125 : f32, 
      schedule = #fagpu.schedule<block_r = 128, block_c = 128, consumers = 2, ctas_per_sm = 1, producer_registers = 24, consumer_registers = 240, stages = 2, ping_pong = true, overlap_softmax = true, scheduler = single, q_buffers = 1, epilogue = tma_store, q_in_registers = false>}
    : memref<?x?x?x128xf16>, memref<?x?x?x128xf16>, memref<?x?x?x128xf16>, memref<?x?x?x128xf16>, memref<?x?x?xf32>
  return
}

// -----

// Staging in Q where a staging tile would fit is named apart: the two
// kernels' shared memory differs.
// CHECK-LABEL: func.func @tma_store_in_q
// CHECK: llvm.func @fa3_sm90_d128_br128_bc128_s2_f16_oinq(
// CHECK-NOT: fagpu.shared_tile
// After the unmasked and the masked loop, Q is released; its buffer then
// stages O.
// CHECK: scf.for
// CHECK: scf.for
// CHECK: fagpu.pipeline_release %{{.*}} buffer 0 : <stages = 1, buffers = 1, 128x128xf16>
// CHECK: %[[QT:.*]] = fagpu.pipeline_tile %{{.*}}[%{{.*}}] buffer 0 : <stages = 1, buffers = 1, 128x128xf16> -> <128x128xf16>
// CHECK-NEXT: %[[ROWS:.*]] = fagpu.tile_rows %[[QT]]
// CHECK-NEXT: fagpu.lse_rows
// CHECK-NEXT: fagpu.row_totals
// CHECK-NEXT: fagpu.store_wait
// CHECK-NEXT: fagpu.stage_output {{.*}} into %[[ROWS]]
// CHECK-NEXT: fagpu.tma_store_staged %[[ROWS]]


// -----

func.func @tma_store_in_q(%q: memref<?x?x?x128xf16>, %k: memref<?x?x?x128xf16>, %v: memref<?x?x?x128xf16>,
    %o: memref<?x?x?x128xf16>, %lse: memref<?x?x?xf32>) {
  fagpu.attention %q, %k, %v outs(%o, %lse) {target = #fagpu.target<sm_90a>, scale = 0.125 : f32, 
      schedule = #fagpu.schedule<block_r = 128, block_c = 128, consumers = 2, ctas_per_sm = 1, producer_registers = 24, consumer_registers = 240, stages = 2, ping_pong = true, overlap_softmax = true, scheduler = single, q_buffers = 1, epilogue = tma_store_in_q, q_in_registers = false>}
    : memref<?x?x?x128xf16>, memref<?x?x?x128xf16>, memref<?x?x?x128xf16>, memref<?x?x?x128xf16>, memref<?x?x?xf32>
  return
}

// -----

// Bottom-right masks (a KV cache): the softmax step's mask moves by
// Nk - Nq (%arg6 - %arg5), and the tile's K/V range is computed from the
// rows' key positions, clamped at key 0 and to one block at least.
// CHECK-LABEL: func.func @bottom_right
// CHECK: llvm.func @fa3_sm90_d128_br128_bc128_s2_f16_causal_stg_bralign(
// CHECK: %[[SHIFT:.*]] = arith.subi %arg6, %arg5 : i32
// CHECK: arith.maxsi
// CHECK: fagpu.softmax_step {{.*}} row %{{.*}} shift %{{.*}} scale
func.func @bottom_right(%q: memref<?x?x?x128xf16>, %k: memref<?x?x?x128xf16>, %v: memref<?x?x?x128xf16>,
    %o: memref<?x?x?x128xf16>, %lse: memref<?x?x?xf32>) {
  fagpu.attention %q, %k, %v outs(%o, %lse) {target = #fagpu.target<sm_90a>, scale = 0.125 : f32, causal, bottom_right,
      schedule = #fagpu.schedule<block_r = 128, block_c = 128, consumers = 2, ctas_per_sm = 1, producer_registers = 24, consumer_registers = 240, stages = 2, ping_pong = true, overlap_softmax = true, scheduler = single, q_buffers = 1, epilogue = registers, q_in_registers = false>}
    : memref<?x?x?x128xf16>, memref<?x?x?x128xf16>, memref<?x?x?x128xf16>, memref<?x?x?x128xf16>, memref<?x?x?xf32>
  return
}

// -----

// Split-KV: the grid's y is the chunk; each CTA attends its tile to chunk
// ctaid.y of the visible blocks (an empty chunk stores the initial state:
// O = 0, LSE = -inf), stores the partial in f32 at row block
// chunk * B * Hq + matrix, and the last chunk of each warp's rows merges.
// CHECK-LABEL: func.func @split_kv
// CHECK: gpu.alloc async {{.*}} : memref<?xf32>
// CHECK: gpu.alloc async {{.*}} : memref<?xf32>
// CHECK: gpu.alloc async {{.*}} : memref<?xi32>
// CHECK: gpu.memset async
// CHECK: gpu.launch_func async {{.*}} @fa_kernels::@fa3_sm90_d128_br64_bc64_s2_f16_stg_splitkv blocks in (%{{.*}}, %c4{{.*}}, %c1{{.*}})
// CHECK: llvm.func @fa3_sm90_d128_br64_bc64_s2_f16_stg_splitkv(
// CHECK-SAME: %arg11: i64, %arg12: i64, %arg13: i64, %[[SPLITS:arg14]]: i32, %[[OP:arg15]]: !llvm.ptr<1>, %[[LP:arg16]]: !llvm.ptr<1>, %[[ARR:arg17]]: !llvm.ptr<1>)
// CHECK: } consumer {
// CHECK: %[[CHUNK:.*]] = nvvm.read.ptx.sreg.ctaid.y
// CHECK: %[[ANY:.*]] = arith.cmpi ult, %[[BEGIN:.*]], %[[END:.*]] : i32
// CHECK: scf.if %[[ANY]] {
// CHECK: fagpu.mma
// CHECK: %[[PROWS:.*]] = fagpu.lse_rows %[[LP]]
// CHECK: fagpu.output_rows %[[OP]]
// CHECK: fagpu.store_rows {{.*}} : <1> as f32 :
// CHECK-NEXT: fagpu.store_lse {{.*}} to %[[PROWS]] : <1>
// CHECK: } else {
// CHECK: fagpu.splat %cst{{.*}} : <64x128xf32, accumulator>
// CHECK: %[[PROWS2:.*]] = fagpu.lse_rows %[[LP]]
// CHECK: fagpu.output_rows %[[OP]]
// CHECK: fagpu.store_rows {{.*}} : <1> as f32 :
// CHECK-NEXT: fagpu.store_lse {{.*}} to %[[PROWS2]] : <1>
// CHECK: }
// CHECK: fagpu.merge_splits rows({{.*}}) of %[[SPLITS]] x %{{.*}} arrivals %[[ARR]] partials(%[[OP]], %[[LP]]) to %arg3 as f16 strided(%arg7, %arg11, %arg12, %arg13) lse %arg4 {head_dim = 128 : i64}
func.func @split_kv(%q: memref<?x?x?x128xf16>, %k: memref<?x?x?x128xf16>, %v: memref<?x?x?x128xf16>,
    %o: memref<?x?x?x128xf16>, %lse: memref<?x?x?xf32>) {
  fagpu.attention %q, %k, %v outs(%o, %lse) {target = #fagpu.target<sm_90a>, scale = 0.125 : f32,
      schedule = #fagpu.schedule<block_r = 64, block_c = 64, consumers = 1, ctas_per_sm = 2, producer_registers = 24, consumer_registers = 232, stages = 2, ping_pong = false, overlap_softmax = true, scheduler = single, q_buffers = 1, epilogue = registers, q_in_registers = false, kv_splits = 4>}
    : memref<?x?x?x128xf16>, memref<?x?x?x128xf16>, memref<?x?x?x128xf16>, memref<?x?x?x128xf16>, memref<?x?x?xf32>
  return
}

// -----

// D = 96 on D = 128 tiles (sm90TileHeadDim): the pipelines, fragments and
// MMAs are D = 128's (the TMA fills columns 96 to 127 with zeros); the
// tensor maps have D = 96 columns, the partial and final O 96 columns
// (`columns`, and the merge's head_dim), the split scratch 96 per row.
// CHECK-LABEL: func.func @padded_head_dim
// CHECK: arith.constant 96 : index
// CHECK: gpu.alloc async {{.*}} : memref<?xf32>
// Q's map takes the default L2 promotion (256 bytes), K's and V's the
// split-KV kernels' 64 (fagpu::kvL2Promotion).
// CHECK: llvm.call @faEncodeStridedTensorMapL2({{.*}}, %c96_i64{{.*}}, %c0_i32{{[_0-9]*}}, %c256_i32{{[_0-9]*}}) : (!llvm.ptr, !llvm.ptr, i64, i64, i64, i64, i64, i64, i64, i32, i32, i32) -> i32
// CHECK: llvm.call @faEncodeStridedTensorMapL2({{.*}}, %c0_i32{{[_0-9]*}}, %c64_i32{{[_0-9]*}})
// CHECK: llvm.call @faEncodeStridedTensorMapL2({{.*}}, %c0_i32{{[_0-9]*}}, %c64_i32{{[_0-9]*}})
// The grid the lowering wrote, (ceil(Nq / block_r) * Hq * B, kv_splits, 1),
// with kv_splits the IR launch's 4 chunks.
// CHECK: gpu.launch_func async {{.*}} @fa_kernels::@fa3_sm90_d96_br64_bc64_s2_f16_stg_splitkv blocks in (%{{.*}}, %c4{{[_0-9]*}}, %c1{{[_0-9]*}})
// CHECK: llvm.func @fa3_sm90_d96_br64_bc64_s2_f16_stg_splitkv(
// CHECK: fagpu.create_pipeline {{.*}} : <stages = 1, buffers = 1, 64x128xf16>
// CHECK: fagpu.create_pipeline {{.*}} : <stages = 2, buffers = 2, 64x128xf16>
// CHECK: fagpu.store_rows {{.*}} as f32 {columns = 96 : i64} : <64x128xf32, accumulator>
// CHECK: fagpu.merge_splits {{.*}} {head_dim = 96 : i64}
func.func @padded_head_dim(%q: memref<?x?x?x96xf16>, %k: memref<?x?x?x96xf16>, %v: memref<?x?x?x96xf16>,
    %o: memref<?x?x?x96xf16>, %lse: memref<?x?x?xf32>) {
  fagpu.attention %q, %k, %v outs(%o, %lse) {target = #fagpu.target<sm_90a>, scale = 0.125 : f32,
      schedule = #fagpu.schedule<block_r = 64, block_c = 64, consumers = 1, ctas_per_sm = 2, producer_registers = 24, consumer_registers = 232, stages = 2, ping_pong = false, overlap_softmax = true, scheduler = single, q_buffers = 1, epilogue = registers, q_in_registers = false, kv_splits = 4>}
    : memref<?x?x?x96xf16>, memref<?x?x?x96xf16>, memref<?x?x?x96xf16>, memref<?x?x?x96xf16>, memref<?x?x?xf32>
  return
}

// -----

// V and O narrower than Q and K (DeepSeek's Q/K 192, V 128): V's tiles are
// K's (D = 192), its map has 128 columns (the TMA zero-fills 128 to 191,
// so O's columns 128 to 191 are zero), and O's 128 columns are stored.
// CHECK-LABEL: func.func @narrow_values
// CHECK: llvm.call @faEncodeStridedTensorMapL2({{.*}}, %c192_i64{{.*}}, {{.*}}) : (!llvm.ptr, !llvm.ptr, i64, i64, i64, i64, i64, i64, i64, i32, i32, i32) -> i32
// CHECK: llvm.call @faEncodeStridedTensorMapL2({{.*}}, %c192_i64{{.*}}, {{.*}}) : (!llvm.ptr, !llvm.ptr, i64, i64, i64, i64, i64, i64, i64, i32, i32, i32) -> i32
// CHECK: llvm.call @faEncodeStridedTensorMapL2({{.*}}, %c128_i64{{.*}}, {{.*}}) : (!llvm.ptr, !llvm.ptr, i64, i64, i64, i64, i64, i64, i64, i32, i32, i32) -> i32
// CHECK: gpu.launch_func @fa_kernels::@fa3_sm90_d192_dv128_br128_bc64_s2_f16_stg
// CHECK: fagpu.create_pipeline {{.*}} : <stages = 2, buffers = 2, 64x192xf16>
// CHECK: fagpu.store_rows {{.*}} as f16 {columns = 128 : i64} : <64x192xf32, accumulator>
func.func @narrow_values(%q: memref<?x?x?x192xf16>, %k: memref<?x?x?x192xf16>, %v: memref<?x?x?x128xf16>,
    %o: memref<?x?x?x128xf16>, %lse: memref<?x?x?xf32>) {
  fagpu.attention %q, %k, %v outs(%o, %lse) {target = #fagpu.target<sm_90a>, scale = 0.072 : f32,
      schedule = #fagpu.schedule<block_r = 128, block_c = 64, consumers = 2, ctas_per_sm = 1, producer_registers = 24, consumer_registers = 240, stages = 2, ping_pong = true, overlap_softmax = true, scheduler = single, q_buffers = 1, epilogue = registers, q_in_registers = false, kv_splits = 0>}
    : memref<?x?x?x192xf16>, memref<?x?x?x192xf16>, memref<?x?x?x128xf16>, memref<?x?x?x128xf16>, memref<?x?x?xf32>
  return
}
