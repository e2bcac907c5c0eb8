// RUN: fa-opt %s --split-input-file --fa-tile="block-r=128 block-c=128" --verify-diagnostics
// RUN: not fa-opt %s --split-input-file --fa-tile="block-r=-1" 2>&1 | FileCheck %s --check-prefix=NEG
// RUN: not fa-opt %s --split-input-file --fa-tile="sram-budget=1024" 2>&1 | FileCheck %s --check-prefix=TINY
// RUN: not fa-opt %s --fa-tile="block-r=abc" 2>&1 | FileCheck %s --check-prefix=PARSE

// NEG: fa-tile: block-r, block-c and sram-budget must be non-negative, got block-r=-1 block-c=0 sram-budget=0
// TINY: error: 'fa.attention' op no tile fits the SRAM budget of 1024 bytes for D=128, Dv=128
// PARSE: 'abc' value invalid for long argument

func.func @too_big(%q: memref<1x1x512x128xf32>, %k: memref<1x1x512x128xf32>,
                   %v: memref<1x1x512x128xf32>, %o: memref<1x1x512x128xf32>) {
  // expected-error @+1 {{tiles block_r=128 block_c=128 need 329216 bytes on chip (D=128, Dv=128, 4-byte inputs) but the SRAM budget is 163840 bytes}}
  fa.attention %q, %k, %v outs(%o : memref<1x1x512x128xf32>)
      : memref<1x1x512x128xf32>, memref<1x1x512x128xf32>, memref<1x1x512x128xf32>
  return
}
