// RUN: fa-opt %s --split-input-file --verify-diagnostics

!q = memref<?x?x?x64xf16>
!r = memref<?x?x?xf32>

func.func @mixed_types(%q: !q, %k: memref<?x?x?x64xbf16>, %lse: !r,
                       %dq: memref<?x?x?x64xf32>) {
  // expected-error @+1 {{Q, K, V, dO, dK and dV must be of one element type, got 'bf16' beside 'f16'}}
  fagpu.attention_backward %q, %k, %q, %lse, %q, %lse, %dq outs(%q, %q)
      {target = #fagpu.target<sm_80>, scale = 0.125 : f32,
       block_r = 64 : i64, block_c = 64 : i64}
    : !q, memref<?x?x?x64xbf16>, !q, !r, !q, !r, memref<?x?x?x64xf32>, !q, !q
  return
}

// -----

!q = memref<?x?x?x64xf16>
!r = memref<?x?x?xf32>

func.func @value_head_dim(%q: !q, %v: memref<?x?x?x128xf16>, %lse: !r,
                          %dq: memref<?x?x?x64xf32>) {
  // expected-error @+1 {{every tensor must have Q's head dim 64 (the backward kernel takes D = Dv)}}
  fagpu.attention_backward %q, %q, %v, %lse, %q, %lse, %dq outs(%q, %q)
      {target = #fagpu.target<sm_80>, scale = 0.125 : f32,
       block_r = 64 : i64, block_c = 64 : i64}
    : !q, !q, memref<?x?x?x128xf16>, !r, !q, !r, memref<?x?x?x64xf32>, !q, !q
  return
}

// -----

!q = memref<?x?x?x64xf16>
!r = memref<?x?x?xf32>

func.func @bottom_right_alone(%q: !q, %lse: !r, %dq: memref<?x?x?x64xf32>) {
  // expected-error @+1 {{bottom_right aligns the causal or window mask: give causal or a window}}
  fagpu.attention_backward %q, %q, %q, %lse, %q, %lse, %dq outs(%q, %q)
      {target = #fagpu.target<sm_80>, scale = 0.125 : f32, bottom_right,
       block_r = 64 : i64, block_c = 64 : i64}
    : !q, !q, !q, !r, !q, !r, memref<?x?x?x64xf32>, !q, !q
  return
}

// -----

!q = memref<?x?x?x64xf16>
!r = memref<?x?x?xf32>

func.func @offset_alone(%q: !q, %lse: !r, %dq: memref<?x?x?x64xf32>) {
  // expected-error @+1 {{diagonal_offset moves the causal or window mask: give causal or a window}}
  fagpu.attention_backward %q, %q, %q, %lse, %q, %lse, %dq outs(%q, %q)
      {target = #fagpu.target<sm_80>, scale = 0.125 : f32,
       diagonal_offset = 3 : i64, block_r = 64 : i64, block_c = 64 : i64}
    : !q, !q, !q, !r, !q, !r, memref<?x?x?x64xf32>, !q, !q
  return
}

// -----

!q = memref<?x?x?x64xf16>
!r = memref<?x?x?xf32>

// The kernel's positions are 32-bit: a window past 2^30 is refused.
func.func @window_range(%q: !q, %lse: !r, %dq: memref<?x?x?x64xf32>) {
  // expected-error @+1 {{expected window to be at most 1073741824 (2^30)}}
  fagpu.attention_backward %q, %q, %q, %lse, %q, %lse, %dq outs(%q, %q)
      {target = #fagpu.target<sm_80>, scale = 0.125 : f32, causal,
       window = 2000000000 : i64, block_r = 64 : i64, block_c = 64 : i64}
    : !q, !q, !q, !r, !q, !r, memref<?x?x?x64xf32>, !q, !q
  return
}

// -----

!q = memref<?x?x?x64xf16>
!r = memref<?x?x?xf32>

func.func @window_zero(%q: !q, %lse: !r, %dq: memref<?x?x?x64xf32>) {
  // expected-error @+1 {{expected window}}
  fagpu.attention_backward %q, %q, %q, %lse, %q, %lse, %dq outs(%q, %q)
      {target = #fagpu.target<sm_80>, scale = 0.125 : f32,
       window = 0 : i64, block_r = 64 : i64, block_c = 64 : i64}
    : !q, !q, !q, !r, !q, !r, memref<?x?x?x64xf32>, !q, !q
  return
}

// -----

!q = memref<?x?x?x64xf16>
!r = memref<?x?x?xf32>

func.func @tiles(%q: !q, %lse: !r, %dq: memref<?x?x?x64xf32>) {
  // expected-error @+1 {{the backward kernel's tiles are 64 x 64, got block_r = 128, block_c = 64}}
  fagpu.attention_backward %q, %q, %q, %lse, %q, %lse, %dq outs(%q, %q)
      {target = #fagpu.target<sm_80>, scale = 0.125 : f32,
       block_r = 128 : i64, block_c = 64 : i64}
    : !q, !q, !q, !r, !q, !r, memref<?x?x?x64xf32>, !q, !q
  return
}

// -----

!q = memref<?x?x?x64xf16>
!r = memref<?x?x?xf32>

func.func @scale(%q: !q, %lse: !r, %dq: memref<?x?x?x64xf32>) {
  // expected-error @+1 {{scale must be positive and finite}}
  fagpu.attention_backward %q, %q, %q, %lse, %q, %lse, %dq outs(%q, %q)
      {target = #fagpu.target<sm_80>, scale = 0.0 : f32,
       block_r = 64 : i64, block_c = 64 : i64}
    : !q, !q, !q, !r, !q, !r, memref<?x?x?x64xf32>, !q, !q
  return
}

// -----

func.func @probs_rows(%s: !fagpu.fragment<64x8xf32, accumulator>, %p: !llvm.ptr<1>, %i: i32, %f: f32) {
  // expected-error @+1 {{expected S^T as an f32 accumulator of 64-row tiles and 16-column steps}}
  %0 = fagpu.backward_probs %s lse %p queries(%i, %i) keys(%i, %i) scale_log2 %f
      : !llvm.ptr<1> : !fagpu.fragment<64x8xf32, accumulator>
  return
}

// -----

func.func @grad_scores_layout(%s: !fagpu.fragment<64x64xf16, operand_a>, %p: !llvm.ptr<1>, %i: i32) {
  // expected-error @+1 {{expected P^T and dP^T as f32 accumulators}}
  %0 = fagpu.backward_grad_scores %s, %s row_dots %p queries(%i, %i)
      : !llvm.ptr<1> : !fagpu.fragment<64x64xf16, operand_a>
  return
}

// -----

func.func @operand_shape(%s: !fagpu.fragment<64x64xf32, accumulator>) {
  // expected-error @+1 {{result must be an f16 or bf16 operand_a fragment of the accumulator's shape}}
  %0 = fagpu.to_operand_a %s : !fagpu.fragment<64x64xf32, accumulator> -> !fagpu.fragment<64x32xf16, operand_a>
  return
}

// -----

func.func @transpose_shape(%s: !fagpu.fragment<64x128xf32, accumulator>) {
  %t = fagpu.shared_tile offset 0 : !fagpu.smem_tile<64x128xf16, row_major>
  // expected-error @+1 {{the tile must be the fragment's transpose (128 x 64)}}
  fagpu.store_transposed %s, %t : !fagpu.fragment<64x128xf32, accumulator>, !fagpu.smem_tile<64x128xf16, row_major>
  return
}

// -----

func.func @atomic_layout(%s: !fagpu.fragment<64xf32, rows>, %p: !llvm.ptr<1>, %i: i32, %f: f32) {
  // expected-error @+1 {{expected an f32 accumulator of 64-row tiles and 16-column steps}}
  fagpu.atomic_add_rows %s rows(%i, %i) to %p scale %f : !llvm.ptr<1> : !fagpu.fragment<64xf32, rows>
  return
}
