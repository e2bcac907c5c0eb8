//===- TileRange.h - the K/V blocks a query tile visits --------*- C++ -*-===//
//
// The block range the kernels' tile decoders compute (decodeTile in
// lib/Conversion/Common/TMAKernel.h, the sm_80 kernel's loop bounds), in
// integers: causal tiles stop at the block of their last row's diagonal
// (top-left, keys j <= i, or bottom-right, j <= i + Nk - Nq), a window
// |i - j| < w bounds both sides, and a window or bottom-right tile always
// runs at least one block. The IO report counts its
// traffic from it; tests compare it with the hardware's counters.
//
//===----------------------------------------------------------------------===//

#ifndef FA_DIALECT_FAGPU_IR_TILERANGE_H
#define FA_DIALECT_FAGPU_IR_TILERANGE_H

#include <algorithm>
#include <cstdint>

namespace mlir::fagpu {

struct KVBlocks {
  int64_t first, end; // K/V blocks [first, end)
};

/// With `bottomRight`, row i sits at key position i + nk - nq (the TMA
/// kernels then run at least one block per tile).
inline KVBlocks kvBlockRange(int64_t qStart, int64_t nq, int64_t nk,
                               int64_t blockR, int64_t blockC, bool causal,
                               int64_t window, bool bottomRight = false) {
  int64_t shift = bottomRight ? nk - nq : 0;
  auto atKey = [&](int64_t row) { return row + shift; };
  auto nonNegative = [](int64_t x) { return std::max<int64_t>(x, 0); };
  int64_t end = (nk + blockC - 1) / blockC;
  int64_t lastRow = std::min(qStart + blockR, nq); // exclusive
  if (causal)
    end = std::min(end, (nonNegative(atKey(lastRow)) + blockC - 1) / blockC);
  if (bottomRight)
    end = std::max<int64_t>(end, 1);
  int64_t first = 0;
  if (window) {
    int64_t reach = window - 1;
    first = nonNegative(atKey(qStart) - reach) / blockC;
    if (!causal)
      end = std::min(end,
                     nonNegative(atKey(lastRow - 1) + reach) / blockC + 1);
    first = std::min(first, end - 1);
  }
  return {first, end};
}

} // namespace mlir::fagpu

#endif // FA_DIALECT_FAGPU_IR_TILERANGE_H
