// RUN: fa-opt %s --split-input-file --fa-lower-fa2-backward="block-r=64 block-c=64" --fa-map-to-gpu=target=sm_80 | FileCheck %s
// RUN: fa-opt %s --split-input-file --fa-lower-fa2-backward="block-r=64 block-c=64" --fa-map-to-gpu="target=sm_80 deterministic-backward=true" | FileCheck %s --check-prefix=DET
// RUN: not fa-opt %s --split-input-file --fa-lower-fa2-backward="block-r=64 block-c=64" --fa-map-to-gpu=target=sm_90a 2>&1 | FileCheck %s --check-prefix=SM90

// fa-map-to-gpu maps the FA2 backward's main nest (the forall over
// (batch, K/V head) that fa-lower-fa2-backward tags fa2-backward) onto one
// fagpu.attention_backward: Q and dO from their score and dV tiles' views,
// K and V from the copies into their tiles, the LSE and D (the preprocess's
// buffer) from their row views, dQ's f32 accumulator from fa.grad_queries,
// dK and dV from the conversions of their block accumulators. The
// preprocess nest and dQ's conversion stay where they are.

!t = memref<?x?x?x64xf16>
// CHECK-LABEL: func.func @backward
// CHECK-SAME: (%[[Q:.*]]: memref<?x?x?x64xf16>, %[[K:.*]]: memref<?x?x?x64xf16>, %[[V:.*]]: memref<?x?x?x64xf16>, %[[O:.*]]: memref<?x?x?x64xf16>, %[[LSE:.*]]: memref<?x?x?xf32>, %[[DO:.*]]: memref<?x?x?x64xf16>, %[[DQ:.*]]: memref<?x?x?x64xf16>, %[[DK:.*]]: memref<?x?x?x64xf16>, %[[DV:.*]]: memref<?x?x?x64xf16>)
// CHECK: %[[D:.*]] = memref.alloc({{.*}}) : memref<?x?x?xf32>
// CHECK: scf.forall
// CHECK: fa.row_dot
// CHECK: %[[ACC:.*]] = memref.alloc({{.*}}) : memref<?x?x?x64xf32>
// CHECK: linalg.fill {{.*}} outs(%[[ACC]]
// CHECK-NOT: fa.score_tile
// CHECK: fagpu.attention_backward %[[Q]], %[[K]], %[[V]], %[[LSE]], %[[DO]], %[[D]], %[[ACC]] outs(%[[DK]], %[[DV]]) {block_c = 64 : i64, block_r = 64 : i64, bottom_right, causal, scale = 1.250000e-01 : f32, target = #fagpu.target<sm_80>}
// CHECK-NOT: fa.score_tile
// dQ from its accumulator, after the kernel.
// CHECK: linalg.generic {{.*}} ins(%[[ACC]] : memref<?x?x?x64xf32>) outs(%[[DQ]] : memref<?x?x?x64xf16>)
// DET: fagpu.attention_backward {{.*}} {block_c = 64 : i64, block_r = 64 : i64, bottom_right, causal, deterministic, scale
// SM90: error: fa-map-to-gpu: the backward has a GPU kernel on sm_80 only (mma.sync, which sm_90a runs too: fa-sm80-pipeline chip=sm_90a), not sm_90a
func.func @backward(%q: !t, %k: !t, %v: !t, %o: !t, %lse: memref<?x?x?xf32>,
                    %do: !t, %dq: !t, %dk: !t, %dv: !t) {
  fa.attention_backward %q, %k, %v, %o, %lse, %do outs(%dq, %dk, %dv : !t, !t, !t)
      {causal, bottom_right} : !t, !t, !t, !t, memref<?x?x?xf32>, !t
  return
}

// -----

// An f32 dQ is its own accumulator: the kernel adds into it.
!t = memref<?x?x?x128xbf16>
// CHECK-LABEL: func.func @f32_dq
// CHECK-SAME: %[[DQ:[a-z0-9]+]]: memref<?x?x?x128xf32>
// CHECK: fagpu.attention_backward {{.*}}, %[[DQ]] outs({{.*}}) {block_c = 64 : i64, block_r = 64 : i64, scale = 0.0883883461 : f32, target = #fagpu.target<sm_80>} : memref<?x?x?x128xbf16>
func.func @f32_dq(%q: !t, %k: !t, %v: !t, %o: !t, %lse: memref<?x?x?xf32>,
                  %do: !t, %dq: memref<?x?x?x128xf32>, %dk: !t, %dv: !t) {
  fa.attention_backward %q, %k, %v, %o, %lse, %do
      outs(%dq, %dk, %dv : memref<?x?x?x128xf32>, !t, !t)
      : !t, !t, !t, !t, memref<?x?x?xf32>, !t
  return
}

// -----

// A window (flash-attn's window_size = (96, 31): causal, window 128, the
// diagonal 31 keys right) carries over to the kernel.
!t = memref<?x?x?x64xf16>
// CHECK-LABEL: func.func @window
// CHECK: fagpu.attention_backward {{.*}} {block_c = 64 : i64, block_r = 64 : i64, bottom_right, causal, diagonal_offset = 31 : i64, scale = 1.250000e-01 : f32, target = #fagpu.target<sm_80>, window = 128 : i64}
func.func @window(%q: !t, %k: !t, %v: !t, %o: !t, %lse: memref<?x?x?xf32>,
                  %do: !t, %dq: !t, %dk: !t, %dv: !t) {
  fa.attention_backward %q, %k, %v, %o, %lse, %do outs(%dq, %dk, %dv : !t, !t, !t)
      {causal, bottom_right, window = 128 : i64, diagonal_offset = 31 : i64}
      : !t, !t, !t, !t, memref<?x?x?xf32>, !t
  return
}
