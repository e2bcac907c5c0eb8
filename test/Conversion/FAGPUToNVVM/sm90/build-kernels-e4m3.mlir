// RUN: fa-opt %s --split-input-file --fagpu-build-kernels | FileCheck %s
// RUN: fa-opt %s --split-input-file --fagpu-build-kernels --convert-fagpu-to-nvvm | FileCheck %s --check-prefix=NVVM

// The FP8 (e4m3) kernel of FlashAttention-3 in warpgroup-level ops: e4m3 Q
// and K tiles, the V buffer holding a V^T tile (the 8-bit wgmma has no
// transpose) loaded at its block's first key, P V on the K-major V^T, the
// softmax step casting 2^8 P to e4m3, O stored with V's descale and the LSE
// less log2 of the probs scale. V^T comes from the layout kernel of the
// same module, which the host launch runs first on a workspace of its own.

// CHECK-LABEL: func.func @e4m3
// The layout kernel (V [B, Hkv, Nk, D] -> V^T [B, Hkv, D, Nk_128]) on the
// launch's stream, then the attention: V^T's rows are the keys rounded up
// to 128 (Nk = 500 here: 512), whole 128-byte lines.
// CHECK: arith.constant 128 : index
// CHECK-NEXT: %[[BLOCKS:.*]] = arith.constant 4 : index
// CHECK-NEXT: %[[PER:.*]] = arith.constant 8 : index
// CHECK-NEXT: %[[GROUPS:.*]] = arith.muli %[[BLOCKS]], %[[PER]] : index
// CHECK-NEXT: %[[C16:.*]] = arith.constant 16 : index
// CHECK-NEXT: %[[KEYS:.*]] = arith.muli %[[GROUPS]], %[[C16]] : index
// CHECK: %[[BYTES:.*]] = arith.muli %{{.*}}, %[[KEYS]] : index
// CHECK: %[[VT:.*]], %[[T0:.*]] = gpu.alloc async [%{{.*}}] (%[[BYTES]]) : memref<?xi8>
// CHECK: %[[T1:.*]] = gpu.launch_func async [%[[T0]]] @fa_kernels::@fa_e4m3_v_layout_d128 blocks in ({{.*}}) threads in (%c256,
// q, k and V^T: e4m3 maps (dtype code 2); V^T's rows are D, its columns
// the keys.
// CHECK-COUNT-3: llvm.call @faEncodeStridedTensorMapL2({{.*}}, %c2_i32{{.*}})
// CHECK: gpu.launch_func async [%[[T1]]] @fa_kernels::@fa3_sm90_d128_br128_bc128_s3_e4m3_bf16_causal_persistent_q2_stg_cr0_ps256
// CHECK: gpu.dealloc async {{.*}} %[[VT]]
// CHECK: llvm.func @fa_e4m3_v_layout_d128(
// Its grid, which the runtimes evaluate (fagpu::valueLayoutGrid): a thread
// a 16-key group of 16 V^T rows, 256 a CTA.
// CHECK-SAME: fagpu.grid = {x = "ceil(B * Hkv * (Nk_128 / 16) * (D / 16) / 256)", y = 1 : i64, z = 1 : i64}
// A V^T row's 16-key groups: 8 for every 128 keys, ceil(Nk / 128) times.
// CHECK: %[[NK:.*]] = arith.extui %arg4 : i32 to i64
// CHECK: %[[UP:.*]] = arith.addi %[[NK]], %c127_i64 : i64
// CHECK: %[[ALIGNED:.*]] = arith.divui %[[UP]], %c128_i64{{.*}} : i64
// CHECK: arith.muli %[[ALIGNED]], %c8_i64{{.*}} : i64
// A thread's 16 x 16 byte block: 16 key rows of 16 columns loaded whole,
// transposed by byte shuffles (two rounds of a 4 x 4 transpose for each of
// the 16 word blocks), then 16 V^T rows of 16 keys stored.
// CHECK-COUNT-16: llvm.load {{.*}} invariant {alignment = 16 : i64} : !llvm.ptr<1> -> vector<4xi32>
// CHECK-COUNT-128: llvm.shufflevector {{.*}} : vector<4xi8>
// CHECK-COUNT-16: llvm.store {{.*}} {alignment = 16 : i64} : vector<4xi32>, !llvm.ptr<1>
// CHECK-NOT: llvm.store
// CHECK: llvm.func @fa3_sm90_d128_br128_bc128_s3_e4m3_bf16_causal_persistent_q2_stg_cr0_ps256(
// CHECK-SAME: fagpu.value_layout = "fa_e4m3_v_layout_d128"
// CHECK: fagpu.create_pipeline {{.*}} : <stages = 2, buffers = 1, 128x128xf8E4M3FN>
// CHECK: %[[KV:.*]] = fagpu.create_pipeline {{.*}} : <stages = 3, buffers = 2, 128x128xf8E4M3FN>
// CHECK: producer {
// CHECK: fagpu.tma_load %arg1[{{.*}}] into %[[KV]][%{{.*}}] buffer 0
// CHECK: fagpu.tma_load %arg2[%c0_i32{{.*}}] column %{{.*}} into %[[KV]][%{{.*}}] buffer 1
// CHECK: } consumer {
// Each tile's descales, as descale_layout (%arg17) lays them out: 0 one per
// tensor, 1 its (batch, K/V head)'s, 2 per block. Q's scales the tile's
// scores and V's its O; K's is read for every K/V block (the block's own
// per block, else one for all: a step of 0), ahead of the block's wait.
// CHECK: %[[PERHEAD:.*]] = arith.cmpi eq, %arg17, %c1_i32
// CHECK: %[[PERBLOCK:.*]] = arith.cmpi eq, %arg17, %c2_i32
// CHECK: %[[QP:.*]] = llvm.getelementptr %arg14[
// CHECK: %[[QD:.*]] = llvm.load %[[QP]] {{.*}}invariant{{.*}} : !llvm.ptr<1> -> f32
// CHECK: %[[TILE:.*]] = arith.mulf %arg9, %[[QD]]
// CHECK: %[[STEP:.*]] = arith.extui %[[PERBLOCK]] : i1 to i32
// CHECK: llvm.getelementptr %arg16[
// CHECK: arith.muli %{{.*}}, %[[STEP]]
// CHECK: %[[KP:.*]] = llvm.getelementptr %arg15[
// CHECK: %[[KD:.*]] = llvm.load %[[KP]] {{.*}}invariant{{.*}} : !llvm.ptr<1> -> f32
// CHECK: %[[SCALE:.*]] = arith.mulf %[[TILE]], %[[KD]]
// CHECK: fagpu.pipeline_wait
// CHECK: fagpu.mma {{.*}} : !fagpu.smem_tile<64x128xf8E4M3FN, block_rows = 128>, <128x128xf8E4M3FN> -> !fagpu.fragment<64x128xf32, accumulator>
// CHECK: fagpu.softmax_step {{.*}} scale %[[SCALE]] {{.*}}probs_scale = 2.560000e+02 : f32{{.*}} -> {{.*}}<64x128xf8E4M3FN, operand_a>
// CHECK: scf.for %[[J:[^ ]*]] =
// CHECK: arith.muli %[[J]], %[[STEP]]
// CHECK: %[[KJP:.*]] = llvm.getelementptr %arg15[
// CHECK: %[[KJ:.*]] = llvm.load %[[KJP]] {{.*}}invariant{{.*}} : !llvm.ptr<1> -> f32
// CHECK: %[[SJ:.*]] = arith.mulf %[[TILE]], %[[KJ]]
// CHECK: fagpu.pipeline_wait
// CHECK: fagpu.softmax_step {{.*}} scale %[[SJ]]
// CHECK-NOT: mn_major
// CHECK: fagpu.mma {{.*}} : !fagpu.fragment<64x128xf8E4M3FN, operand_a>, <128x128xf8E4M3FN>, !fagpu.fragment<64x128xf32, accumulator> -> !fagpu.fragment<64x128xf32, accumulator>
// The cross-tile pipeline carries a tile's V descale to its epilogue, in
// the next tile's iteration and after the loop.
// CHECK: %[[T0:.*]], %{{.*}} = fagpu.row_totals %{{.*}} descale %arg{{[0-9]+}} :
// CHECK: fagpu.store_lse %{{.*}}, %[[T0]] {{.*}} {probs_scale = 2.560000e+02 : f32}
// CHECK: %[[T1:.*]], %{{.*}} = fagpu.row_totals %{{.*}} descale %{{[0-9]+}}#{{[0-9]+}} :
// CHECK: fagpu.store_lse %{{.*}}, %[[T1]] {{.*}} {probs_scale = 2.560000e+02 : f32}

// The epilogue's arithmetic: V's descale over l, and log2(256) = 8 off
// the LSE's log2 sum.
// NVVM-LABEL: llvm.func @fa3_sm90_d128_br128_bc128_s3_e4m3_bf16_causal_persistent_q2_stg_cr0_ps256(
// NVVM: llvm.getelementptr %arg16[
// NVVM: wgmma.mma_async.sync.aligned.m64n128k32.f32.e4m3.e4m3
// NVVM: arith.divf %arg{{[0-9]+}}, %{{.*}} : f32
// NVVM: lg2.approx.ftz.f32
// NVVM-NEXT: arith.constant -8.000000e+00 : f32
// NVVM-NEXT: arith.addf

func.func @e4m3(%q: memref<2x4x300x128xf8E4M3FN>, %k: memref<2x2x500x128xf8E4M3FN>, %v: memref<2x2x500x128xf8E4M3FN>, %o: memref<2x4x300x128xbf16>, %lse: memref<2x4x300xf32>, %qd: memref<f32>, %kd: memref<f32>, %vd: memref<f32>) {
  fagpu.attention %q, %k, %v descale(%qd, %kd, %vd : memref<f32>, memref<f32>, memref<f32>) outs(%o, %lse) {causal, probs_scale = 2.560000e+02 : f32, rescale_threshold = 0.000000e+00 : f32, scale = 0.0883883461 : f32, schedule = #fagpu.schedule<block_r = 128, block_c = 128, consumers = 2, ctas_per_sm = 1, producer_registers = 24, consumer_registers = 240, stages = 3, ping_pong = true, overlap_softmax = true, scheduler = dynamic, q_buffers = 2, epilogue = registers, q_in_registers = false>, target = #fagpu.target<sm_90a>} : memref<2x4x300x128xf8E4M3FN>, memref<2x2x500x128xf8E4M3FN>, memref<2x2x500x128xf8E4M3FN>, memref<2x4x300x128xbf16>, memref<2x4x300xf32>
  return
}

// -----

// D = 256: the ring's two buffers have their own tile types, K [B_c, D] and
// V^T [D, B_c] (as many bytes); the layout kernel of this head dim.
// CHECK-LABEL: func.func @e4m3_d256
// CHECK: gpu.launch_func async {{.*}} @fa_kernels::@fa_e4m3_v_layout_d256
// CHECK: llvm.func @fa3_sm90_d256_br128_bc128_s2_e4m3_f16_stg_cr0_nolse_ps256(
// CHECK: %[[KV:.*]] = fagpu.create_pipeline {{.*}} : <stages = 2, buffers = 2, 128x256xf8E4M3FN, 256x128xf8E4M3FN>
// CHECK: fagpu.tma_load %arg2[%c0_i32{{.*}}] column %{{.*}} into %[[KV]][%{{.*}}] buffer 1
// CHECK: fagpu.pipeline_tile %[[KV]][%{{.*}}] buffer 0 : {{.*}} -> <128x256xf8E4M3FN>
// CHECK: fagpu.pipeline_tile %[[KV]][%{{.*}}] buffer 1 : {{.*}} -> <256x128xf8E4M3FN>
// CHECK: fagpu.mma {{.*}} : !fagpu.fragment<64x128xf8E4M3FN, operand_a>, <256x128xf8E4M3FN>, !fagpu.fragment<64x256xf32, accumulator> -> !fagpu.fragment<64x256xf32, accumulator>
func.func @e4m3_d256(%q: memref<1x2x200x256xf8E4M3FN>, %k: memref<1x2x300x256xf8E4M3FN>, %v: memref<1x2x300x256xf8E4M3FN>, %o: memref<1x2x200x256xf16>, %qd: memref<f32>, %kd: memref<f32>, %vd: memref<f32>) {
  fagpu.attention %q, %k, %v descale(%qd, %kd, %vd : memref<f32>, memref<f32>, memref<f32>) outs(%o) {probs_scale = 2.560000e+02 : f32, rescale_threshold = 0.000000e+00 : f32, scale = 0.0625 : f32, schedule = #fagpu.schedule<block_r = 128, block_c = 128, consumers = 2, ctas_per_sm = 1, producer_registers = 24, consumer_registers = 240, stages = 2, ping_pong = true, overlap_softmax = true, scheduler = single, q_buffers = 1, epilogue = registers, q_in_registers = false>, target = #fagpu.target<sm_90a>} : memref<1x2x200x256xf8E4M3FN>, memref<1x2x300x256xf8E4M3FN>, memref<1x2x300x256xf8E4M3FN>, memref<1x2x200x256xf16>
  return
}

// -----

// row_sum_mma (fagpu-row-sum-mma): each consumer writes its 8 rows of the
// row-sum tile (B_c = 224 keys, 32-byte column blocks: 16 rows of 2
// consumers in each), l is an m64n8 accumulator fed by P against it just
// before P V and rescaled with O, the softmax step drops its FADD sums,
// and the store takes the per-thread partials of the accumulator. The
// attention writes no LSE (the sums of the e4m3-rounded P give O / l, not
// the attention's log-sum-exp).
// CHECK-LABEL: func.func @e4m3_row_sums
// CHECK: llvm.func @fa3_sm90_d128_br128_bc224_s2_e4m3_bf16_persistent_q2_rsmma_stg_cr0_nolse_ps256(
// CHECK: %[[ALL:.*]] = fagpu.shared_tile offset {{[0-9]+}} : <16x224xf8E4M3FN, swizzle = 32>
// CHECK: %[[ONES:.*]] = fagpu.tile_rows %[[ALL]][%{{.*}}] : <16x224xf8E4M3FN, swizzle = 32> -> <8x224xf8E4M3FN, block_rows = 16, swizzle = 32>
// CHECK: fagpu.init_row_sum_tile %[[ONES]] barrier
// CHECK: fagpu.softmax_step {{.*}}no_row_sum
// CHECK: fagpu.rescale {{.*}} : !fagpu.fragment<64x8xf32, accumulator>
// CHECK: fagpu.mma %{{.*}}, %[[ONES]] acc(%{{.*}}) : !fagpu.fragment<64x224xf8E4M3FN, operand_a>, <8x224xf8E4M3FN, block_rows = 16, swizzle = 32>, !fagpu.fragment<64x8xf32, accumulator>
// CHECK-NEXT: fagpu.mma %{{.*}}, %{{.*}} acc(%{{.*}}) : !fagpu.fragment<64x224xf8E4M3FN, operand_a>, <128x224xf8E4M3FN, swizzle = 32>, !fagpu.fragment<64x128xf32, accumulator>
// CHECK: %[[L:.*]] = fagpu.row_partials %{{.*}} : <64x8xf32, accumulator> -> <64xf32, rows>
// CHECK-NEXT: fagpu.output_rows
// CHECK-NEXT: fagpu.row_totals %[[L]] descale
func.func @e4m3_row_sums(%q: memref<1x2x300x128xf8E4M3FN>, %o: memref<1x2x300x128xbf16>, %qd: memref<f32>) {
  fagpu.attention %q, %q, %q descale(%qd, %qd, %qd : memref<f32>, memref<f32>, memref<f32>) outs(%o) {probs_scale = 2.560000e+02 : f32, rescale_threshold = 0.000000e+00 : f32, scale = 0.0883883461 : f32, schedule = #fagpu.schedule<block_r = 128, block_c = 224, consumers = 2, ctas_per_sm = 1, producer_registers = 24, consumer_registers = 240, stages = 2, ping_pong = true, overlap_softmax = true, scheduler = static, q_buffers = 2, epilogue = registers, q_in_registers = false, row_sum_mma = true>, target = #fagpu.target<sm_90a>} : memref<1x2x300x128xf8E4M3FN>, memref<1x2x300x128xf8E4M3FN>, memref<1x2x300x128xf8E4M3FN>, memref<1x2x300x128xbf16>
  return
}
