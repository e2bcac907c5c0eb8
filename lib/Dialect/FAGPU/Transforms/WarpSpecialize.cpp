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
      // warpgroup has 128 threads. A CTA launches with the same count per
      // thread, rounded down to ptxas's granule of 8 (168 for three
      // warpgroups), and setmaxnreg only moves registers within that
      // allocation: an increase that does not fit waits forever.
      const int64_t threads = 128 * (f.consumers + 1);
      const int64_t launchPerThread = 65536 / f.ctasPerSm / threads / 8 * 8;
      const int64_t pool = launchPerThread * threads;
      f.producerRegisters = producerRegisters;
      int64_t fair = (pool / 128 - f.producerRegisters) / f.consumers / 8 * 8;
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
      if (total > pool)
        return "producer and consumer registers (" +
               std::to_string(f.producerRegisters) + ", " +
               std::to_string(f.consumerRegisters) + ") need " +
               std::to_string(total) + " registers, more than the " +
               std::to_string(pool) + " a CTA of " + std::to_string(threads) +
               " threads launches with (" + std::to_string(launchPerThread) +
               " each" + (f.ctasPerSm > 1 ? ", two CTAs per SM" : "") + ")";
      return std::nullopt;
    };
    if (failed(updateSchedules(getOperation(), Target::sm_90a,
                               "fagpu-warp-specialize", update)))
      signalPassFailure();
  }
};

} // namespace
