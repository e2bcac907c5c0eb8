//===- OverlapSoftmax.cpp - softmax under the previous block's P V --------===//
//
// wgmma is asynchronous: S_j = Q K_j^T and O += P_{j-1} V_{j-1} are issued
// back to back, and the softmax of S_j waits only for the first
// (wait_group 1), so it runs while P_{j-1} V_{j-1} is on the tensor cores.
// The price is one more live block of P in registers.
//
//===----------------------------------------------------------------------===//

#include "fa/Dialect/FAGPU/Transforms/Passes.h"

#include "ScheduleUtils.h"

namespace mlir::fagpu {
#define GEN_PASS_DEF_FAGPUOVERLAPSOFTMAX
#include "fa/Dialect/FAGPU/Transforms/Passes.h.inc"
} // namespace mlir::fagpu

using namespace mlir;
using namespace mlir::fagpu;

namespace {

struct OverlapSoftmaxPass
    : fagpu::impl::FAGPUOverlapSoftmaxBase<OverlapSoftmaxPass> {
  void runOnOperation() override {
    auto update = [](AttentionOp, ScheduleFields &f)
        -> std::optional<std::string> {
      f.overlapSoftmax = true;
      return std::nullopt;
    };
    if (failed(updateSchedules(getOperation(), Target::sm_90a,
                               "fagpu-overlap-softmax", update)))
      signalPassFailure();
  }
};

} // namespace
