//===- PolyExp2.cpp - FA4 partial software exp2 ---------------------------===//
//
// Blackwell's tensor cores outgrew its exp2 units (MUFU); FlashAttention-4
// computes part of the exponentials on the FMA pipes instead. This pass
// only chooses degree and share; the lowering of the softmax step emits
// the polynomial (see convert-fa-to-loops and the GPU backends).
//
//===----------------------------------------------------------------------===//

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
    if (degree < 2 || degree > 5 || period < 1) {
      emitError(getOperation().getLoc())
          << "fa-poly-exp2: degree must be in [2, 5] and period at least 1, "
             "got degree="
          << static_cast<int64_t>(degree)
          << " period=" << static_cast<int64_t>(period);
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
