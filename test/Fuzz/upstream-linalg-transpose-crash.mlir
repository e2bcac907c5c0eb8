// Found by tools/fa-fuzz (2026-11-29): Debian's MLIR 22.1.8 segfaults after
// "expected integer value" when linalg.transpose's permutation list does not
// parse; mlir-opt crashes the same way, so it is upstream's bug. fa-opt and
// fa-run refuse such input with a diagnostic (include/fa/Support/
// UpstreamParserGuard.h; test/Tools/fa-opt-upstream-parser-guard.mlir runs
// this file), and the fuzz harness skips it.
func.func @f(%k: tensor<3x40x64xf32>, %i: tensor<3x64x40xf32>) -> tensor<3x64x40xf32> {
  %t = linalg.transpose ins(%k : tensor<3x40x64xf32>) outs(%i : tensor<3x64x40xf32>) permutation = [0, 2, -raise
  return %t : tensor<3x64x40xf32>
}
