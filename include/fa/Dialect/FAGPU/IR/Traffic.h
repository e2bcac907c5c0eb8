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
  int64_t reads() const { return q + k + v + scheduler; }
  /// Payload bytes; the register epilogue's 4-byte stores write partial
  /// sectors, which the hardware counts whole (D = 64 kernels).
  int64_t writes() const { return o + lse + scheduler; }
};

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
    head.q += rows * d * elt;
    KVRange<IntegerArithmetic> range =
        kvBlockRange(ints, qStart, nq, nk, br, bc, kernel.causal,
                     kernel.window, kernel.bottomRight);
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
