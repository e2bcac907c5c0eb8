// RUN: fa-opt %s --split-input-file --fa-pack-gqa | FileCheck %s

// Grouped-query decode (Hq = 32, Hkv = 8: G = 4), causal bottom-right with
// a right reach: the one query sees every key, so the mask goes, and Q, O
// and the LSE become the [B, Hkv, G, ...] views of the same memory --
// query head 4 h + g is row g of matrix h.
// CHECK-LABEL: func.func @decode
// CHECK-SAME: (%[[Q:.*]]: memref<4x32x1x128xf16>, %[[K:.*]]: memref<4x8x4096x128xf16>, %[[V:.*]]: memref<4x8x4096x128xf16>, %[[O:.*]]: memref<4x32x1x128xf16>, %[[L:.*]]: memref<4x32x1xf32>)
// CHECK: %[[QX:.*]] = memref.expand_shape %[[Q]] {{\[}}[0], [1, 2], [3], [4]] output_shape [4, 8, 4, 1, 128]
// CHECK: %[[QP:.*]] = memref.collapse_shape %[[QX]] {{\[}}[0], [1], [2, 3], [4]] : memref<4x8x4x1x128xf16> into memref<4x8x4x128xf16>
// CHECK: %[[OX:.*]] = memref.expand_shape %[[O]]
// CHECK: %[[OP:.*]] = memref.collapse_shape %[[OX]] {{.*}} into memref<4x8x4x128xf16>
// CHECK: %[[LX:.*]] = memref.expand_shape %[[L]] {{\[}}[0], [1, 2], [3]] output_shape [4, 8, 4, 1]
// CHECK: %[[LP:.*]] = memref.collapse_shape %[[LX]] {{\[}}[0], [1], [2, 3]] : memref<4x8x4x1xf32> into memref<4x8x4xf32>
// CHECK: fa.attention %[[QP]], %[[K]], %[[V]] outs(%[[OP]], %[[LP]] : memref<4x8x4x128xf16>, memref<4x8x4xf32>) {softcap = 3.000000e+01 : f32} :
// CHECK-NOT: causal
// CHECK-NOT: bottom_right
// CHECK-NOT: diagonal_offset
func.func @decode(%q: memref<4x32x1x128xf16>, %k: memref<4x8x4096x128xf16>,
                  %v: memref<4x8x4096x128xf16>, %o: memref<4x32x1x128xf16>,
                  %lse: memref<4x32x1xf32>) {
  fa.attention %q, %k, %v outs(%o, %lse : memref<4x32x1x128xf16>, memref<4x32x1xf32>)
      {causal, bottom_right, diagonal_offset = 2 : i64, softcap = 30.0 : f32}
      : memref<4x32x1x128xf16>, memref<4x8x4096x128xf16>, memref<4x8x4096x128xf16>
  return
}

// -----

// A paged KV cache of dynamic batch and pages, strided Q (flash-attention's
// [B, 1, Hq, D] read as [B, Hq, 1, D]): the views keep the strides; the
// cache operands and the softcap stay.
// CHECK-LABEL: func.func @paged
// CHECK: memref.expand_shape %{{.*}} {{\[}}[0], [1, 2], [3], [4]] output_shape [%{{.*}}, 8, 8, 1, 128] : memref<?x64x1x128xf16, strided<[8192, 128, 8192, 1]>> into memref<?x8x8x1x128xf16, strided<[8192, 1024, 128, 8192, 1]>>
// CHECK: memref.collapse_shape %{{.*}} into memref<?x8x8x128xf16, strided<[8192, 1024, 128, 1]>>
// CHECK: fa.attention {{.*}} kv_lengths(%{{.*}} : memref<?xi32>) pages(%{{.*}} : memref<?x?xi32>) outs({{.*}} : memref<?x8x8x128xf16>) {softcap
func.func @paged(%q: memref<?x64x1x128xf16, strided<[8192, 128, 8192, 1]>>,
                 %k: memref<?x8x64x128xf16>, %v: memref<?x8x64x128xf16>,
                 %o: memref<?x64x1x128xf16>, %lens: memref<?xi32>,
                 %table: memref<?x?xi32>) {
  fa.attention %q, %k, %v kv_lengths(%lens : memref<?xi32>)
      pages(%table : memref<?x?xi32>) outs(%o : memref<?x64x1x128xf16>)
      {causal, bottom_right, softcap = 30.0 : f32}
      : memref<?x64x1x128xf16, strided<[8192, 128, 8192, 1]>>, memref<?x8x64x128xf16>, memref<?x8x64x128xf16>
  return
}

// -----

// Left as they are: a window (its left bound depends on the query), a
// top-left causal mask (the one query sees key 0 alone), two queries,
// multi-head attention, heads known only at run time.
// CHECK-LABEL: func.func @kept
// CHECK-NOT: memref.expand_shape
// CHECK: fa.attention {{.*}} {bottom_right, window = 64 : i64}
// CHECK: fa.attention {{.*}} {causal}
// CHECK: fa.attention {{.*}} : memref<1x32x2x64xf32>
// CHECK: fa.attention {{.*}} : memref<1x8x1x64xf32>
// CHECK: fa.attention {{.*}} : memref<1x?x1x64xf32>
// CHECK-NOT: memref.expand_shape
func.func @kept(%q: memref<1x32x1x64xf32>, %q2: memref<1x32x2x64xf32>,
                %q8: memref<1x8x1x64xf32>, %qd: memref<1x?x1x64xf32>,
                %k: memref<1x8x100x64xf32>, %o: memref<1x32x1x64xf32>,
                %o2: memref<1x32x2x64xf32>, %o8: memref<1x8x1x64xf32>,
                %od: memref<1x?x1x64xf32>) {
  fa.attention %q, %k, %k outs(%o : memref<1x32x1x64xf32>) {bottom_right, window = 64 : i64}
      : memref<1x32x1x64xf32>, memref<1x8x100x64xf32>, memref<1x8x100x64xf32>
  fa.attention %q, %k, %k outs(%o : memref<1x32x1x64xf32>) {causal}
      : memref<1x32x1x64xf32>, memref<1x8x100x64xf32>, memref<1x8x100x64xf32>
  fa.attention %q2, %k, %k outs(%o2 : memref<1x32x2x64xf32>)
      : memref<1x32x2x64xf32>, memref<1x8x100x64xf32>, memref<1x8x100x64xf32>
  fa.attention %q8, %k, %k outs(%o8 : memref<1x8x1x64xf32>)
      : memref<1x8x1x64xf32>, memref<1x8x100x64xf32>, memref<1x8x100x64xf32>
  fa.attention %qd, %k, %k outs(%od : memref<1x?x1x64xf32>)
      : memref<1x?x1x64xf32>, memref<1x8x100x64xf32>, memref<1x8x100x64xf32>
  return
}

// -----

// Sinks are per query head, which the packing would turn into rows: such a
// decode stays unpacked.
// CHECK-LABEL: func.func @sinks
// CHECK-NOT: memref.expand_shape
// CHECK: fa.attention %{{.*}}, %{{.*}}, %{{.*}} sinks(%{{.*}} : memref<32xf32>) outs(%{{.*}} : memref<4x32x1x128xf16>)
func.func @sinks(%q: memref<4x32x1x128xf16>, %kv: memref<4x8x4096x128xf16>, %s: memref<32xf32>, %o: memref<4x32x1x128xf16>) {
  fa.attention %q, %kv, %kv sinks(%s : memref<32xf32>) outs(%o : memref<4x32x1x128xf16>)
      : memref<4x32x1x128xf16>, memref<4x8x4096x128xf16>, memref<4x8x4096x128xf16>
  return
}

// -----

// A score_mod sees the query head, which the packing would turn into a
// row: such a decode stays unpacked.
// CHECK-LABEL: func.func @score_mod
// CHECK-NOT: memref.expand_shape
// CHECK: fa.attention %{{.*}}, %{{.*}}, %{{.*}} outs(%{{.*}} : memref<4x32x1x128xf16>)
func.func @score_mod(%q: memref<4x32x1x128xf16>, %kv: memref<4x8x4096x128xf16>, %o: memref<4x32x1x128xf16>) {
  fa.attention %q, %kv, %kv outs(%o : memref<4x32x1x128xf16>)
      : memref<4x32x1x128xf16>, memref<4x8x4096x128xf16>, memref<4x8x4096x128xf16>
    score_mod {
    ^bb0(%s: f32, %b: index, %h: index, %i: index, %j: index):
      %hi = arith.index_cast %h : index to i64
      %hf = arith.sitofp %hi : i64 to f32
      %r = arith.addf %s, %hf : f32
      fa.yield %r : f32
    }
  return
}
