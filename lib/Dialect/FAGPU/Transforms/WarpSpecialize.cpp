//===- WarpSpecialize.cpp - FA3 producer/consumer warpgroups --------------===//
//
// The producer only issues TMA loads and needs few registers; the consumers
// hold S, P and O of 64 rows each in registers. setmaxnreg moves the
// difference: the kernel launches with an even share and each role then
// resizes, so the consumers' accumulators fit without spilling.
//
//===----------------------------------------------------------------------===//

#include "fa/Dialect/FAGPU/IR/Heuristics.h"
#include "fa/Dialect/FAGPU/IR/ScheduleValidation.h"
#include "fa/Dialect/FAGPU/Transforms/Passes.h"

#include "ScheduleUtils.h"

namespace mlir::fagpu {
#define GEN_PASS_DEF_FAGPUWARPSPECIALIZE
#include "fa/Dialect/FAGPU/Transforms/Passes.h.inc"
} // namespace mlir::fagpu

using namespace mlir;
using namespace mlir::fagpu;

namespace {

struct WarpSpecializePass
    : fagpu::impl::FAGPUWarpSpecializeBase<WarpSpecializePass> {
  using FAGPUWarpSpecializeBase::FAGPUWarpSpecializeBase;

  void runOnOperation() override {
    auto update = [&](AttentionOp op,
                      ScheduleFields &f) -> std::optional<std::string> {
      // The consumers split what the producer leaves of the registers a
      // CTA launches with, at most 240 each (checkRegisterBudget has the
      // rule).
      if (f.consumers < 1)
        return std::string("the schedule has no consumer warpgroups to "
                           "give registers to (consumers = 0)");
      // An e4m3 cache read by one consumer: a warpgroup widening V beside
      // the producer (SM90Kernel.cpp) takes a consumer's registers.
      const int64_t wideners = op.hasFP8KeyValues() && f.consumers == 1 ? 1 : 0;
      const int64_t threads = 128 * (f.consumers + 1 + wideners);
      const int64_t pool =
          launchRegistersPerThread(threads, f.ctasPerSm) * threads;
      f.producerRegisters =
          op.hasFP8KeyValues()
              ? std::max<int64_t>(producerRegisters, kWideningProducerRegisters)
              : int64_t(producerRegisters);
      int64_t fair =
          (pool / 128 - f.producerRegisters) / (f.consumers + wideners) / 8 * 8;
      f.consumerRegisters =
          consumerRegisters ? int64_t(consumerRegisters)
                            : std::min<int64_t>(fair, 240);
      return checkRegisterBudget(f);
    };
    if (failed(updateSchedules(getOperation(), Target::sm_90a,
                               "fagpu-warp-specialize", update)))
      signalPassFailure();
  }
};

} // namespace
