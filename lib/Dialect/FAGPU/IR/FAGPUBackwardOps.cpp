//===- FAGPUBackwardOps.cpp - verifiers of the backward kernel's ops ------===//

#include "fa/Dialect/FA/IR/Validation.h"
#include "fa/Dialect/FAGPU/IR/FAGPU.h"

using namespace mlir;
using namespace mlir::fagpu;

/// Whether `type` is an f32 accumulator of whole 64-row tiles and 16-column
/// k-steps (the mma.sync m16n8k16 tiles the backward's products take).
static bool isScoreAccumulator(FragmentType type) {
  return type.getLayout() == FragmentLayout::Accumulator &&
         type.getElementType().isF32() && type.getShape().size() == 2 &&
         type.getShape()[0] % 64 == 0 && type.getShape()[1] % 16 == 0;
}

LogicalResult AttentionBackwardOp::verify() {
  MemRefType q = getQuery().getType(), k = getKey().getType(),
             v = getValue().getType(), dO = getGradOut().getType(),
             dk = getGradKey().getType(), dv = getGradValue().getType(),
             dq = getDqAccum().getType();
  Type elt = q.getElementType();
  for (MemRefType t : {k, v, dO, dk, dv})
    if (t.getElementType() != elt)
      return emitOpError("Q, K, V, dO, dK and dV must be of one element "
                         "type, got ")
             << t.getElementType() << " beside " << elt;
  int64_t d = q.getDimSize(3);
  for (MemRefType t : {k, v, dO, dk, dv, dq})
    if (t.getDimSize(3) != d)
      return emitOpError("every tensor must have Q's head dim ")
             << d << " (the backward kernel takes D = Dv), got " << t;
  // The kernel's positions are 32-bit (fa::checkWindow).
  std::optional<std::string> why =
      fa::checkMaskPlacement(getCausal(), getWindow().has_value(),
                             getBottomRight(), getDiagonalOffset().has_value());
  if (!why && getWindow())
    why = fa::checkWindow(*getWindow(), /*positionBits=*/32);
  if (!why && getDiagonalOffset())
    why = fa::checkDiagonalOffset(*getDiagonalOffset(), /*positionBits=*/32);
  if (why)
    return emitOpError(*why);
  if (getBlockR() != 64 || getBlockC() != 64)
    return emitOpError("the backward kernel's tiles are 64 x 64, got block_r "
                       "= ")
           << getBlockR() << ", block_c = " << getBlockC();
  if (getScale().convertToDouble() <= 0 ||
      !std::isfinite(getScale().convertToDouble()))
    return emitOpError("scale must be positive and finite");
  return success();
}

LogicalResult BackwardProbsOp::verify() {
  if (!isScoreAccumulator(getScores().getType()))
    return emitOpError("expected S^T as an f32 accumulator of 64-row tiles "
                       "and 16-column steps, got ")
           << getScores().getType();
  return success();
}

LogicalResult BackwardGradScoresOp::verify() {
  if (!isScoreAccumulator(getProbs().getType()))
    return emitOpError("expected P^T and dP^T as f32 accumulators of 64-row "
                       "tiles and 16-column steps, got ")
           << getProbs().getType();
  return success();
}

LogicalResult ToOperandAOp::verify() {
  FragmentType acc = getAcc().getType(), result = getResult().getType();
  if (!isScoreAccumulator(acc))
    return emitOpError("expected an f32 accumulator of 64-row tiles and "
                       "16-column steps, got ")
           << acc;
  if (result.getLayout() != FragmentLayout::OperandA ||
      !(result.getElementType().isF16() || result.getElementType().isBF16()) ||
      result.getShape() != acc.getShape())
    return emitOpError("result must be an f16 or bf16 operand_a fragment of "
                       "the accumulator's shape, got ")
           << result;
  return success();
}

LogicalResult StoreTransposedOp::verify() {
  FragmentType acc = getAcc().getType();
  SharedTileType tile = getTile().getType();
  if (!isScoreAccumulator(acc))
    return emitOpError("expected an f32 accumulator of 64-row tiles and "
                       "16-column steps, got ")
           << acc;
  if (!tile.isRowMajor() ||
      !(tile.getElementType().isF16() || tile.getElementType().isBF16()))
    return emitOpError("expected a 16-bit row_major tile, got ") << tile;
  if (tile.getRows() != acc.getShape()[1] ||
      tile.getCols() != acc.getShape()[0])
    return emitOpError("the tile must be the fragment's transpose (")
           << acc.getShape()[1] << " x " << acc.getShape()[0] << "), got "
           << tile;
  // The swizzle XORs a row's chunk with row & 7: rows of 8 chunks or more.
  if (tile.getCols() % 64 != 0)
    return emitOpError("the tile's rows must be whole 128-byte swizzle spans "
                       "(a multiple of 64 columns), got ")
           << tile.getCols();
  return success();
}

LogicalResult AtomicAddRowsOp::verify() {
  FragmentType acc = getAcc().getType();
  if (!isScoreAccumulator(acc))
    return emitOpError("expected an f32 accumulator of 64-row tiles and "
                       "16-column steps, got ")
           << acc;
  return success();
}
