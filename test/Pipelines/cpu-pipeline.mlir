// RUN: fa-opt %s --fa-cpu-pipeline | FileCheck %s
// RUN: fa-opt %s --fa-cpu-pipeline="loop-order=fa1 block-r=16 block-c=16" | FileCheck %s
// RUN: not fa-opt %s --fa-cpu-pipeline="loop-order=fa3" 2>&1 | FileCheck %s --check-prefix=BAD

// The CPU pipeline takes tensor-form attention all the way to the LLVM
// dialect: nothing of fa, scf, memref or linalg is left.
// CHECK-NOT: fa.
// CHECK-LABEL: llvm.func @attention
// CHECK: llvm.call @malloc
// CHECK: llvm.intr.exp2
// CHECK-NOT: {{(scf|memref|linalg|fa)\.}}
// BAD: for the --loop-order option: Cannot find option named 'fa3'!
func.func @attention(%q: tensor<1x2x40x32xf32>, %k: tensor<1x1x50x32xf32>,
                     %v: tensor<1x1x50x32xf32>) -> tensor<1x2x40x32xf32> {
  %o = fa.attention %q, %k, %v {causal}
      : tensor<1x2x40x32xf32>, tensor<1x1x50x32xf32>, tensor<1x1x50x32xf32> -> tensor<1x2x40x32xf32>
  return %o : tensor<1x2x40x32xf32>
}
