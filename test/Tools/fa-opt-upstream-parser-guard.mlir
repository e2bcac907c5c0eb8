// MLIR 22.1.8's linalg parser crashes when the integer list after
// `permutation =` does not parse (an upstream bug fa-fuzz found; the crashing
// input is test/Fuzz/upstream-linalg-transpose-crash.mlir). fa-opt refuses
// such input with a diagnostic and exit code 1 instead of crashing; a
// well-formed list, the generic `array<i64: ...>` form and comments are
// unaffected.
// RUN: not fa-opt %fa_src_root/test/Fuzz/upstream-linalg-transpose-crash.mlir 2>&1 | FileCheck %s --check-prefix=BAD
// RUN: fa-opt %s | FileCheck %s
// BAD: upstream-linalg-transpose-crash.mlir:{{[0-9]+}}: error: malformed integer list after 'permutation =' (expected [i, j, ...]); refused because MLIR 22.1.8's linalg parser crashes on it
// BAD-NOT: Stack dump
// The second reproducer fa-fuzz found: a value starting like an array.
// RUN: not fa-opt %fa_src_root/test/Fuzz/upstream-linalg-transpose-crash-array.mlir 2>&1 | FileCheck %s --check-prefix=BAD2
// BAD2: upstream-linalg-transpose-crash-array.mlir:{{[0-9]+}}: error: malformed integer list after 'permutation ='
// BAD2-NOT: Stack dump

// CHECK-LABEL: func.func @fine
// CHECK: linalg.transpose
// CHECK-SAME: permutation = [0, 2, 1]
// CHECK: linalg.broadcast
// CHECK-SAME: dimensions = [2]
func.func @fine(%k: tensor<3x40x64xf32>, %i: tensor<3x64x40xf32>, %b: tensor<3x40x2x64xf32>) -> (tensor<3x64x40xf32>, tensor<3x40x2x64xf32>) {
  // a comment that mentions permutation = anything is fine
  %t = linalg.transpose ins(%k : tensor<3x40x64xf32>) outs(%i : tensor<3x64x40xf32>) permutation = [0, 2, 1]
  %r = "linalg.broadcast"(%k, %b) <{dimensions = array<i64: 2>}> ({
  ^bb0(%in: f32, %out: f32):
    linalg.yield %in : f32
  }) : (tensor<3x40x64xf32>, tensor<3x40x2x64xf32>) -> tensor<3x40x2x64xf32>
  return %t, %r : tensor<3x64x40xf32>, tensor<3x40x2x64xf32>
}

// fa-run reads user files too, with the same guard.
// RUN: not fa-run %fa_src_root/test/Fuzz/upstream-linalg-transpose-crash.mlir 2>&1 | FileCheck %s --check-prefix=RUNBAD
// RUNBAD: fa-run: error: malformed integer list after 'permutation =' or 'dimensions =': refused because MLIR 22.1.8's linalg parser crashes on it

// No false positives: names, aliases, strings that merely contain the
// keywords, and a list broken over lines.
// RUN: fa-opt %s --split-input-file | FileCheck %s --check-prefix=NAMES
// NAMES-LABEL: func.func @names
// NAMES-SAME: note = "dimensions = x"
// NAMES: tensor.dim
// NAMES-LABEL: func.func @split_list
// NAMES: permutation = [1, 0]

// -----

#permutation = affine_map<(d0, d1) -> (d1, d0)>
func.func @names(%t: tensor<?x4xf32>) -> index attributes {note = "dimensions = x"} {
  %c0 = arith.constant 0 : index
  %dimensions = tensor.dim %t, %c0 : tensor<?x4xf32>
  return %dimensions : index
}

// -----

func.func @split_list(%k: tensor<4x8xf32>, %i: tensor<8x4xf32>) -> tensor<8x4xf32> {
  %t = linalg.transpose ins(%k : tensor<4x8xf32>) outs(%i : tensor<8x4xf32>) permutation = [1,
      0]
  return %t : tensor<8x4xf32>
}
