//===- SharedMemory.h - shared-memory layouts of the TMA kernels -*- C++ -*-===//
//
// Where the sm_90a and sm_100a kernels keep their tiles and barriers in
// shared memory. One description serves the schedule passes (which pick the
// K/V ring depth and the epilogue that fit) and the NVVM lowering (which
// addresses the buffers), so they cannot disagree.
//
//===----------------------------------------------------------------------===//

#ifndef FA_DIALECT_FAGPU_IR_SHAREDMEMORY_H
#define FA_DIALECT_FAGPU_IR_SHAREDMEMORY_H

#include "fa/Dialect/FAGPU/IR/FAGPU.h"

#include <cstdint>

namespace mlir::fagpu {

/// Rows of a wgmma accumulator: each sm_90a consumer warpgroup owns 64.
inline constexpr int64_t kRowsPerConsumer = 64;
/// tcgen05.mma M of the sm_100a kernel: one TMEM lane per query row.
inline constexpr int64_t kSM100BlockR = 128;

/// Shared memory one of `ctasPerSM` resident CTAs may use: an SM has
/// 228 KiB, 1 KiB of it reserved per CTA.
inline int64_t maxSharedBytes(int64_t ctasPerSM = 1) {
  return 228 * 1024 / ctasPerSM - 1024;
}

/// The sm_90a kernel: Q buffers, the K/V ring, the O staging tile of the
/// shared-memory epilogues, the mbarriers, the dynamic scheduler's tile slots.
struct SM90Layout {
  int64_t headDim = 0, consumers = 2, qBuffers = 1, blockC = 0, stages = 0;
  /// How O leaves: through a staging tile of its own, the dead Q buffer
  /// (TmaStoreInQ, StagedCopyInQ) or from registers.
  Epilogue epilogue = Epilogue::Registers;
  bool dynamicTiles = false;
  /// Bytes of a Q, K or V element: 2 (f16, bf16) or 1 (e4m3). O is 16-bit.
  int64_t elementBytes = 2;
  /// e4m3 row sums by MMA: each consumer's 8 x B_c ones-column tile.
  bool rowSumTiles = false;
  /// An e4m3 KV cache beside a 16-bit Q: the TMA fills a ring of `stages`
  /// stages of the cache's e4m3 K and V tiles (the cache ring), and the
  /// producer warpgroup widens each block into the 16-bit K/V ring the
  /// consumers read, of kWidenedStages stages. With one 16-bit stage the
  /// producer widens block j + 1 only once the consumer is done with block
  /// j, so widening and the consumer's work take turns; two let them
  /// overlap (decode: 1.18-1.32x the f16 cache's tokens/s against
  /// 0.95-1.14x with one, bench/results/2026-12-06-fp8-kv-cache-h100.md).
  bool widensKeyValues = false;
  static constexpr int64_t kWidenedStages = 2;

  int64_t blockR() const { return consumers * kRowsPerConsumer; }
  int64_t qBytes() const { return blockR() * headDim * elementBytes; }
  int64_t kvTileBytes() const { return blockC * headDim * elementBytes; }
  /// Stages of the ring the consumers read.
  int64_t kvStages() const { return widensKeyValues ? kWidenedStages : stages; }
  int64_t kOffset(int64_t stage) const {
    return qBuffers * qBytes() + stage * 2 * kvTileBytes();
  }
  int64_t vOffset(int64_t stage) const {
    return kOffset(stage) + kvTileBytes();
  }
  /// Whether O is staged in a tile of its own, after the K/V ring.
  bool hasStagingTile() const {
    return stagesOutput(epilogue) && !stagesOutputInQ(epilogue);
  }
  int64_t oStageOffset() const { return kOffset(kvStages()); }
  int64_t oStageBytes() const {
    return hasStagingTile() ? blockR() * headDim * 2 : 0;
  }
  /// The cache ring of an e4m3 KV cache (widensKeyValues): per stage an
  /// e4m3 K tile and a V tile of B_c rows of D bytes, after O's tile.
  int64_t cacheTileBytes() const { return blockC * headDim; }
  int64_t cacheRingOffset() const { return oStageOffset() + oStageBytes(); }
  int64_t cacheRingBytes() const {
    return widensKeyValues ? stages * 2 * cacheTileBytes() : 0;
  }
  int64_t barrierOffset() const { return cacheRingOffset() + cacheRingBytes(); }
  /// q_full, q_empty per Q buffer, then per stage of the K/V ring k_full,
  /// v_full, k_empty, v_empty, then those of the cache ring's stages.
  int64_t barrierBytes() const {
    return 8 *
           (2 * qBuffers + 4 * kvStages() + (widensKeyValues ? 4 * stages : 0));
  }
  /// The cache ring's barriers.
  int64_t cacheRingBarrierOffset() const {
    return barrierOffset() + 8 * (2 * qBuffers + 4 * kvStages());
  }
  /// The dynamic scheduler's tile index per Q buffer, after the barriers.
  int64_t tileSlotOffset() const { return barrierOffset() + barrierBytes(); }
  int64_t tileSlotBytes() const { return dynamicTiles ? 8 * qBuffers : 0; }
  /// The row-sum tile (fagpu.init_row_sum_tile): 8 rows of B_c e4m3 per
  /// consumer (fagpu.tile_rows of it), after the tile slots, on a 1 KiB
  /// boundary like every tile.
  int64_t rowSumTileOffset() const {
    return (tileSlotOffset() + tileSlotBytes() + 1023) / 1024 * 1024;
  }
  int64_t rowSumTileBytes() const {
    return rowSumTiles ? 8 * consumers * blockC : 0;
  }
  int64_t rowSumEnd() const {
    return rowSumTiles ? rowSumTileOffset() + rowSumTileBytes()
                       : tileSlotOffset() + tileSlotBytes();
  }
  /// Plus 1 KiB of slack to align the base to the 128-B swizzle atom.
  int64_t sharedBytes() const { return rowSumEnd() + 1024; }
};

/// The head dim of an sm_90a kernel's tiles for an attention of `headDim`:
/// whole 128-byte rows of the swizzle (64 16-bit or 128 e4m3 columns, the
/// TMA box and the wgmma descriptor's atom). D = 96 runs on D = 128 tiles:
/// the TMA fills columns 96 to 127 of Q, K and V with zeros, which add
/// nothing to Q K^T and make O's columns 96 to 127 zero, and the epilogue
/// stores O's 96 columns only.
inline int64_t sm90TileHeadDim(int64_t headDim, int64_t elementBytes = 2) {
  int64_t columns = 128 / elementBytes;
  return (headDim + columns - 1) / columns * columns;
}

/// The layout a schedule describes for an sm_90a kernel of `headDim` (its
/// tiles' sm90TileHeadDim) and Q/K/V elements of `elementBytes`; with
/// `widensKeyValues`, K and V come from an e4m3 cache beside a 16-bit Q.
inline SM90Layout sm90Layout(int64_t headDim, const ScheduleFields &s,
                             int64_t elementBytes = 2,
                             bool widensKeyValues = false) {
  SM90Layout layout;
  layout.widensKeyValues = widensKeyValues;
  layout.headDim = sm90TileHeadDim(headDim, elementBytes);
  layout.elementBytes = elementBytes;
  layout.consumers = s.consumers;
  layout.qBuffers = s.qBuffers;
  layout.blockC = s.blockC;
  layout.stages = s.stages;
  layout.epilogue = s.epilogue;
  layout.dynamicTiles = s.scheduler == TileScheduler::Dynamic;
  layout.rowSumTiles = s.rowSumMma;
  return layout;
}

/// The sm_100a kernel: Q, the K/V ring, the mbarriers, the TMEM address.
struct SM100Layout {
  int64_t headDim = 0, blockC = 0, stages = 0;

  int64_t qBytes() const { return kSM100BlockR * headDim * 2; }
  int64_t kvTileBytes() const { return blockC * headDim * 2; }
  int64_t kOffset(int64_t stage) const {
    return qBytes() + stage * 2 * kvTileBytes();
  }
  int64_t barrierOffset() const { return kOffset(stages); }
  /// q_full; per stage k_full, v_full, k_empty, v_empty; s_full[2],
  /// p_full[2], o_done; then the 4-byte TMEM address tcgen05.alloc writes.
  int64_t numBarriers() const { return 1 + 4 * stages + 5; }
  int64_t tmemSlotOffset() const { return barrierOffset() + 8 * numBarriers(); }
  /// Plus 1 KiB of slack to align the base to the 128-B swizzle atom.
  int64_t sharedBytes() const { return tmemSlotOffset() + 8 + 1024; }
};

/// Tensor memory of an sm_100a SM: 128 lanes x 512 columns of 32 bits.
inline constexpr int64_t kTmemColumns = 512;

/// Where the sm_100a kernel keeps its accumulators in tensor memory (one
/// lane per query row): S/P buffer b at columns [b B_c, (b + 1) B_c) -- two,
/// so that S_{j+1} is computed while the softmax reads S_j and writes P_j
/// over it -- then O at [2 B_c, 2 B_c + D).
struct TmemLayout {
  int64_t headDim = 0, blockC = 0;
  static constexpr int64_t kScoreBuffers = 2;
  int64_t oColumn() const { return kScoreBuffers * blockC; }
  int64_t usedColumns() const { return oColumn() + headDim; }
  /// What tcgen05.alloc must take: a power of two, at least 32.
  int64_t allocatedColumns() const {
    int64_t columns = 32;
    while (columns < usedColumns())
      columns *= 2;
    return columns;
  }
};

inline SM100Layout sm100Layout(int64_t headDim, const ScheduleFields &s) {
  SM100Layout layout;
  layout.headDim = headDim;
  layout.blockC = s.blockC;
  layout.stages = s.stages;
  return layout;
}

/// Bytes of shared memory the kernel of `schedule` needs on `target`, for
/// Q/K/V elements of `elementBytes` (1: e4m3 on sm_90a).
int64_t sharedBytesOf(Target target, int64_t headDim,
                      const ScheduleFields &schedule, int64_t elementBytes = 2,
                      bool widensKeyValues = false);

} // namespace mlir::fagpu

#endif // FA_DIALECT_FAGPU_IR_SHAREDMEMORY_H
