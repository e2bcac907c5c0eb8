//===- QuantizeProbs.cpp - P in e4m3 for the P V product ------------------===//
//
// The e4m3 MMA takes P in e4m3: scale it by a power of two first, so small
// probabilities do not flush to zero (e4m3's smallest subnormal is 2^-9).
//
//===----------------------------------------------------------------------===//

#include "fa/Dialect/FA/IR/Validation.h"
#include "fa/Dialect/FA/Transforms/Passes.h"

namespace mlir::fa {
#define GEN_PASS_DEF_FAQUANTIZEPROBS
#include "fa/Dialect/FA/Transforms/Passes.h.inc"
} // namespace mlir::fa

using namespace mlir;
using namespace mlir::fa;

namespace {

/// Whether `op`'s P comes from e4m3 queries (FlashAttention-3's FP8 path,
/// whose P V is an e4m3 MMA). An e4m3 KV cache beside a 16-bit Q keeps P
/// at Q's precision: its MMAs run on the dequantised K/V.
static bool scoresOfFP8Queries(PVAccumulateOp op) {
  for (Operation *user : op.getProbs().getUsers())
    if (auto scores = dyn_cast<ScoreTileOp>(user))
      if (scores.getScores() == op.getProbs())
        return isa<Float8E4M3FNType>(
            scores.getQuery().getType().getElementType());
  return true;
}

struct FAQuantizeProbsPass
    : fa::impl::FAQuantizeProbsBase<FAQuantizeProbsPass> {
  using FAQuantizeProbsBase::FAQuantizeProbsBase;

  void runOnOperation() override {
    // P reaches 2^threshold where conditional rescaling skips a rescale.
    double threshold = 0.0;
    getOperation().walk([&](ConditionalSoftmaxUpdateOp op) {
      threshold = std::max(threshold, op.getThreshold().convertToDouble());
    });
    SmallVector<PVAccumulateOp> ops;
    getOperation().walk([&](PVAccumulateOp op) {
      if (isa<Float8E4M3FNType>(op.getValue().getType().getElementType()) &&
          scoresOfFP8Queries(op))
        ops.push_back(op);
    });
    if (ops.empty())
      return;
    if (std::optional<std::string> error = checkProbsScale(scale, threshold)) {
      emitError(ops.front().getLoc()) << "fa-quantize-probs: " << *error;
      return signalPassFailure();
    }
    Builder b(&getContext());
    for (PVAccumulateOp op : ops)
      op.setProbsScaleAttr(b.getF32FloatAttr(static_cast<float>(scale)));
  }
};

} // namespace
