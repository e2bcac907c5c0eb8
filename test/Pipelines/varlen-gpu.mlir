// A varlen batch through the sm_90a path: the tile level reads each
// sequence's rows from the prefix sums (loads marked fa.kv_cache),
// fa-map-to-gpu carries them to fagpu.attention, the schedule passes stage
// O in shared memory, store each whole 64-row block by TMA and copy only a
// sequence's last, partial block up to its end (its TMA box would cross
// into the next sequence; a one-tile CTA without room for a staging tile
// stages them in its dead Q buffer and copies them all) and keep the table's
// persistence (persistent CTAs deal only the sequences'
// real tiles; with one tile per CTA a tile past its sequence's end leaves
// at once), and the kernel reads the
// sums per tile: TMA rows from the sequence's first row, batch coordinate
// 0, O and LSE stored up to its last row. The other targets refuse.
// RUN: fa-opt %s --pass-pipeline="builtin.module(func.func(fagpu-tile{target=sm_90a},fa-lower-fa2))" | FileCheck %s --check-prefix=TILE
// RUN: fa-opt %s --pass-pipeline="builtin.module(func.func(fagpu-tile{target=sm_90a},fa-lower-fa2),func.func(fa-map-to-gpu{target=sm_90a}))" | FileCheck %s --check-prefix=MAP
// RUN: fa-opt %s --fa-sm90-kernel-pipeline | FileCheck %s --check-prefix=SM90
// RUN: fa-opt %s --fa-sm90-kernel-pipeline="persistent=off" | FileCheck %s --check-prefix=SINGLE
// RUN: fa-opt %s --fa-sm90-kernel-pipeline="epilogue=direct" | FileCheck %s --check-prefix=DIRECT
// RUN: not fa-opt %s --fa-sm80-kernel-pipeline 2>&1 | FileCheck %s --check-prefix=SM80

func.func @varlen(%q: memref<1x?x?x128xf16>, %k: memref<1x?x?x128xf16>,
                  %v: memref<1x?x?x128xf16>, %o: memref<1x?x?x128xf16>,
                  %lse: memref<1x?x?xf32>, %cuq: memref<?xi32>, %cuk: memref<?xi32>) {
  fa.attention %q, %k, %v varlen(%cuq, %cuk : memref<?xi32>, memref<?xi32>)
      outs(%o, %lse : memref<1x?x?x128xf16>, memref<1x?x?xf32>) {causal, bottom_right}
      : memref<1x?x?x128xf16>, memref<1x?x?x128xf16>, memref<1x?x?x128xf16>
  return
}
// TILE: scf.for
// TILE: memref.load %{{.*}} : memref<?xi32>
// TILE: scf.forall
// TILE-COUNT-2: memref.load %{{.*}} {fa.kv_cache = "cu_seqlens_q"}
// TILE-COUNT-2: memref.load %{{.*}} {fa.kv_cache = "cu_seqlens_k"}
// TILE: scf.if
// MAP: fagpu.attention %{{.*}}, %{{.*}}, %{{.*}} varlen(%{{.*}}, %{{.*}} : memref<?xi32>, memref<?xi32>) outs(
// SINGLE: llvm.func @fa3_sm90_d128_{{.*}}_varlen
// SINGLE-NOT: persistent
// SINGLE-SAME: scheduler = single
// SINGLE-SAME: epilogue = staged_copy_in_q
// SINGLE: nvvm.stmatrix
// SINGLE: llvm.load %{{.*}} {alignment = 16 : i64} : !llvm.ptr<3> -> vector<4xi32>
// SINGLE-NOT: cp.async.bulk.tensor.global.shared
// By default (the table's row for causal D = 128) persistent CTAs, which
// deal real tiles only: the tile count and each tile's
// sequence come from one pass over the B prefix sums (ceil(len / B_r)
// blocks x Hq heads per sequence), so no CTA draws a tile past its
// sequence's end. The count and the producer's search (one thread) loop
// over the sequences.
// O comes as a tensor map (for whole blocks) and as its data and strides
// (o_rows, o_stride_b/h/n: for the copied rows).
// SM90: llvm.func @fa3_sm90_d128_{{.*}}_persistent{{.*}}_varlen
// SM90-SAME: %arg3: !llvm.ptr {{{.*}}nvvm.grid_constant}
// SM90-SAME: %[[B:arg10]]: i32, %arg11: !llvm.ptr<1> {llvm.noalias}, %arg12: i64, %arg13: i64, %arg14: i64
// SM90-SAME: scheduler = dynamic
// SM90-SAME: epilogue = staged_copy
// SM90: scf.for %{{.*}} = %{{.*}} to %[[B]] step %{{.*}} iter_args({{.*}}) -> (i32, i32, i32, i32)
// The producer (one thread) carries a cursor through its tile loop (tile
// id, phase bits, tile count, then the cursor's sequence and the tiles
// before it) and steps it forward to each tile's sequence: its tile ids
// only grow, so it reads each prefix sum once a launch.
// SM90: scf.while (%{{.*}} = %{{.*}}, %{{.*}} = %c0_i32{{[_0-9]*}}, %{{.*}} = %c0_i32{{[_0-9]*}}, %{{.*}} = %c0_i32{{[_0-9]*}}, %{{.*}} = %c0_i32{{[_0-9]*}}) : (i32, i32, i32, i32, i32)
// SM90: ^bb0(%{{.*}}: i32, %{{.*}}: i32, %{{.*}}: i32, %[[SEQ:.*]]: i32, %[[BEFORE:.*]]: i32):
// SM90: scf.while (%{{.*}} = %[[SEQ]], %{{.*}} = %[[BEFORE]], %{{.*}}) : (i32, i32, i32, i32)
// SM90: llvm.load
// SM90: llvm.load
// SM90: arith.divui
// SM90: arith.cmpi uge
// SM90: scf.condition
// SM90: llvm.atomicrmw add
// The consumers find a tile's sequence with the whole warp, 32 sequences a
// pass (ceil(B / 32) passes): lane i's tile count, an inclusive scan over
// the lanes (five shuffles), a ballot of the lane whose range holds the
// tile, and its range start and block count from that lane.
// SM90: %[[SUMB:.*]] = arith.addi %[[B]], %c31_i32
// SM90: %[[PASSES:.*]] = arith.divui %[[SUMB]], %c32_i32
// SM90: scf.for %{{.*}} = %{{.*}} to %[[PASSES]] step %{{.*}} iter_args({{.*}}) -> (i32, i32, i32, i32)
// SM90-COUNT-2: llvm.load
// SM90-COUNT-5: nvvm.shfl.sync  up
// SM90: nvvm.vote.sync  ballot
// SM90-COUNT-3: nvvm.shfl.sync  idx
// The epilogue: a consumer's 64 rows all before the sequence's end leave
// by one TMA store through O's map; otherwise each thread loads 16 B of a
// staged row and stores them to O (the pending tile's and the last tile's
// epilogues: 8 pieces each).
// SM90: nvvm.fence.proxy {kind = #nvvm.proxy_kind<async.shared>
// SM90: arith.cmpi ule
// SM90: nvvm.cp.async.bulk.tensor.global.shared.cta %arg3
// SM90: } else {
// SM90-COUNT-8: llvm.load %{{.*}} {alignment = 16 : i64} : !llvm.ptr<3> -> vector<4xi32>
// SM90: llvm.store %{{.*}}, %{{.*}} {alignment = 16 : i64} : vector<4xi32>, !llvm.ptr<1>
// DIRECT: llvm.func @fa3_sm90_d128_{{.*}}_persistent{{.*}}_stg_varlen
// DIRECT-SAME: epilogue = registers
// DIRECT-NOT: nvvm.stmatrix
// DIRECT-NOT: !llvm.ptr<3> -> vector<4xi32>
// SM80: fagpu-tile: sm_80: varlen batches have a GPU kernel on sm_90a only (and run on the CPU path)
