//===- ConditionalRescale.cpp - FA4 conditional softmax rescaling ---------===//
//
// Rescaling O by alpha = exp2(m_old - m_new) costs a multiply per
// accumulator element in every block, and the running max settles after a
// few blocks. FlashAttention-4 keeps O and l relative to a base that moves
// only when the max has grown by more than a threshold tau: a skipped
// rescale leaves terms at most 2^tau larger than with the true max.
//
//===----------------------------------------------------------------------===//

#include "fa/Dialect/FA/IR/Validation.h"
#include "fa/Dialect/FA/Transforms/Passes.h"

#include "mlir/Dialect/MemRef/IR/MemRef.h"

#include <cmath>

namespace mlir::fa {
#define GEN_PASS_DEF_FACONDITIONALRESCALE
#include "fa/Dialect/FA/Transforms/Passes.h.inc"
} // namespace mlir::fa

using namespace mlir;
using namespace mlir::fa;

namespace {

constexpr StringLiteral kCountersName = "fa_rescale_counters";

struct FAConditionalRescalePass
    : fa::impl::FAConditionalRescaleBase<FAConditionalRescalePass> {
  using FAConditionalRescaleBase::FAConditionalRescaleBase;

  void runOnOperation() override {
    ModuleOp module = getOperation();
    if (std::optional<std::string> why = checkRescaleThreshold(threshold)) {
      emitError(module.getLoc()) << "fa-conditional-rescale: " << *why;
      return signalPassFailure();
    }
    SmallVector<SoftmaxUpdateOp> updates;
    module.walk([&](SoftmaxUpdateOp op) { updates.push_back(op); });
    if (updates.empty())
      return;

    OpBuilder b(module.getContext());
    auto countersType = MemRefType::get({3}, b.getF64Type());
    if (instrument && !module.lookupSymbol(kCountersName)) {
      b.setInsertionPointToStart(module.getBody());
      memref::GlobalOp::create(
          b, module.getLoc(), kCountersName, /*sym_visibility=*/StringAttr(),
          countersType,
          DenseElementsAttr::get(RankedTensorType::get({3}, b.getF64Type()),
                                 b.getF64FloatAttr(0.0)),
          /*constant=*/false, /*alignment=*/IntegerAttr());
    }

    for (SoftmaxUpdateOp op : updates) {
      b.setInsertionPoint(op);
      Value counters;
      if (instrument)
        counters = memref::GetGlobalOp::create(b, op.getLoc(), countersType,
                                               kCountersName);
      auto conditional = ConditionalSoftmaxUpdateOp::create(
          b, op.getLoc(), b.getI1Type(), op.getScores(), op.getMax(),
          op.getSum(), op.getCorrection(), counters,
          b.getF32FloatAttr(static_cast<float>(threshold)),
          op.getExp2PolyDegreeAttr(), op.getExp2PolyPeriodAttr());
      // The rescale of O by this step's correction only matters when some
      // row moved its base (alpha is 1 everywhere else).
      for (Operation *user :
           llvm::make_early_inc_range(op.getCorrection().getUsers())) {
        auto rescale = dyn_cast<RescaleOp>(user);
        if (!rescale || rescale->getBlock() != op->getBlock() ||
            !op->isBeforeInBlock(rescale))
          continue;
        b.setInsertionPoint(rescale);
        auto ifOp = scf::IfOp::create(b, rescale.getLoc(),
                                      conditional.getMoved(),
                                      /*withElseRegion=*/false);
        rescale->moveBefore(ifOp.thenBlock()->getTerminator());
      }
      op.erase();
    }
  }
};

} // namespace
