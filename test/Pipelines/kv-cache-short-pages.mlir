// Pages shorter than a K/V block (vLLM's 16-token pages): fa-tile keeps the
// table's B_c (64 for split-KV decode at D = 128) as it spans whole pages,
// and the sm_90a producer gathers each block from its B_c / 16 pages: one
// table read per page (a page past the sequence's row is -1, outside the
// map, zero-filled by the TMA), then fagpu.tma_load_pages, whose lowering
// writes one 16-row box per page and column block into the stage's tile
// under one arrival for the whole tile's bytes.
// RUN: fa-opt %s --fa-sm90-kernel-pipeline --mlir-print-ir-after=fagpu-build-kernels -o /dev/null 2>&1 | FileCheck %s --check-prefix=FAGPU
// RUN: fa-opt %s --fa-sm90-kernel-pipeline | FileCheck %s --check-prefix=NVVM

func.func @decode(%q: memref<?x?x1x128xf16>, %k: memref<?x?x16x128xf16>,
                  %v: memref<?x?x16x128xf16>, %o: memref<?x?x1x128xf16>,
                  %lens: memref<?xi32>, %table: memref<?x?xi32>) {
  fa.attention %q, %k, %v kv_lengths(%lens : memref<?xi32>)
      pages(%table : memref<?x?xi32>) outs(%o : memref<?x?x1x128xf16>)
      {kv_splits = 2 : i64} : memref<?x?x1x128xf16>, memref<?x?x16x128xf16>, memref<?x?x16x128xf16>
  return
}
// FAGPU: llvm.func @fa3_sm90_d128_br64_bc64_{{.*}}_splitkv_kvlens_paged16
// FAGPU: fagpu.tma_load %arg0
// FAGPU-COUNT-4: llvm.load %{{.*}} invariant
// FAGPU: fagpu.pipeline_acquire
// FAGPU: fagpu.tma_load_pages %arg1[%{{.*}}, %{{.*}}, pages %{{.*}}, %{{.*}}, %{{.*}}, %{{.*}}] into %{{.*}} buffer 0 {page_rows = 16 : i64}
// FAGPU: fagpu.pipeline_acquire
// FAGPU: fagpu.tma_load_pages %arg2[{{.*}} buffer 1 {page_rows = 16 : i64}
// NVVM: llvm.func @fa3_sm90_d128_br64_bc64_{{.*}}_splitkv_kvlens_paged16
// NVVM: nvvm.mbarrier.arrive.expect_tx %{{.*}}, %c16384_i32
// NVVM-COUNT-8: nvvm.cp.async.bulk.tensor.shared.cluster.global %{{.*}}, %arg1,
