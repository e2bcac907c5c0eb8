//===- RaiseHelpers.cpp - small helpers of fa-raise-attention -------------===//
//
// The small helpers the fa-raise-attention files share: a value's rank, a
// generic's yielded value, scalar constants, zero accumulators, and which
// linalg.generics are elementwise ops or materialised broadcasts.
//
//===----------------------------------------------------------------------===//

#include "RaiseAttention.h"

#include "mlir/IR/Matchers.h"

namespace mlir::fa::raise {

int64_t rankOf(Value v) { return cast<ShapedType>(v.getType()).getRank(); }

/// What a generic's body yields (its first yielded value).
Value yielded(linalg::GenericOp g) {
  return cast<linalg::YieldOp>(g.getRegion().front().getTerminator())
      .getOperand(0);
}

/// A scalar constant, possibly converted (torch-mlir materialises an f64
/// scalar and truncates it to the element type inside the body). The value
/// is the source constant's: the scale the front end meant.
std::optional<double> scalarConstant(Value v) {
  while (Operation *def = v.getDefiningOp()) {
    if (!isa<arith::TruncFOp, arith::ExtFOp>(def))
      break;
    v = def->getOperand(0);
  }
  FloatAttr attr;
  if (matchPattern(v, m_Constant(&attr)))
    return attr.getValueAsDouble();
  return std::nullopt;
}

/// Whether `init` (a contraction's or a sum's accumulator) starts at zero:
/// linalg.fill of a zero constant, or a zero constant tensor. Anything else
/// (a bias added to the scores, a "softmax plus one" denominator) is not
/// attention and must not be raised.
bool isZeroInit(Value init) {
  auto isZero = [](Attribute a) {
    if (auto f = dyn_cast_or_null<FloatAttr>(a))
      return f.getValue().isZero();
    if (auto d = dyn_cast_or_null<DenseElementsAttr>(a))
      return d.isSplat() && isa<FloatType>(d.getElementType()) &&
             d.getSplatValue<APFloat>().isZero();
    return false;
  };
  if (auto fill = init.getDefiningOp<linalg::FillOp>()) {
    Attribute value;
    return matchPattern(fill.getInputs()[0], m_Constant(&value)) &&
           isZero(value);
  }
  Attribute value;
  return matchPattern(init, m_Constant(&value)) && isZero(value);
}

/// An all-parallel linalg.generic with one input-or-more, one init, one
/// result and an identity output map: an elementwise op over its result.
bool isElementwise(linalg::GenericOp g) {
  return g && g.getNumDpsInits() == 1 && g->getNumResults() == 1 &&
         g.getNumParallelLoops() == g.getNumLoops() &&
         g.getMatchingIndexingMap(g.getDpsInitOperand(0)).isIdentity() &&
         g.hasPureTensorSemantics();
}

/// A broadcast materialised as a copy (StableHLO's broadcast_in_dim after
/// stablehlo-legalize-to-linalg): one input read through a map that drops
/// dims or pins them to 0, written through an identity map, the body
/// yielding the input as it is.
bool isMaterialisedBroadcast(linalg::GenericOp g) {
  if (!isElementwise(g) || g.getNumDpsInputs() != 1)
    return false;
  Block &body = g.getRegion().front();
  AffineMap in = g.getMatchingIndexingMap(g.getDpsInputOperand(0));
  return body.getOperations().size() == 1 &&
         yielded(g) == body.getArgument(0) &&
         in.isProjectedPermutation(/*allowZeroInResults=*/true) &&
         !in.isPermutation();
}

} // namespace mlir::fa::raise
