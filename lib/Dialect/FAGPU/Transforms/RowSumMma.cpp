//===- RowSumMma.cpp - e4m3: P's row sums on the tensor cores -------------===//
//
// At e4m3 rates a block's exponentials keep MUFU busy as long as its two
// GEMMs keep the tensor cores (D = 128: 2 D MACs per score at 4096 a clock
// against one ex2 at 16 a clock), and the FADD that adds each score to l
// takes an issue slot beside them. The row sums of P are a product too:
// P times a column of ones. This pass moves l onto the tensor cores, an
// m64n8k32 MMA per 32 keys from the registers P V already reads, which
// costs 8 / D of the P V product.
//
//===----------------------------------------------------------------------===//

#include "fa/Dialect/FAGPU/Transforms/Passes.h"

#include "ScheduleUtils.h"
#include "fa/Dialect/FAGPU/IR/Heuristics.h"

namespace mlir::fagpu {
#define GEN_PASS_DEF_FAGPUROWSUMMMA
#include "fa/Dialect/FAGPU/Transforms/Passes.h.inc"
} // namespace mlir::fagpu

using namespace mlir;
using namespace mlir::fagpu;

namespace {

struct RowSumMmaPass : fagpu::impl::FAGPURowSumMmaBase<RowSumMmaPass> {
  using Base::Base;
  void runOnOperation() override {
    std::optional<bool> asked = askedFor(mode);
    auto update = [&](AttentionOp op, ScheduleFields &f)
        -> std::optional<std::string> {
      if (!op.isFP8())
        return std::nullopt;
      bool on = asked.value_or(fp8RowSumMmaByDefault(op.getHeadDim()));
      if (on && f.kvSplits)
        return std::string("a split-KV kernel stores each chunk's l; its "
                           "row sums stay FADDs");
      if (on && op.getLse())
        return std::string(kRowSumMmaLseWhy);
      f.rowSumMma = on;
      return std::nullopt;
    };
    if (failed(updateSchedules(getOperation(), Target::sm_90a,
                               "fagpu-row-sum-mma", update)))
      signalPassFailure();
  }
};

} // namespace
