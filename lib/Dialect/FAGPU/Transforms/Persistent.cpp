//===- Persistent.cpp - persistent CTAs and the tile scheduler ------------===//
//
// One CTA per tile pays its prologue (barrier setup, Q load, the first S
// without an overlapped P V) and epilogue once per tile; a persistent CTA
// pays them once and, with two Q buffers, hides the tile boundary under
// the previous tile's last P V. Causal tiles differ in length (the last
// query block sees all keys, the first one block), and so do a mask_mod's
// under its key ranges, so a fixed deal leaves CTAs idle: they take tiles
// from a global counter instead.
//
//===----------------------------------------------------------------------===//

#include "fa/Dialect/FAGPU/Transforms/Passes.h"

#include "ScheduleUtils.h"
#include "fa/Dialect/FAGPU/IR/Heuristics.h"

namespace mlir::fagpu {
#define GEN_PASS_DEF_FAGPUPERSISTENT
#include "fa/Dialect/FAGPU/Transforms/Passes.h.inc"
} // namespace mlir::fagpu

using namespace mlir;
using namespace mlir::fagpu;

namespace {

struct PersistentPass : fagpu::impl::FAGPUPersistentBase<PersistentPass> {
  using FAGPUPersistentBase::FAGPUPersistentBase;

  void runOnOperation() override {
    std::optional<bool> requested = askedFor(mode);
    auto update = [&](AttentionOp op, ScheduleFields &f)
        -> std::optional<std::string> {
      bool persistent;
      if (f.kvSplits) {
        // A split-KV tile's CTAs meet at the tile's merge: one tile each.
        if (requested.value_or(false))
          return std::string("a split-KV kernel runs one tile per CTA (the "
                             "tile's last CTA merges the chunks)");
        persistent = false;
      } else if (op.hasFP8KeyValues()) {
        // The producer warpgroup that widens an e4m3 cache's blocks works
        // through one tile (SM90Kernel.cpp).
        if (requested.value_or(false))
          return std::string("an e4m3 K/V cache's kernel runs one tile per "
                             "CTA (its producer warpgroup widens one tile's "
                             "blocks)");
        persistent = false;
      } else if (requested) {
        persistent = *requested;
      } else if (int64_t page = op.getPageSize(); page && page < f.blockC) {
        // Each K/V block gathered from several pages.
        persistent = shortPagePersistence(Target::sm_90a).persistent;
      } else {
        // Where the table measured it faster, at the table's tiles. A
        // varlen batch follows its head dim's row: persistent CTAs deal
        // only the sequences' real tiles, like a uniform batch's.
        const KernelDefaults *row =
            defaultsFor(Target::sm_90a, op.getHeadDim(), op.getCausal());
        persistent = row && row->persistent && row->blockR == f.blockR;
      }
      if (!persistent) {
        f.scheduler = TileScheduler::Single;
        f.qBuffers = 1;
        return std::nullopt;
      }
      // A mask_mod's tiles differ in length at run time (their key ranges,
      // KernelBuilder::tileOf): from the counter too.
      f.scheduler = op.getCausal() || !op.getMaskMod().empty()
                        ? TileScheduler::Dynamic
                        : TileScheduler::Static;
      f.qBuffers = 2;
      return std::nullopt;
    };
    if (failed(updateSchedules(getOperation(), Target::sm_90a,
                               "fagpu-persistent", update)))
      signalPassFailure();
  }
};

} // namespace
