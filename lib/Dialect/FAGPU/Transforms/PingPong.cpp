//===- PingPong.cpp - consumer warpgroups alternate on the tensor cores ---===//
//
// A consumer's softmax runs on the MUFU and FMA pipes and leaves the tensor
// cores idle; with two consumers taking turns (named barriers around their
// GEMM issue), one's softmax hides under the other's GEMMs.
//
//===----------------------------------------------------------------------===//

#include "fa/Dialect/FAGPU/Transforms/Passes.h"

#include "ScheduleUtils.h"

namespace mlir::fagpu {
#define GEN_PASS_DEF_FAGPUPINGPONG
#include "fa/Dialect/FAGPU/Transforms/Passes.h.inc"
} // namespace mlir::fagpu

using namespace mlir;
using namespace mlir::fagpu;

namespace {

struct PingPongPass : fagpu::impl::FAGPUPingPongBase<PingPongPass> {
  void runOnOperation() override {
    auto update = [](AttentionOp, ScheduleFields &f)
        -> std::optional<std::string> {
      // One consumer: the second resident CTA is the partner.
      f.pingPong = f.consumers > 1;
      return std::nullopt;
    };
    if (failed(updateSchedules(getOperation(), Target::sm_90a,
                               "fagpu-ping-pong", update)))
      signalPassFailure();
  }
};

} // namespace
