//===- Modifications.h - score_mod / mask_mod bodies inlined ----*- C++ -*-===//
//
// The host lowering evaluates a score_mod or mask_mod region at each score
// by cloning its body into the loop nest; the backward also needs the
// score_mod's derivative there (the chain rule of fa.chain_score_mod).
//
//===----------------------------------------------------------------------===//

#ifndef FA_LIB_CONVERSION_FATOLOOPS_MODIFICATIONS_H
#define FA_LIB_CONVERSION_FATOLOOPS_MODIFICATIONS_H

#include "mlir/IR/Builders.h"

namespace mlir::fa::loops {

/// The value a score_mod or mask_mod region yields for `leading` (score
/// and/or indices), its ops cloned at `b`; the captures, tensors to the
/// region, are the tile's memrefs: tensor.extract of one becomes a
/// memref.load, tensor.dim a memref.dim (the verifier allows no other use).
Value inlineModification(OpBuilder &b, Region &region, ValueRange leading,
                         ValueRange captures);

/// d score_mod(s, b, h, i, j) / ds at `leading` = (s, b, h, i, j): the
/// body cloned at `b` as inlineModification does, each op on the score's
/// path followed by its tangent (fa::buildTangent's rules; the score's
/// tangent is 1). A body whose value does not depend on the score gives 0.
Value inlineScoreModSlope(OpBuilder &b, Region &scoreMod, ValueRange leading,
                          ValueRange captures);

} // namespace mlir::fa::loops

#endif // FA_LIB_CONVERSION_FATOLOOPS_MODIFICATIONS_H
