//===- WarpSpecialize.cpp - FA3 producer/consumer warpgroups --------------===//
//
// The producer only issues TMA loads and needs few registers; the consumers
// hold S, P and O of 64 rows each in registers. setmaxnreg moves the
// difference: the kernel launches with an even share and each role then
// resizes, so the consumers' accumulators fit without spilling.
//
//===----------------------------------------------------------------------===//

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
    auto update = [&](AttentionOp, ScheduleFields &f)
        -> std::optional<std::string> {
      // An SM has 64K 32-bit registers, shared by its resident CTAs; each
      // warpgroup has 128 threads.
      const int64_t perCTA = 65536 / f.ctasPerSm;
      f.producerRegisters = producerRegisters;
      int64_t fair = (perCTA / 128 - f.producerRegisters) / f.consumers / 8 * 8;
      f.consumerRegisters =
          consumerRegisters ? int64_t(consumerRegisters)
                            : std::min<int64_t>(fair, 240);
      // setmaxnreg takes multiples of 8 in [24, 256].
      for (int64_t r : {f.producerRegisters, f.consumerRegisters})
        if (r < 24 || r > 256 || r % 8 != 0)
          return "setmaxnreg counts must be multiples of 8 in [24, 256], got " +
                 std::to_string(r);
      int64_t total = 128 * (f.producerRegisters +
                             f.consumers * f.consumerRegisters);
      if (total > perCTA)
        return "producer and consumer registers (" +
               std::to_string(f.producerRegisters) + ", " +
               std::to_string(f.consumerRegisters) + ") exceed the " +
               std::to_string(perCTA / 1024) + "K registers of " +
               (f.ctasPerSm > 1 ? "a CTA (two per SM)" : "an SM");
      return std::nullopt;
    };
    if (failed(updateSchedules(getOperation(), Target::sm_90a,
                               "fagpu-warp-specialize", update)))
      signalPassFailure();
  }
};

} // namespace
