// Found by tools/fa-fuzz (2026-11-29): Debian's MLIR 22.1.8 segfaults after
// "expected integer value" when linalg.transpose's permutation list does not
// parse; mlir-opt crashes the same way, so it is upstream's bug. Kept here
// (not run: lit excludes test/Fuzz) for whoever upgrades MLIR; the fuzz
// harness skips such inputs (hitsUpstreamLinalgParserCrash).
func.func @f(%k: tensor<3x40x64xf32>, %i: tensor<3x64x40xf32>) -> tensor<3x64x40xf32> {
  %t = linalg.transpose ins(%k : tensor<3x40x64xf32>) outs(%i : tensor<3x64x40xf32>) permutation = [0, 2, -raise
  return %t : tensor<3x64x40xf32>
}
