// RUN: fa-opt %s --split-input-file --fagpu-tile=target=sm_90a --fa-lower-fa2 --fa-conditional-rescale=threshold=8 --fa-poly-exp2="degree=3 period=4" --fa-map-to-gpu=target=sm_90a | FileCheck %s
// RUN: fa-opt %s --split-input-file --fagpu-tile=target=sm_80 --fa-lower-fa2 --fa-map-to-gpu=target=sm_80 | FileCheck %s --check-prefix=SM80
// RUN: not fa-opt %s --split-input-file --fagpu-tile=target=sm_90a --fa-lower-fa2 --fa-map-to-gpu=target=sm_70 2>&1 | FileCheck %s --check-prefix=BADTARGET

// fa-map-to-gpu reads the FA2 loop nest: the memrefs it copies Q, K, V from
// and O to, the LSE it writes, the tiles of its buffers (here the sm_90a
// table's 128 x 128 for causal D = 128), and the numerics of its tile ops:
// scale, mask and softcap of fa.score_tile, FA4's threshold and software
// exp2 of the softmax step. The nest is gone; the schedule has none of the
// FlashAttention-3 ideas yet.
// CHECK-LABEL: func.func @causal
// CHECK-SAME: (%[[Q:.*]]: memref<?x?x?x128xf16>, %[[K:.*]]: memref<?x?x?x128xf16>, %[[V:.*]]: memref<?x?x?x128xf16>, %[[O:.*]]: memref<?x?x?x128xf16>, %[[L:.*]]: memref<?x?x?xf32>)
// CHECK-NOT: scf.forall
// CHECK-NOT: fa.score_tile
// CHECK: fagpu.attention %[[Q]], %[[K]], %[[V]] outs(%[[O]], %[[L]])
// CHECK-SAME: causal
// CHECK-SAME: exp2_poly_degree = 3 : i64, exp2_poly_period = 4 : i64
// CHECK-SAME: rescale_threshold = 8.000000e+00 : f32
// CHECK-SAME: scale = 0.0883883461 : f32
// CHECK-SAME: schedule = #fagpu.schedule<block_r = 128, block_c = 128, consumers = 2, ctas_per_sm = 1, producer_registers = 0, consumer_registers = 0, stages = 0, ping_pong = false, overlap_softmax = false, scheduler = single, q_buffers = 1, epilogue = registers, q_in_registers = false>
// CHECK-SAME: target = #fagpu.target<sm_90a>
// CHECK-NOT: scf.forall
// SM80-LABEL: func.func @causal
// SM80: fagpu.attention
// SM80-NOT: rescale_threshold
// SM80-SAME: schedule = #fagpu.schedule<block_r = 128, block_c = 64, consumers = 0, ctas_per_sm = 1, producer_registers = 0, consumer_registers = 0, stages = 2, {{.*}} q_in_registers = true>
// SM80-SAME: target = #fagpu.target<sm_80>
// BADTARGET: fa-map-to-gpu: target must be sm_80, sm_90a or sm_100a, got 'sm_70'
func.func @causal(%q: memref<?x?x?x128xf16>, %k: memref<?x?x?x128xf16>, %v: memref<?x?x?x128xf16>,
                  %o: memref<?x?x?x128xf16>, %lse: memref<?x?x?xf32>) {
  fa.attention %q, %k, %v outs(%o, %lse : memref<?x?x?x128xf16>, memref<?x?x?xf32>) {causal}
      : memref<?x?x?x128xf16>, memref<?x?x?x128xf16>, memref<?x?x?x128xf16>
  return
}

// -----

// Two attentions in one function (different shapes, masks, scales; one
// without LSE): each nest becomes its own fagpu.attention, window and
// softcap carried over.
// CHECK-LABEL: func.func @two
// CHECK: fagpu.attention %{{.*}} outs(%{{.*}}) {
// CHECK-SAME: scale = 5.000000e-01 : f32
// CHECK-SAME: block_r = 192
// CHECK-SAME: window = 64 : i64
// CHECK: fagpu.attention %{{.*}} outs(%{{.*}}, %{{.*}}) {
// CHECK-SAME: softcap = 3.000000e+01 : f32
func.func @two(%q: memref<2x8x1000x64xbf16>, %o: memref<2x8x1000x64xbf16>,
               %q2: memref<1x4x300x128xf16>, %o2: memref<1x4x300x128xf16>, %l2: memref<1x4x300xf32>) {
  fa.attention %q, %q, %q outs(%o : memref<2x8x1000x64xbf16>) {scale = 0.5 : f32, window = 64 : i64}
      : memref<2x8x1000x64xbf16>, memref<2x8x1000x64xbf16>, memref<2x8x1000x64xbf16>
  fa.attention %q2, %q2, %q2 outs(%o2, %l2 : memref<1x4x300x128xf16>, memref<1x4x300xf32>) {softcap = 30.0 : f32}
      : memref<1x4x300x128xf16>, memref<1x4x300x128xf16>, memref<1x4x300x128xf16>
  return
}
