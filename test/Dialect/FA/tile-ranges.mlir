// fa-tile's arithmetic at the edges of the valid ranges (issue 16).
// RUN: fa-opt %s --fa-tile="sram-budget=9223372036854775807" | FileCheck %s --check-prefix=HUGE
// RUN: not fa-opt %s --fa-tile="block-r=1048577" 2>&1 | FileCheck %s --check-prefix=BIGR
// RUN: not fa-opt %s --fa-tile="block-c=9223372036854775807" 2>&1 | FileCheck %s --check-prefix=BIGC

// A budget of INT64_MAX bytes: ceil(M / 4 D) overflowed as (M + 4 D - 1) /
// 4 D; now the rule's B_c is capped at the largest tile (2^20 rows) and then
// clamped to the static key length. With a dynamic key length the cap holds.
// HUGE-LABEL: func.func @static_lengths
// HUGE: fa.attention {{.*}}block_c = 300 : i64, block_r = 64 : i64
// HUGE-LABEL: func.func @dynamic_lengths
// HUGE: fa.attention {{.*}}block_c = 1048576 : i64, block_r = 64 : i64

// BIGR: error: fa-tile: expected block-r in [1, 1048576], got 1048577 (rows of an on-chip tile)
// BIGC: error: fa-tile: expected block-c in [1, 1048576], got 9223372036854775807 (rows of an on-chip tile)

func.func @static_lengths(%q: memref<1x1x100x64xf32>, %k: memref<1x1x300x64xf32>,
                          %v: memref<1x1x300x64xf32>, %o: memref<1x1x100x64xf32>) {
  fa.attention %q, %k, %v outs(%o : memref<1x1x100x64xf32>)
      : memref<1x1x100x64xf32>, memref<1x1x300x64xf32>, memref<1x1x300x64xf32>
  return
}

func.func @dynamic_lengths(%q: memref<?x?x?x64xf16>, %k: memref<?x?x?x64xf16>,
                           %v: memref<?x?x?x64xf16>, %o: memref<?x?x?x64xf16>) {
  fa.attention %q, %k, %v outs(%o : memref<?x?x?x64xf16>)
      : memref<?x?x?x64xf16>, memref<?x?x?x64xf16>, memref<?x?x?x64xf16>
  return
}
