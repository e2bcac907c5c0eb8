// RUN: fa-opt %s --split-input-file --pass-pipeline="builtin.module(func.func(fa-ring-attention{world=3 rank=1}))" | FileCheck %s
// RUN: fa-opt %s --split-input-file --pass-pipeline="builtin.module(func.func(fa-ring-attention{world=3 rank=2 layout=contiguous}))" | FileCheck %s --check-prefix=CONTIG
// RUN: fa-opt %s --split-input-file --pass-pipeline="builtin.module(func.func(fa-ring-attention{world=2}))" | FileCheck %s --check-prefix=ALL

// Ring attention (context parallelism) as IR: rank 1 of 3, zig-zag sharding
// of N = 96 into 6 chunks of 16 rows: rank 1 holds chunks 1 and 4 of Q, K,
// V. At step s it holds the K/V of rank (1 - s) mod 3 = 1, 0, 2, i.e. key
// chunks {1, 4}, {0, 5}, {2, 3}. Causal: a key chunk before the query chunk
// is whole, the same chunk is its top-left causal diagonal, a later one is
// fully masked and never written. Each step costs two chunk pairs' worth
// (a diagonal is half a pair): step 0 two diagonals and one whole pair,
// steps 1 and 2 two whole pairs each -- the zig-zag load balance.
// CHECK-LABEL: func.func @causal
// Query chunk 1 (rows 16..31): its diagonal, then key chunk 0; chunks 4, 5,
// 2, 3 come after it.
// CHECK: %[[Q1:.*]] = memref.subview %arg0[0, 0, 16, 0] [2, 4, 16, 32] [1, 1, 1, 1]
// CHECK: %[[K1:.*]] = memref.subview %arg1[0, 0, 16, 0] [2, 2, 16, 32] [1, 1, 1, 1]
// CHECK: fa.attention %[[Q1]], %[[K1]], %{{.*}} outs({{.*}}) {causal, fa.ring_step = {key_chunk = 1 : i64, query_chunk = 1 : i64, rank = 1 : i64, source = 1 : i64, step = 0 : i64}, scale = 0.176776{{.*}} : f32}
// The partial O is rounded to f16 as a kernel writes it, then widened.
// CHECK: linalg.generic
// CHECK: arith.extf %{{.*}} : f16 to f32
// CHECK: fa.attention {{.*}} {fa.ring_step = {key_chunk = 0 : i64, query_chunk = 1 : i64, rank = 1 : i64, source = 0 : i64, step = 1 : i64}, scale
// CHECK-NOT: fa.attention
// CHECK: fa.merge_partials %{{.*}}, %{{.*}} -> %{{.*}}, %{{.*}} : memref<2x128x32xf32>, memref<2x128xf32> -> memref<128x32xf16>, memref<128xf32>
// CHECK: linalg.copy ins(%{{.*}} : memref<2x4x16x32xf16>) outs(%{{.*}} : memref<2x4x16x32xf16, strided<[12288, 3072, 32, 1], offset: 512>>)
// CHECK: linalg.copy ins(%{{.*}} : memref<2x4x16xf32>) outs(%{{.*}} : memref<2x4x16xf32, strided<[384, 96, 1], offset: 16>>)
// Query chunk 4 (rows 64..79): five pieces in step order.
// CHECK: memref.subview %arg0[0, 0, 64, 0] [2, 4, 16, 32]
// CHECK: fa.attention {{.*}} {fa.ring_step = {key_chunk = 1 : i64, query_chunk = 4 : i64, rank = 1 : i64, source = 1 : i64, step = 0 : i64}
// CHECK: fa.attention {{.*}} {causal, fa.ring_step = {key_chunk = 4 : i64, query_chunk = 4 : i64, rank = 1 : i64, source = 1 : i64, step = 0 : i64}
// CHECK: fa.attention {{.*}} {fa.ring_step = {key_chunk = 0 : i64, query_chunk = 4 : i64, rank = 1 : i64, source = 0 : i64, step = 1 : i64}
// CHECK: fa.attention {{.*}} {fa.ring_step = {key_chunk = 2 : i64, query_chunk = 4 : i64, rank = 1 : i64, source = 2 : i64, step = 2 : i64}
// CHECK: fa.attention {{.*}} {fa.ring_step = {key_chunk = 3 : i64, query_chunk = 4 : i64, rank = 1 : i64, source = 2 : i64, step = 2 : i64}
// CHECK-NOT: fa.attention
// CHECK: fa.merge_partials {{.*}} : memref<5x128x32xf32>, memref<5x128xf32> -> memref<128x32xf16>, memref<128xf32>
// CHECK-NOT: fa.attention

// Contiguous sharding, rank 2 of 3 (chunk 2 of 3, 32 rows): it works at
// every step (keys of ranks 2, 1, 0 all come before or on its rows); rank
// 0 would work at step 0 only -- why zig-zag balances causal work.
// CONTIG-LABEL: func.func @causal
// CONTIG: memref.subview %arg0[0, 0, 64, 0] [2, 4, 32, 32]
// CONTIG: fa.attention {{.*}} {causal, fa.ring_step = {key_chunk = 2 : i64, query_chunk = 2 : i64, rank = 2 : i64, source = 2 : i64, step = 0 : i64}
// CONTIG: fa.attention {{.*}} {fa.ring_step = {key_chunk = 1 : i64, query_chunk = 2 : i64, rank = 2 : i64, source = 1 : i64, step = 1 : i64}
// CONTIG: fa.attention {{.*}} {fa.ring_step = {key_chunk = 0 : i64, query_chunk = 2 : i64, rank = 2 : i64, source = 0 : i64, step = 2 : i64}
// CONTIG: fa.merge_partials {{.*}} : memref<3x256x32xf32>

// Every rank's work (rank = -1): 2 ranks x 2 query chunks, the whole
// attention; no fa.attention of the original left.
// ALL-LABEL: func.func @causal
// ALL-COUNT-4: fa.merge_partials
// ALL-NOT: fa.attention {causal} :
func.func @causal(%q: memref<2x4x96x32xf16>, %k: memref<2x2x96x32xf16>, %v: memref<2x2x96x32xf16>, %o: memref<2x4x96x32xf16>, %l: memref<2x4x96xf32>) {
  fa.attention %q, %k, %v outs(%o, %l : memref<2x4x96x32xf16>, memref<2x4x96xf32>) {causal} : memref<2x4x96x32xf16>, memref<2x2x96x32xf16>, memref<2x2x96x32xf16>
  return
}

// -----

// Without a mask every pair is whole: 3 steps x 2 key chunks per query
// chunk; f32 O needs no widening (the partials are written in place).
// CHECK-LABEL: func.func @full
// CHECK-COUNT-6: fa.attention {{.*}} {fa.ring_step = {{.*}}query_chunk = 1 : i64
// CHECK-NOT: linalg.generic
// CHECK: fa.merge_partials {{.*}} : memref<6x16x8xf32>, memref<6x16xf32> -> memref<16x8xf32>
// CHECK-COUNT-6: fa.attention {{.*}} {fa.ring_step = {{.*}}query_chunk = 4 : i64
func.func @full(%q: memref<1x2x48x8xf32>, %o: memref<1x2x48x8xf32>) {
  fa.attention %q, %q, %q outs(%o : memref<1x2x48x8xf32>) {softcap = 5.0 : f32} : memref<1x2x48x8xf32>, memref<1x2x48x8xf32>, memref<1x2x48x8xf32>
  return
}
