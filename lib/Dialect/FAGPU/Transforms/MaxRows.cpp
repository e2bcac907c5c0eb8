//===- MaxRows.cpp - tiles of at most 8 real rows -------------------------===//
//
// A decode tile holds at most 8 real rows (its K/V head's packed query
// heads), all in warp 0's rows g of the first consumer; each consumer
// thread's row g + 8 is padding. With the schedule's max_rows = 8 the
// softmax step skips that row: half the exponentials, maxima and sums of
// the consumer, whose per-key work bounds an e4m3 cache's decode.
//
//===----------------------------------------------------------------------===//

#include "fa/Dialect/FAGPU/Transforms/Passes.h"

#include "ScheduleUtils.h"
#include "fa/Dialect/FAGPU/IR/ScheduleValidation.h"

namespace mlir::fagpu {
#define GEN_PASS_DEF_FAGPUMAXROWS
#include "fa/Dialect/FAGPU/Transforms/Passes.h.inc"
} // namespace mlir::fagpu

using namespace mlir;
using namespace mlir::fagpu;

namespace {

struct MaxRowsPass : fagpu::impl::FAGPUMaxRowsBase<MaxRowsPass> {
  using Base::Base;
  void runOnOperation() override {
    if (maxRows == 0)
      return;
    if (failed(refuseOtherTargets(getOperation(), "fagpu-max-rows",
                                  "steps one row a thread")))
      return signalPassFailure();
    auto update = [&](AttentionOp op, ScheduleFields &f)
        -> std::optional<std::string> {
      if (op.isFP8())
        return std::string("e4m3 Q steps P in e4m3 over whole row pairs: "
                           "max_rows is for 16-bit Q");
      if (op.getCuSeqlensQ())
        return std::string("a varlen batch's tiles hold any rows: it has no "
                           "max_rows form");
      f.maxRows = maxRows;
      // 8 is the one bound a thread's rows allow (ScheduleValidation.cpp).
      return checkSchedule(op.getTarget(), f);
    };
    if (failed(updateSchedules(getOperation(), Target::sm_90a,
                               "fagpu-max-rows", update)))
      signalPassFailure();
  }
};

} // namespace
