//===- TmemAccumulators.cpp - the sm_100a accumulators in tensor memory ---===//
//
// FlashAttention-4's structure on Blackwell: tcgen05.mma writes its
// accumulators to tensor memory (TMEM), not registers, so the softmax
// warps own one query row per TMEM lane and read S with tcgen05.ld. The
// kernel keeps two S/P buffers -- the MMA warp computes S_{j+1} into one
// while the softmax reads S_j from the other and writes P_j over it as
// 16-bit pairs, the A operand of O += P_j V_j straight from TMEM -- and O
// after them (fagpu::TmemLayout). This pass places them: it sets
// `tmem_columns`, the power of two tcgen05.alloc takes, and refuses tiles
// whose accumulators do not fit the SM's 512 columns.
//
//===----------------------------------------------------------------------===//

#include "fa/Dialect/FAGPU/Transforms/Passes.h"

#include "ScheduleUtils.h"
#include "fa/Dialect/FAGPU/IR/SharedMemory.h"

namespace mlir::fagpu {
#define GEN_PASS_DEF_FAGPUTMEMACCUMULATORS
#include "fa/Dialect/FAGPU/Transforms/Passes.h.inc"
} // namespace mlir::fagpu

using namespace mlir;
using namespace mlir::fagpu;

namespace {

struct TmemAccumulatorsPass
    : fagpu::impl::FAGPUTmemAccumulatorsBase<TmemAccumulatorsPass> {
  void runOnOperation() override {
    auto place = [](AttentionOp op,
                    ScheduleFields &f) -> std::optional<std::string> {
      TmemLayout layout{op.getValueHeadDim(), f.blockC};
      if (layout.usedColumns() > kTmemColumns)
        return "two S/P buffers of " + std::to_string(f.blockC) +
               " columns and O of " + std::to_string(layout.headDim) +
               " need " + std::to_string(layout.usedColumns()) +
               " tensor-memory columns, more than the SM's " +
               std::to_string(kTmemColumns);
      f.tmemColumns = layout.allocatedColumns();
      return std::nullopt;
    };
    if (failed(updateSchedules(getOperation(), Target::sm_100a,
                               "fagpu-tmem-accumulators", place)))
      signalPassFailure();
  }
};

} // namespace
