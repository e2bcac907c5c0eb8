//===- TmaStoreEpilogue.cpp - O through shared memory and a TMA store -----===//
//
// From registers, each thread writes O with D / 4 stores of 4 bytes in the
// softmax's issue slots, a quad's 16 bytes half of a 32-byte sector;
// through shared memory, stmatrix writes 16 bytes a lane and one thread
// hands the whole tile to the TMA engine. It needs a B_r x D staging tile,
// or a Q buffer that is dead by then. A varlen tile's box would write into
// the next sequence's rows, so there the warpgroup copies its staged rows
// up to the sequence's end, whole sectors at a time.
//
//===----------------------------------------------------------------------===//

#include "fa/Dialect/FAGPU/Transforms/Passes.h"

#include "ScheduleUtils.h"
#include "fa/Dialect/FAGPU/IR/Heuristics.h"
#include "fa/Dialect/FAGPU/IR/SharedMemory.h"

namespace mlir::fagpu {
#define GEN_PASS_DEF_FAGPUTMASTOREEPILOGUE
#include "fa/Dialect/FAGPU/Transforms/Passes.h.inc"
} // namespace mlir::fagpu

using namespace mlir;
using namespace mlir::fagpu;

namespace {

struct TmaStoreEpiloguePass
    : fagpu::impl::FAGPUTmaStoreEpilogueBase<TmaStoreEpiloguePass> {
  using FAGPUTmaStoreEpilogueBase::FAGPUTmaStoreEpilogueBase;

  void runOnOperation() override {
    // nullopt: the heuristics table's choice.
    std::optional<bool> requested;
    if (mode != EpilogueRequest::Auto)
      requested = mode == EpilogueRequest::Tma;
    auto update = [&](AttentionOp op, ScheduleFields &f)
        -> std::optional<std::string> {
      if (f.stages == 0)
        return std::string("the staging tile is placed after the K/V ring: "
                           "run fagpu-pipeline-kv first");
      bool wanted;
      if (f.kvSplits) {
        // Partial O leaves in f32 from registers; the merge writes O.
        if (requested.value_or(false))
          return std::string("a split-KV kernel stores partial O in f32 from "
                             "registers");
        wanted = false;
      } else if (op.isFP8()) {
        // The staging tiles hold 1-byte elements, half of a 16-bit O's
        // rows; O leaves from registers.
        if (requested.value_or(false))
          return std::string("an e4m3 kernel stores its f16/bf16 O from "
                             "registers (its tiles hold 1-byte elements)");
        wanted = false;
      } else if (requested) {
        wanted = *requested;
      } else {
        const KernelDefaults *row =
            defaultsFor(Target::sm_90a, op.getHeadDim(), op.getCausal());
        wanted = row && row->tmaStoreEpilogue;
      }
      // A TMA box of a varlen tile's rows that reaches past its sequence's
      // end would write into the next one's rows: whole blocks leave by TMA
      // stores, a sequence's last, partial block is copied up to its end.
      bool varlen = static_cast<bool>(op.getCuSeqlensQ());
      f.epilogue = !wanted  ? Epilogue::Registers
                   : varlen ? Epilogue::StagedCopy
                            : Epilogue::TmaStore;
      if (wanted &&
          sharedBytesOf(Target::sm_90a, op.getHeadDim(), f, op.isFP8() ? 1 : 2,
                        op.hasFP8KeyValues()) > maxSharedBytes(f.ctasPerSm)) {
        // No room for a staging tile: O is staged in the tile's Q buffer,
        // dead once its last S retired (a persistent kernel hands the
        // buffer back to the producer after the TMA store has read it). A
        // varlen one-tile CTA copies its rows from there; a persistent
        // varlen kernel keeps the register epilogue (the producer's next
        // TMA load would follow the threads' reads of the buffer).
        bool single = f.scheduler == TileScheduler::Single;
        f.epilogue = !varlen  ? Epilogue::TmaStoreInQ
                     : single ? Epilogue::StagedCopyInQ
                              : Epilogue::Registers;
      }
      return std::nullopt;
    };
    if (failed(updateSchedules(getOperation(), Target::sm_90a,
                               "fagpu-tma-store-epilogue", update)))
      signalPassFailure();
  }
};

} // namespace
