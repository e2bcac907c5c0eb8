//===- PipelineKV.cpp - the depth of the K/V ring -------------------------===//
//
// With `stages` K/V slots the producer runs up to stages - 1 blocks ahead
// of the consumers, hiding the load latency of a block behind the GEMMs of
// the ones before it. Depth costs shared memory: 2 * B_c * D * 2 bytes per
// stage next to the Q buffers.
//
//===----------------------------------------------------------------------===//

#include "fa/Dialect/FAGPU/Transforms/Passes.h"

#include "ScheduleUtils.h"
#include "fa/Dialect/FAGPU/IR/Heuristics.h"
#include "fa/Dialect/FAGPU/IR/SharedMemory.h"

namespace mlir::fagpu {
#define GEN_PASS_DEF_FAGPUPIPELINEKV
#include "fa/Dialect/FAGPU/Transforms/Passes.h.inc"
} // namespace mlir::fagpu

using namespace mlir;
using namespace mlir::fagpu;

namespace {

/// Sets `f.stages` to `requested`, or the preferred depth where it fits,
/// else 2; returns why the tiles do not fit, or nothing.
std::optional<std::string> chooseStages(Target target, AttentionOp op,
                                        ScheduleFields &f, int64_t requested) {
  int64_t headDim = op.getHeadDim(), elementBytes = op.isFP8() ? 1 : 2;
  // An e4m3 cache: `stages` is the depth of the ring of e4m3 tiles the TMA
  // fills (SM90Layout::widensKeyValues).
  bool widens = target == Target::sm_90a && op.hasFP8KeyValues();
  const int64_t limit = maxSharedBytes(f.ctasPerSm);
  int64_t preferred =
      op.isFP8() ? fp8PreferredStages(headDim, f.blockC, op.getCausal())
      : widens   ? kWideningPreferredStages
                 : kPreferredStages;
  f.stages = requested ? requested : preferred;
  // Where the preferred depth does not fit: 2 (an e4m3 cache's ring: the
  // deepest that fits, down to 2).
  if (!requested)
    while (f.stages > 2 &&
           sharedBytesOf(target, headDim, f, elementBytes, widens) > limit)
      f.stages = widens ? f.stages - 1 : 2;
  if (f.stages < 2 || f.stages > 4)
    return "stages must be 2, 3 or 4, got " + std::to_string(f.stages);
  int64_t bytes = sharedBytesOf(target, headDim, f, elementBytes, widens);
  if (bytes > limit)
    return "the tiles need " + std::to_string(bytes) +
           " bytes of shared memory, more than " +
           std::to_string(limit / 1024) + " KiB" +
           (f.ctasPerSm > 1 ? " (" + std::to_string(f.ctasPerSm) +
                                  " CTAs per SM)"
                            : std::string());
  return std::nullopt;
}

struct PipelineKVPass : fagpu::impl::FAGPUPipelineKVBase<PipelineKVPass> {
  using FAGPUPipelineKVBase::FAGPUPipelineKVBase;

  void runOnOperation() override {
    for (Target target : {Target::sm_90a, Target::sm_100a}) {
      auto update = [&](AttentionOp op, ScheduleFields &f) {
        std::optional<std::string> why =
            chooseStages(target, op, f, stages);
        // A persistent kernel whose second Q buffer leaves no room for the
        // ring keeps one and drains between tiles.
        if (why && f.qBuffers == 2) {
          f.qBuffers = 1;
          why = chooseStages(target, op, f, stages);
        }
        return why;
      };
      if (failed(updateSchedules(getOperation(), target, "fagpu-pipeline-kv",
                                 update)))
        return signalPassFailure();
    }
  }
};

} // namespace
