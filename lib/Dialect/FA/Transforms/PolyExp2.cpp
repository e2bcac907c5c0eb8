//===- PolyExp2.cpp - FA4 partial software exp2 ---------------------------===//
//
// Blackwell's tensor cores outgrew its exp2 units (MUFU); FlashAttention-4
// computes part of the exponentials on the FMA pipes instead. This pass
// only chooses degree and share; the lowering of the softmax step emits
// the polynomial (see convert-fa-to-loops and the GPU backends).
//
//===----------------------------------------------------------------------===//

#include "fa/Dialect/FA/IR/Validation.h"
#include "fa/Dialect/FA/Transforms/Passes.h"

namespace mlir::fa {
#define GEN_PASS_DEF_FAPOLYEXP2
#include "fa/Dialect/FA/Transforms/Passes.h.inc"
} // namespace mlir::fa

using namespace mlir;
using namespace mlir::fa;

namespace {

struct FAPolyExp2Pass : fa::impl::FAPolyExp2Base<FAPolyExp2Pass> {
  using FAPolyExp2Base::FAPolyExp2Base;

  void runOnOperation() override {
    if (std::optional<std::string> why = checkPolyExp2(degree, period)) {
      emitError(getOperation().getLoc()) << "fa-poly-exp2: " << *why;
      return signalPassFailure();
    }
    Builder b(&getContext());
    auto mark = [&](Operation *op) {
      op->setAttr("exp2_poly_degree", b.getI64IntegerAttr(degree));
      op->setAttr("exp2_poly_period", b.getI64IntegerAttr(period));
    };
    getOperation().walk([&](Operation *op) {
      if (isa<SoftmaxUpdateOp, ConditionalSoftmaxUpdateOp>(op))
        mark(op);
    });
  }
};

} // namespace
