//===- ScoreModDerivative.h - d score_mod / d score ---------------*- C++
//-*-===//
//
// The backward's chain rule through a score_mod region (FlexAttention's
// score_mod): the derivative of the region's value with respect to its
// score argument, by forward-mode differentiation of its body. Each op on
// the score's path carries a tangent, dy = y'(a) da, built from its
// operands' tangents by the op's rule; values the score does not reach (the
// indices, the captures, constants) have none (zero).
//
// Rules:
//   addf, subf, negf, mulf, divf, math.fma            sums and products
//   maximumf, maxnumf, minimumf, minnumf, select       the chosen operand's
//   extf, truncf                                        the converted tangent
//   math.tanh  (1 - y^2) da    math.exp   y da         math.exp2  ln2 y da
//   math.log   da / a          math.log2  da / (ln2 a) math.sqrt  da / 2y
//   math.rsqrt -y^3 da / 2     math.absf  sign(a) da   math.sin   cos(a) da
//   math.cos   -sin(a) da
//   math.floor, ceil, round, roundeven, trunc           0 (almost everywhere)
// An op whose results are not floats (a compare, an integer conversion)
// ends the score's path: its results carry no tangent.
//
//===----------------------------------------------------------------------===//

#ifndef FA_DIALECT_FA_IR_SCOREMODDERIVATIVE_H
#define FA_DIALECT_FA_IR_SCOREMODDERIVATIVE_H

#include "mlir/IR/Builders.h"
#include "mlir/IR/Region.h"

namespace mlir::fa {

/// The first op of `scoreMod`'s body on the score's path (a float result
/// computed from the score argument, its first block argument) that has no
/// derivative rule; null when every such op has one.
Operation *findUndifferentiable(Region &scoreMod);

/// The names of the ops with a derivative rule, for diagnostics.
StringRef differentiableOpNames();

/// The tangent of `cloned`'s float result: `cloned` is an op of a score_mod
/// body already cloned at `b` (its operands mapped), `tangents[i]` the
/// tangent of its operand i (null: the score does not reach it). Returns
/// null where no operand has a tangent or the result is not a float. The op
/// must have a rule (findUndifferentiable is null for its region).
Value buildTangent(OpBuilder &b, Operation *cloned, ArrayRef<Value> tangents);

} // namespace mlir::fa

#endif // FA_DIALECT_FA_IR_SCOREMODDERIVATIVE_H
