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
      if (isa<Float8E4M3FNType>(op.getValue().getType().getElementType()))
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
