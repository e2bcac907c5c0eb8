//===- PackQueryHeads.cpp - G query heads a K/V head in one tile's rows ---===//
//
// Grouped-query attention (G = Hq / Hkv) with a few queries a sequence
// reads every K/V block once per query head when each query head has a tile
// of its own, and fills Nq of its B_r rows. Packing the G heads' queries
// into one tile's rows, query by query (row r is query r / G of head
// h G + r mod G), reads each block once per K/V head: G times fewer K/V
// bytes, and G Nq rows a tile. The masks see the row's query, r / G; with
// G a power of two dividing B_r each tile holds whole queries.
//
//===----------------------------------------------------------------------===//

#include "fa/Dialect/FAGPU/Transforms/Passes.h"

#include "ScheduleUtils.h"
#include "fa/Dialect/FAGPU/IR/ScheduleValidation.h"

namespace mlir::fagpu {
#define GEN_PASS_DEF_FAGPUPACKQUERYHEADS
#include "fa/Dialect/FAGPU/Transforms/Passes.h.inc"
} // namespace mlir::fagpu

using namespace mlir;
using namespace mlir::fagpu;

namespace {

struct PackQueryHeadsPass
    : fagpu::impl::FAGPUPackQueryHeadsBase<PackQueryHeadsPass> {
  using Base::Base;
  void runOnOperation() override {
    if (queryGroup == 0)
      return;
    if (failed(refuseOtherTargets(getOperation(), "fagpu-pack-query-heads",
                                  "takes packed query heads")))
      return signalPassFailure();
    auto update = [&](AttentionOp op, ScheduleFields &f)
        -> std::optional<std::string> {
      if (op.getCuSeqlensQ())
        return std::string("a varlen batch's prefix sums count queries, not "
                           "packed rows: it has no packed form");
      if (op.getSinks())
        return std::string("attention sinks are per query head: packed "
                           "rows have no form for them");
      if (op.hasModifications())
        return std::string("score_mod and mask_mod see each row's query "
                           "head: packed rows have no form for them");
      if (op.isFP8())
        return std::string("e4m3 kernels have no packed form (their Q "
                           "descales are per query head)");
      f.queryGroup = queryGroup;
      // The range (a power of two in [2, 64] dividing block_r) is the
      // schedule's rule, checked once (ScheduleValidation.cpp).
      return checkSchedule(op.getTarget(), f);
    };
    if (failed(updateSchedules(getOperation(), Target::sm_90a,
                               "fagpu-pack-query-heads", update)))
      signalPassFailure();
  }
};

} // namespace
