//===- Traffic.h - the global-memory traffic of an attention kernel -*- C++ -*-===//
//
// The seed's IO argument, for the kernels we ship: a query tile reads its
// Q rows once and the K and V rows of every block it visits (kvBlockRange);
// nothing else crosses from L2 (S and P never leave the SM). So the L2 -> SM
// bytes are a sum over (batch, head, query tile) of Q_i + sum_j (K_j +
// V_j), which for full tiles without a mask is FlashAttention-2's
// Q + (K + V) T_r. One function, for the compiler's fagpu-io-report and for
// the runtime's prediction from a kernel's metadata (header-only, no MLIR).
//
//===----------------------------------------------------------------------===//

#ifndef FA_DIALECT_FAGPU_IR_TRAFFIC_H
#define FA_DIALECT_FAGPU_IR_TRAFFIC_H

#include "fa/Dialect/FA/IR/KVChunk.h"
#include "fa/Dialect/FAGPU/IR/TileRange.h"

#include <cstdint>

namespace mlir::fagpu {

/// What of a kernel decides its traffic.
struct TrafficKernel {
  int64_t blockR = 0, blockC = 0, headDim = 0, valueHeadDim = 0;
  int64_t elementBytes = 2;
  bool causal = false, bottomRight = false;
  int64_t window = 0;
  /// TMA kernels move whole boxes: a ragged tail's rows past N cross from
  /// L2 too (measured on the H200: N = 1000 moves the bytes of N = 1024).
  /// The sm_80 kernel's cp.async zero-fills them instead (not measured).
  bool wholeBoxes = true;
  bool dynamicScheduler = false;
  bool writesLse = true;
  /// Split-KV: the launch's chunk count (0: not a split kernel). Each
  /// non-empty chunk (fa::kvChunk) loads the tile's Q and its own blocks;
  /// every chunk writes its rows' partial O and LSE in f32; the last chunk
  /// of each warp's 16 rows reads them back and writes O and LSE.
  int64_t kvSplits = 0;
};

/// An attention's shape.
struct TrafficShape {
  int64_t batch = 0, queryHeads = 0, kvHeads = 0, queryLen = 0, keyLen = 0;
};

struct Traffic {
  int64_t q = 0, k = 0, v = 0, o = 0, lse = 0;
  /// The dynamic tile scheduler: one 32-byte atomic on its counter per
  /// tile taken, and one more that resets it (read and written).
  int64_t scheduler = 0;
  int64_t tilesPerHead = 0, blocksVisitedPerHead = 0;
  /// FlashAttention-2's model: Q + (K + V) T_r, every block of every tile.
  int64_t fa2Model = 0;
  /// Split-KV: the partials written (O and LSE, f32), read back by the
  /// merge (each LSE twice, for the max and then the weights, by the whole
  /// warp at once: a 32-byte sector per load; O only of the chunks in which
  /// the row sees a key), and the arrival counters (one 32-byte atomic per
  /// warp and chunk, read and written, and one 32-byte sector reset per
  /// warp).
  int64_t partialWrites = 0, mergeReads = 0, arrivals = 0;
  int64_t reads() const { return q + k + v + scheduler + mergeReads + arrivals; }
  /// Payload bytes; the register epilogue's 4-byte stores write partial
  /// sectors, which the hardware counts whole (D = 64 kernels).
  int64_t writes() const {
    return o + lse + scheduler + partialWrites + arrivals;
  }
};

/// Split-KV's part of one tile's traffic (rows [qStart, qStart + rows)):
/// added to `head`.
inline void splitTileTraffic(const TrafficKernel &kernel, int64_t qStart,
                             int64_t rows, int64_t nq, int64_t nk,
                             KVRange<IntegerArithmetic> range, Traffic &head) {
  IntegerArithmetic ints;
  int64_t br = kernel.blockR, bc = kernel.blockC, elt = kernel.elementBytes;
  int64_t d = kernel.headDim, dv = kernel.valueHeadDim;
  int64_t splits = kernel.kvSplits;
  // Row i's visible keys [lo, hi), as the kernel masks them.
  int64_t shift = kernel.bottomRight ? nk - nq : 0;
  auto visible = [&](int64_t i, int64_t first, int64_t end) {
    int64_t at = i + shift, lo = 0, hi = nk;
    if (kernel.causal)
      hi = std::min(hi, at + 1);
    if (kernel.window) {
      lo = std::max(lo, at - kernel.window + 1);
      if (!kernel.causal)
        hi = std::min(hi, at + kernel.window);
    }
    return std::max(lo, first) < std::min(hi, end);
  };
  int64_t warps = (rows + 15) / 16;
  head.arrivals += warps * (splits + 1) * 32;
  for (int64_t c = 0; c < splits; ++c) {
    auto [begin, end] = fa::kvChunk(ints, range.first, range.end, c, splits);
    head.partialWrites += rows * (dv + 1) * 4;
    head.mergeReads += rows * 2 * 32;
    if (begin >= end)
      continue;
    head.q += (kernel.wholeBoxes ? br : rows) * d * elt;
    for (int64_t j = begin; j < end; ++j) {
      int64_t cols = kernel.wholeBoxes ? bc : std::min(bc, nk - j * bc);
      head.k += cols * d * elt;
      head.v += cols * dv * elt;
      ++head.blocksVisitedPerHead;
    }
    for (int64_t i = qStart; i < qStart + rows; ++i)
      if (visible(i, begin * bc, std::min(end * bc, nk)))
        head.mergeReads += dv * 4;
  }
}

inline Traffic kernelTraffic(const TrafficKernel &kernel,
                             const TrafficShape &shape) {
  int64_t br = kernel.blockR, bc = kernel.blockC, elt = kernel.elementBytes;
  int64_t d = kernel.headDim, dv = kernel.valueHeadDim;
  int64_t nq = shape.queryLen, nk = shape.keyLen;
  // One (batch, query head): every query tile and the blocks it visits.
  Traffic head;
  head.tilesPerHead = (nq + br - 1) / br;
  IntegerArithmetic ints;
  for (int64_t i = 0; i < head.tilesPerHead; ++i) {
    int64_t qStart = i * br;
    int64_t rows = kernel.wholeBoxes ? br : std::min(br, nq - qStart);
    KVRange<IntegerArithmetic> range =
        kvBlockRange(ints, qStart, nq, nk, br, bc, kernel.causal,
                     kernel.window, kernel.bottomRight);
    if (kernel.kvSplits) {
      splitTileTraffic(kernel, qStart, std::min(br, nq - qStart), nq, nk,
                       range, head);
      continue;
    }
    head.q += rows * d * elt;
    for (int64_t j = range.first; j < range.end; ++j) {
      int64_t cols = kernel.wholeBoxes ? bc : std::min(bc, nk - j * bc);
      head.k += cols * d * elt;
      head.v += cols * dv * elt;
      ++head.blocksVisitedPerHead;
    }
  }
  int64_t heads = shape.batch * shape.queryHeads;
  Traffic total = head;
  total.q *= heads;
  total.k *= heads;
  total.v *= heads;
  total.partialWrites *= heads;
  total.mergeReads *= heads;
  total.arrivals *= heads;
  total.o = heads * nq * dv * elt;
  total.lse = kernel.writesLse ? heads * nq * 4 : 0;
  total.scheduler =
      kernel.dynamicScheduler ? (head.tilesPerHead * heads + 1) * 32 : 0;
  total.fa2Model =
      heads * (nq * d + (nk * d + nk * dv) * head.tilesPerHead) * elt;
  return total;
}

} // namespace mlir::fagpu

#endif // FA_DIALECT_FAGPU_IR_TRAFFIC_H
