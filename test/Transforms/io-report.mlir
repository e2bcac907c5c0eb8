// RUN: fa-opt %s --split-input-file --fa-tile="block-r=64 block-c=128 sram-budget=262144" --fa-io-report -o /dev/null | FileCheck %s
// RUN: fa-opt %s --split-input-file --fa-tile="block-r=32 block-c=32 sram-budget=262144" --fa-io-report -o /dev/null | FileCheck %s
// RUN: fa-opt %s --split-input-file --fa-tile="block-r=128 block-c=64 sram-budget=262144" --fa-io-report -o /dev/null | FileCheck %s

// For several sizes and tilings, the HBM traffic predicted by the FA1 and
// FA2 models equals the traffic counted from the loops that fa-lower-fa1
// and fa-lower-fa2 generate; the report does not change the IR.

// CHECK-LABEL: fa-io-report:
// CHECK: shape: B=2 Hq=4 Hkv=2 Nq=256 Nk=512 D=64 Dv=64
// CHECK: standard predicted: [[STD:[0-9]+]]
// CHECK: fa1 predicted: [[FA1:[0-9]+]]
// CHECK: fa2 predicted: [[FA2:[0-9]+]]
// CHECK: fa1 counted: [[FA1]]
// CHECK-NEXT: fa1 match: yes
// CHECK: fa2 counted: [[FA2]]
// CHECK-NEXT: fa2 match: yes
func.func @gqa(%q: memref<2x4x256x64xf16>, %k: memref<2x2x512x64xf16>, %v: memref<2x2x512x64xf16>,
               %o: memref<2x4x256x64xf16>, %l: memref<2x4x256xf32>) {
  fa.attention %q, %k, %v outs(%o, %l : memref<2x4x256x64xf16>, memref<2x4x256xf32>)
      : memref<2x4x256x64xf16>, memref<2x2x512x64xf16>, memref<2x2x512x64xf16>
  return
}

// -----

// CHECK-LABEL: fa-io-report:
// CHECK: shape: B=1 Hq=2 Hkv=2 Nq=1024 Nk=1024 D=128 Dv=128
// CHECK: fa1 predicted: [[FA1:[0-9]+]]
// CHECK: fa2 predicted: [[FA2:[0-9]+]]
// CHECK: fa1 counted: [[FA1]]
// CHECK-NEXT: fa1 match: yes
// CHECK: fa2 counted: [[FA2]]
// CHECK-NEXT: fa2 match: yes
func.func @square(%q: tensor<1x2x1024x128xf32>, %k: tensor<1x2x1024x128xf32>,
                  %v: tensor<1x2x1024x128xf32>) -> tensor<1x2x1024x128xf32> {
  %o = fa.attention %q, %k, %v : tensor<1x2x1024x128xf32>, tensor<1x2x1024x128xf32>, tensor<1x2x1024x128xf32> -> tensor<1x2x1024x128xf32>
  return %o : tensor<1x2x1024x128xf32>
}

// -----

// Dv != D, no LSE.
// CHECK-LABEL: fa-io-report:
// CHECK: shape: B=3 Hq=1 Hkv=1 Nq=128 Nk=2048 D=64 Dv=32
// CHECK: fa1 predicted: [[FA1:[0-9]+]]
// CHECK: fa2 predicted: [[FA2:[0-9]+]]
// CHECK: fa1 counted: [[FA1]]
// CHECK-NEXT: fa1 match: yes
// CHECK: fa2 counted: [[FA2]]
// CHECK-NEXT: fa2 match: yes
func.func @long_keys(%q: memref<3x1x128x64xbf16>, %k: memref<3x1x2048x64xbf16>, %v: memref<3x1x2048x32xbf16>,
                     %o: memref<3x1x128x32xbf16>) {
  fa.attention %q, %k, %v outs(%o : memref<3x1x128x32xbf16>)
      : memref<3x1x128x64xbf16>, memref<3x1x2048x64xbf16>, memref<3x1x2048x32xbf16>
  return
}
