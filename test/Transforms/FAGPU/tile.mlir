// RUN: fa-opt %s --split-input-file --fagpu-tile=target=sm_90a | FileCheck %s --check-prefix=H
// RUN: fa-opt %s --split-input-file --fagpu-tile=target=sm_80 | FileCheck %s --check-prefix=A
// RUN: fa-opt %s --split-input-file --fagpu-tile="target=sm_90a block-r=64 block-c=64" | FileCheck %s --check-prefix=OPT
// RUN: not fa-opt %s --fagpu-tile=target=sm_70 2>&1 | FileCheck %s --check-prefix=BAD
// RUN: not fa-opt %s --fagpu-tile="target=sm_90a block-c=2000000" 2>&1 | FileCheck %s --check-prefix=BIG

// fagpu-tile sets each attention's tiles to its target kernel's: the
// heuristics table's row for the head dim and mask, the options where the
// op has none, and the op's own where it has them.
// BAD: fagpu-tile: target must be sm_80, sm_90a or sm_100a, got 'sm_70'
// BIG: fagpu-tile: expected block-c in [1, 1048576], got 2000000

// D 128: sm_90a's row is B_r 128, B_c 128; sm_80's 128 and 64.
// H-LABEL: func.func @d128
// H: block_c = 128 : i64, block_r = 128 : i64
// A-LABEL: func.func @d128
// A: block_c = 64 : i64, block_r = 128 : i64
// OPT-LABEL: func.func @d128
// OPT: block_c = 64 : i64, block_r = 64 : i64
func.func @d128(%q: memref<2x8x256x128xf16>, %o: memref<2x8x256x128xf16>) {
  fa.attention %q, %q, %q outs(%o : memref<2x8x256x128xf16>) : memref<2x8x256x128xf16>, memref<2x8x256x128xf16>, memref<2x8x256x128xf16>
  return
}

// -----

// D 64 non-causal: three consumers (B_r 192) on sm_90a.
// H-LABEL: func.func @d64
// H: block_c = 128 : i64, block_r = 192 : i64
func.func @d64(%q: memref<2x8x256x64xf16>, %o: memref<2x8x256x64xf16>) {
  fa.attention %q, %q, %q outs(%o : memref<2x8x256x64xf16>) : memref<2x8x256x64xf16>, memref<2x8x256x64xf16>, memref<2x8x256x64xf16>
  return
}

// -----

// Tiles already on the op are kept, whatever the options say.
// H-LABEL: func.func @given
// H: block_c = 32 : i64, block_r = 64 : i64
// OPT-LABEL: func.func @given
// OPT: block_c = 32 : i64, block_r = 64 : i64
func.func @given(%q: memref<2x8x256x128xf16>, %o: memref<2x8x256x128xf16>) {
  fa.attention %q, %q, %q outs(%o : memref<2x8x256x128xf16>) {block_r = 64 : i64, block_c = 32 : i64} : memref<2x8x256x128xf16>, memref<2x8x256x128xf16>, memref<2x8x256x128xf16>
  return
}
