// RUN: fa-opt %s --split-input-file --fa-tile="sram-budget=9223372036854775807" | FileCheck %s

// A paged cache on the CPU: the FA1 rule's B_c (huge with a huge budget)
// is bounded by a sequence's static capacity, its table row of pages, and
// by 16 pages (the loop order copies a block page by page), then kept a
// multiple of the page size.
// CHECK-LABEL: func.func @one_page
// CHECK: block_c = 32 : i64
func.func @one_page(%q: memref<1x1x7x16xf16>, %kv: memref<4x1x32x16xf16>, %lens: memref<1xi32>, %table: memref<1x1xi32>, %o: memref<1x1x7x16xf16>) {
  fa.attention %q, %kv, %kv kv_lengths(%lens : memref<1xi32>) pages(%table : memref<1x1xi32>) outs(%o : memref<1x1x7x16xf16>)
      : memref<1x1x7x16xf16>, memref<4x1x32x16xf16>, memref<4x1x32x16xf16>
  return
}

// -----

// CHECK-LABEL: func.func @many_pages
// CHECK: block_c = 512 : i64
func.func @many_pages(%q: memref<1x1x7x16xf16>, %kv: memref<4x1x32x16xf16>, %lens: memref<1xi32>, %table: memref<1x?xi32>, %o: memref<1x1x7x16xf16>) {
  fa.attention %q, %kv, %kv kv_lengths(%lens : memref<1xi32>) pages(%table : memref<1x?xi32>) outs(%o : memref<1x1x7x16xf16>)
      : memref<1x1x7x16xf16>, memref<4x1x32x16xf16>, memref<4x1x32x16xf16>
  return
}
