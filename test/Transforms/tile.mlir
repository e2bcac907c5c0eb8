// RUN: fa-opt %s --split-input-file --fa-tile | FileCheck %s --check-prefix=RULE
// RUN: fa-opt %s --split-input-file --fa-tile="sram-budget=49152" | FileCheck %s --check-prefix=SMALL
// RUN: fa-opt %s --split-input-file --fa-tile="block-r=16 block-c=32" | FileCheck %s --check-prefix=EXPLICIT

// f32, D = 64, budget 163840 B: M = 40960 elements, B_c = ceil(M/4d) = 160,
// B_r = min(160, 64) = 64; footprint 4*(64*64 + 2*160*64) + 4*(64*160 +
// 64*64 + 3*64) = 156160 B fits.
// RULE-LABEL: func @f32_d64
// RULE: block_c = 160 : i64, block_r = 64 : i64
// 48 KiB: M = 12288, the rule's B_c = B_r = 48 need 58944 B; B_c halves to 24.
// SMALL-LABEL: func @f32_d64
// SMALL: block_c = 24 : i64, block_r = 48 : i64
// EXPLICIT-LABEL: func @f32_d64
// EXPLICIT: block_c = 32 : i64, block_r = 16 : i64
func.func @f32_d64(%q: memref<1x2x1024x64xf32>, %k: memref<1x2x1024x64xf32>,
                   %v: memref<1x2x1024x64xf32>, %o: memref<1x2x1024x64xf32>) {
  fa.attention %q, %k, %v outs(%o : memref<1x2x1024x64xf32>)
      : memref<1x2x1024x64xf32>, memref<1x2x1024x64xf32>, memref<1x2x1024x64xf32>
  return
}

// -----

// f16, D = 128: M = 81920, the rule gives B_c = 160, B_r = 128, whose
// footprint (263680 B) overflows; B_c is halved to 80, then B_r to 64
// (111360 B).
// RULE-LABEL: func @f16_d128
// RULE: block_c = 80 : i64, block_r = 64 : i64
// SMALL-LABEL: func @f16_d128
// SMALL: block_c = 24 : i64, block_r = 24 : i64
func.func @f16_d128(%q: tensor<2x8x4096x128xf16>, %k: tensor<2x8x4096x128xf16>,
                    %v: tensor<2x8x4096x128xf16>) -> tensor<2x8x4096x128xf16> {
  %o = fa.attention %q, %k, %v : tensor<2x8x4096x128xf16>, tensor<2x8x4096x128xf16>, tensor<2x8x4096x128xf16> -> tensor<2x8x4096x128xf16>
  return %o : tensor<2x8x4096x128xf16>
}

// -----

// Tiles are clamped to static sequence lengths: one query row, 257 keys.
// RULE-LABEL: func @decode
// RULE: block_c = 257 : i64, block_r = 1 : i64
// EXPLICIT-LABEL: func @decode
// EXPLICIT: block_c = 32 : i64, block_r = 1 : i64
func.func @decode(%q: memref<1x1x1x16xf32>, %k: memref<1x1x257x16xf32>,
                  %v: memref<1x1x257x16xf32>, %o: memref<1x1x1x16xf32>) {
  fa.attention %q, %k, %v outs(%o : memref<1x1x1x16xf32>)
      : memref<1x1x1x16xf32>, memref<1x1x257x16xf32>, memref<1x1x257x16xf32>
  return
}

// -----

// The budget comes from the module when the option does not give one:
// 32768 B, f32, D = 64: M = 8192, the rule's B_c = B_r = 32 need 37248 B,
// so B_c is halved to 16.
// RULE-LABEL: func @module_budget
// RULE: block_c = 16 : i64, block_r = 32 : i64
// SMALL-LABEL: func @module_budget
// SMALL: block_c = 24 : i64, block_r = 48 : i64
module attributes {fa.sram_budget = 32768 : i64} {
  func.func @module_budget(%q: memref<1x1x512x64xf32>, %k: memref<1x1x512x64xf32>,
                           %v: memref<1x1x512x64xf32>, %o: memref<1x1x512x64xf32>) {
    fa.attention %q, %k, %v outs(%o : memref<1x1x512x64xf32>)
        : memref<1x1x512x64xf32>, memref<1x1x512x64xf32>, memref<1x1x512x64xf32>
    return
  }
}
