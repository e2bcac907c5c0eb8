// Found by tools/fa-fuzz (2026-11-29, second campaign of the day): the same
// upstream crash as upstream-linalg-transpose-crash.mlir, reached through a
// value that starts like an array attribute. MLIR 22.1.8's custom parser of
// linalg.transpose crashes on any `permutation =` value that is not a `[`
// list (mlir-opt too), even a well-formed `array<i64: 0, 2, 1>`. fa-opt and
// fa-run refuse it (test/Tools/fa-opt-upstream-parser-guard.mlir runs this).
func.func @f(%k: tensor<2x4x64xf32>, %i: tensor<2x64x4xf32>) -> tensor<2x64x4xf32> {
  %t = linalg.transpose ins(%k : tensor<2x4x64xf32>) outs(%i : tensor<2x64x4xf32>) permutation = array<[0, 2, 1]
  return %t : tensor<2x64x4xf32>
}
