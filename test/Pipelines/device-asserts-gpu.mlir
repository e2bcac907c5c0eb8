// The sm_90a kernel checks the inputs that live on the device -- a KV
// cache's lengths and block table, a varlen batch's prefix sums -- itself,
// so that no launcher reads them back to the host (a synchronisation per
// call): fagpu-build-kernels writes cf.assert where a tile reads them, and
// convert-fagpu-to-nvvm lowers each to a trap where the condition fails
// (no __assertfail: its call would make ptxas serialise the kernel's
// wgmmas). Unsigned compares make a negative length or page a
// failure too. The launch passes what the kernel checks against: the
// cache's pages (num_pages, K's outer dimension) and K's packed rows
// (total_k).
// RUN: fa-opt %s --fa-sm90-kernel-pipeline --mlir-print-ir-after=fagpu-build-kernels -o /dev/null 2>&1 | FileCheck %s --check-prefix=BUILD
// RUN: fa-opt %s --fa-sm90-kernel-pipeline | FileCheck %s --check-prefix=NVVM

func.func @paged_decode(%q: memref<?x?x1x128xf16>, %k: memref<?x?x64x128xf16>,
                        %v: memref<?x?x64x128xf16>, %o: memref<?x?x1x128xf16>,
                        %lens: memref<?xi32>, %table: memref<?x?xi32>) {
  fa.attention %q, %k, %v kv_lengths(%lens : memref<?xi32>)
      pages(%table : memref<?x?xi32>) outs(%o : memref<?x?x1x128xf16>)
      : memref<?x?x1x128xf16>, memref<?x?x64x128xf16>, memref<?x?x64x128xf16>
  return
}

func.func @varlen(%q: memref<1x?x?x128xf16>, %k: memref<1x?x?x128xf16>,
                  %v: memref<1x?x?x128xf16>, %o: memref<1x?x?x128xf16>,
                  %cu_q: memref<?xi32>, %cu_k: memref<?xi32>) {
  fa.attention %q, %k, %v varlen(%cu_q, %cu_k : memref<?xi32>, memref<?xi32>)
      outs(%o : memref<1x?x?x128xf16>)
      : memref<1x?x?x128xf16>, memref<1x?x?x128xf16>, memref<1x?x?x128xf16>
  return
}

// The launches (host functions first, then the kernel module): paged,
// ..., kv_lengths, block_table, max_pages (the table's columns) and
// num_pages (K's pages); varlen, ..., cu_seqlens_q, cu_seqlens_k, total_q
// and total_k (K's packed rows).
// BUILD-LABEL: func.func @paged_decode
// BUILD: %[[PAGES:.*]] = memref.dim %arg1, %[[C0:c0[_0-9]*]] : memref<?x?x64x128xf16>
// BUILD: %[[NUMPAGES:.*]] = arith.index_cast %[[PAGES]] : index to i32
// BUILD: gpu.launch_func {{.*}}_kvlens_paged64{{.*}} args({{.*}}, %{{.*}} : !llvm.ptr<1>, %{{.*}} : !llvm.ptr<1>, %{{.*}} : i32, %[[NUMPAGES]] : i32)
// BUILD-LABEL: func.func @varlen
// BUILD: gpu.launch_func {{.*}}_varlen{{.*}} args({{.*}}, %{{.*}} : !llvm.ptr<1>, %{{.*}} : !llvm.ptr<1>, %{{.*}} : i32, %{{.*}} : i32)
// The varlen kernel: every sequence's sums -- q and k from 0 for sequence
// 0, not decreasing, within the packed rows (total_q %arg17, total_k
// %arg18), and no more queries than max_seqlen_q (Nq) -- asserted in the
// pass that counts the tiles, before the roles split (a sequence whose sums
// decrease has no tiles for a per-tile check to see), and not again for
// each tile.
// BUILD: llvm.func @fa3_sm90_d128{{.*}}_varlen
// BUILD: arith.cmpi ule, %{{.*}}, %arg17 : i32
// BUILD: arith.cmpi ule, %{{.*}}, %arg18 : i32
// BUILD: arith.cmpi ule, %{{.*}}, %arg5 : i32
// BUILD: cf.assert %{{.*}}, "flash-mlir: cu_seqlens_q and cu_seqlens_k must start at 0, not decrease and end within the packed rows, and no sequence may have more queries than max_seqlen_q"
// BUILD-NEXT: scf.yield
// BUILD: fagpu.warp_specialize
// BUILD-NOT: cu_seqlens_q and cu_seqlens_k must start at 0
// The paged kernel (pages of 64, blocks of 128): the producer reads the
// block table for its loads and asserts nothing; the consumers assert each tile's
// length against the capacity Nk, then the block-table entries of the keys
// the tile reads against num_pages (unsigned: a negative entry fails), a
// warp's lanes taking every 32nd page.
// BUILD: llvm.func @fa3_sm90_d128{{.*}}_kvlens_paged64{{.*}}(%arg0
// BUILD-SAME: %[[NUMPAGES:arg[0-9]+]]: i32)
// BUILD: fagpu.warp_specialize {{.*}} producer {
// BUILD-NOT: cf.assert
// BUILD: } consumer {
// BUILD: llvm.getelementptr %arg11[
// BUILD-NEXT: %[[LEN:.*]] = llvm.load %{{.*}} invariant {alignment = 4 : i64} : !llvm.ptr<1> -> i32
// BUILD-NEXT: %[[FITS:.*]] = arith.cmpi ule, %[[LEN]], %arg6 : i32
// BUILD-NEXT: cf.assert %[[FITS]], "flash-mlir: kv_lengths (cache_seqlens) must be in [0, capacity]"
// BUILD: scf.for %{{.*}} = %{{.*}} to %{{.*}} step %c32_i32{{.*}} : i32 {
// BUILD: llvm.getelementptr %arg12[
// BUILD-NEXT: %[[PAGE:.*]] = llvm.load %{{.*}} invariant {alignment = 4 : i64} : !llvm.ptr<1> -> i32
// BUILD-NEXT: %[[INCACHE:.*]] = arith.cmpi ult, %[[PAGE]], %[[NUMPAGES]] : i32
// BUILD-NEXT: cf.assert %[[INCACHE]], "flash-mlir: block_table entries a sequence reads must be pages of the cache, in [0, num_pages)"

// After convert-fagpu-to-nvvm no cf.assert is left in the kernels: each is
// an scf.if on the failed condition around a trap, and the kernels make no
// call (ptxas would serialise their wgmmas: C7510).
// NVVM: gpu.module @fa_kernels
// NVVM-NOT: cf.assert
// NVVM-NOT: __assertfail
// NVVM: %[[FAILED:.*]] = arith.xori %{{.*}}, %true{{.*}} : i1
// NVVM-NEXT: scf.if %[[FAILED]] {
// NVVM-NEXT: llvm.intr.trap
// NVVM-NEXT: }
// NVVM-NOT: cf.assert
// NVVM-NOT: llvm.call @__assertfail
