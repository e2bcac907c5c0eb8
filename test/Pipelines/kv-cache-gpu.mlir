// A KV cache through the GPU path: the tile level reads a sequence's key
// count from kv_lengths and a K/V block's page from the block table (loads
// marked fa.kv_cache), fa-map-to-gpu carries both operands to
// fagpu.attention, and the sm_90a kernel reads them: the tile's key count
// bounds its K/V loop and its mask, the producer finds each block's page
// in the table and loads it through a rank-4 tensor map over the pages.
// The other targets refuse, saying so.
// RUN: fa-opt %s --pass-pipeline="builtin.module(func.func(fagpu-tile{target=sm_90a},fa-lower-fa2))" | FileCheck %s --check-prefix=TILE
// RUN: fa-opt %s --pass-pipeline="builtin.module(func.func(fagpu-tile{target=sm_90a},fa-lower-fa2),func.func(fa-map-to-gpu{target=sm_90a}))" | FileCheck %s --check-prefix=MAP
// RUN: fa-opt %s --fa-sm90-kernel-pipeline | FileCheck %s --check-prefix=SM90
// RUN: not fa-opt %s --fa-sm80-kernel-pipeline 2>&1 | FileCheck %s --check-prefix=SM80
// RUN: not fa-opt %s --pass-pipeline="builtin.module(func.func(fagpu-tile{target=sm_90a block-c=48}))" 2>&1 | FileCheck %s --check-prefix=DIVIDE

func.func @paged_decode(%q: memref<?x?x1x128xf16>, %k: memref<?x?x256x128xf16>,
                        %v: memref<?x?x256x128xf16>, %o: memref<?x?x1x128xf16>,
                        %lens: memref<?xi32>, %table: memref<?x?xi32>) {
  fa.attention %q, %k, %v kv_lengths(%lens : memref<?xi32>)
      pages(%table : memref<?x?xi32>) outs(%o : memref<?x?x1x128xf16>)
      {causal, bottom_right} : memref<?x?x1x128xf16>, memref<?x?x256x128xf16>, memref<?x?x256x128xf16>
  return
}
// The tile level: the sequence's key count, then each block's page.
// TILE: memref.load %{{.*}} {fa.kv_cache = "kv_lengths"} : memref<?xi32>
// TILE: scf.for
// TILE: memref.load %{{.*}} {fa.kv_cache = "block_table"} : memref<?x?xi32>
// TILE: memref.subview
// fa-map-to-gpu: both operands on the op; the table's B_c = 128 (two
// blocks per page of 256 rows).
// MAP-NOT: fa.kv_cache
// MAP: fagpu.attention %{{.*}}, %{{.*}}, %{{.*}} kv_lengths(%{{.*}} : memref<?xi32>) pages(%{{.*}} : memref<?x?xi32>) outs(
// MAP-SAME: block_c = 128
// The kernel: the lengths and the table as pointers after B, the block's
// page read (invariant) before the K and V boxes whose outer coordinate it
// is; the launch passes the table's row length.
// SM90: gpu.launch_func {{.*}}@fa3_sm90_d128_{{.*}}_kvlens_paged256_bralign{{.*}} args({{.*}}, %{{.*}} : !llvm.ptr<1>, %{{.*}} : !llvm.ptr<1>, %{{.*}} : i32
// SM90: llvm.func @fa3_sm90_d128_{{.*}}_kvlens_paged256_bralign
// SM90: llvm.getelementptr %arg12[
// SM90-NEXT: %[[PAGE:.*]] = llvm.load %{{.*}} invariant {alignment = 4 : i64} : !llvm.ptr<1> -> i32
// SM90: nvvm.cp.async.bulk.tensor.shared.cluster.global %{{.*}}, %arg1, %{{.*}}, box[%{{.*}}, %{{.*}}, %{{.*}}, %[[PAGE]]]
// SM90: nvvm.cp.async.bulk.tensor.shared.cluster.global %{{.*}}, %arg2, %{{.*}}, box[%{{.*}}, %{{.*}}, %{{.*}}, %[[PAGE]]]
// SM80: fagpu-tile: sm_80: per-sequence key lengths and paged K/V have a GPU kernel on sm_90a only (and run on the CPU path)
// DIVIDE: fagpu-tile: block_c=48 and the page size 256 do not divide one another: a K/V block must lie in one page or span whole pages
