//===- BlockRange.h - the K/V blocks a query tile visits -------*- C++ -*-===//
//
// The block range a query tile visits, written once: the kernels' tile
// decoders emit it as IR (decodeTile in lib/Conversion/Common/TMAKernel.h,
// the sm_80 kernel's loop bounds) and the IO report evaluates it on
// integers; the report is checked against the hardware's counters.
//
//===----------------------------------------------------------------------===//

#ifndef FA_MODEL_BLOCKRANGE_H
#define FA_MODEL_BLOCKRANGE_H

#include <algorithm>
#include <cstdint>

namespace mlir::fa::model {

/// The K/V blocks [first, end) a query tile of rows [qStart, qStart +
/// blockR) visits (and, below, the end of those no mask touches). Written once
/// over an arithmetic `A`: integers (IntegerArithmetic, the IO report) or IR
/// (the kernels' tile decoders), so the kernels and the report cannot disagree.
/// `A` provides Value, c(int64_t), add, sub, divu, minu, maxu and maxs
/// (signed; the backward's ranges below also mins and divs).
///
/// Causal tiles stop at the block of their last row's diagonal; a window
/// |i - j| < w bounds both sides and masks every block. With `bottomRight`
/// row i sits at key position i + Nk - Nq (signed: rows before every key
/// are clamped to key 0), and every tile runs at least one block, as a
/// window tile does: the producer and the consumers of a kernel then agree
/// on a non-empty range (a fully masked block gives O = 0, LSE = -inf).
/// So does a tile whose keys come from per-sequence lengths
/// (`keyLengths`), where a sequence may have none. A `diagonalOffset` d
/// (>= 0) moves every row's key position d keys right (so top-left
/// positions stay non-negative).
template <typename A> struct KVRange;

/// How far the causal/window masks move a row's key position (row i at
/// i + shift): Nk - Nq when `bottomRight` (signed), plus `diagonalOffset`;
/// A's null Value() when neither moves it.
template <typename A>
typename A::Value diagonalShift(A &a, typename A::Value nq,
                                typename A::Value nk, bool bottomRight,
                                int64_t diagonalOffset) {
  using V = typename A::Value;
  V shift = bottomRight ? a.sub(nk, nq) : V();
  if (diagonalOffset)
    shift = shift ? a.add(shift, a.c(diagonalOffset)) : a.c(diagonalOffset);
  return shift;
}

template <typename A> struct KVRange { typename A::Value first, end; };

template <typename A>
KVRange<A> kvBlockRange(A &a, typename A::Value qStart, typename A::Value nq,
                        typename A::Value nk, int64_t blockR, int64_t blockC,
                        bool causal, int64_t window, bool bottomRight,
                        int64_t diagonalOffset, bool keyLengths = false) {
  using V = typename A::Value;
  V shift = diagonalShift(a, nq, nk, bottomRight, diagonalOffset);
  auto atKey = [&](V row) { return shift ? a.add(row, shift) : row; };
  auto nonNegative = [&](V x) { return bottomRight ? a.maxs(x, a.c(0)) : x; };
  V end = a.divu(a.add(nk, a.c(blockC - 1)), a.c(blockC));
  V lastRow = a.minu(a.add(qStart, a.c(blockR)), nq); // exclusive
  if (causal)
    end =
        a.minu(end, a.divu(a.add(nonNegative(atKey(lastRow)), a.c(blockC - 1)),
                           a.c(blockC)));
  if (bottomRight || keyLengths)
    end = a.maxu(end, a.c(1));
  V first = a.c(0);
  if (window) {
    V reach = a.c(window - 1);
    V firstKey = bottomRight ? nonNegative(a.sub(atKey(qStart), reach))
                             : a.sub(a.maxu(atKey(qStart), reach), reach);
    first = a.divu(firstKey, a.c(blockC));
    if (!causal)
      end = a.minu(
          end,
          a.add(a.divu(nonNegative(a.add(atKey(a.sub(lastRow, a.c(1))), reach)),
                       a.c(blockC)),
                a.c(1)));
    // Rows past the end of the keys by more than the window see no key:
    // they still run one (fully masked) block.
    first = a.minu(first, a.sub(end, a.c(1)));
  }
  return {first, end};
}

/// The end of the blocks of `range` no mask touches: full, and (causal)
/// wholly at or below the diagonal of the tile's first row. Windows mask
/// every block. (Separate from kvBlockRange so that a kernel computes it
/// where it needs it: the sm_80 kernel after its prologue, which keeps its
/// registers free while the first loads are in flight.)
template <typename A>
typename A::Value unmaskedBlocksEnd(A &a, const KVRange<A> &range,
                                    typename A::Value qStart,
                                    typename A::Value nq, typename A::Value nk,
                                    int64_t blockC, bool causal, int64_t window,
                                    bool bottomRight, int64_t diagonalOffset) {
  using V = typename A::Value;
  if (window)
    return range.first;
  V unmaskedEnd = a.divu(nk, a.c(blockC));
  if (causal) {
    // The first row, one past its key.
    V firstKeyPos = a.add(qStart, a.c(1 + diagonalOffset));
    if (bottomRight)
      firstKeyPos = a.maxs(a.add(firstKeyPos, a.sub(nk, nq)), a.c(0));
    unmaskedEnd = a.minu(unmaskedEnd, a.divu(firstKeyPos, a.c(blockC)));
  }
  return a.minu(unmaskedEnd, range.end);
}

/// The band of keys a query sees, as the backward reads it: key k is
/// visible from query i iff k <= i + near (when `near` is set: a causal
/// mask, or a window's near edge) and k >= i + far (when `far` is set: a
/// window's far edge). Query i sits at key position i' = i + shift
/// (diagonalShift); causal keeps k <= i', a window w keeps i' - w < k <
/// i' + w.
template <typename A> struct VisibleBand {
  typename A::Value near, far;
  bool hasNear = false, hasFar = false;
};
template <typename A>
VisibleBand<A> visibleBand(A &a, typename A::Value nq, typename A::Value nk,
                           bool causal, int64_t window, bool bottomRight,
                           int64_t diagonalOffset) {
  using V = typename A::Value;
  VisibleBand<A> band;
  if (!causal && !window)
    return band;
  V shift = diagonalShift(a, nq, nk, bottomRight, diagonalOffset);
  if (!shift)
    shift = a.c(0);
  band.near = causal ? shift : a.add(shift, a.c(window - 1));
  band.hasNear = true;
  if (window) {
    band.far = a.sub(shift, a.c(window - 1));
    band.hasFar = true;
  }
  return band;
}

/// The query blocks [first, end) of blockR rows that see a key of the
/// block [k0, k0 + blockC) (the backward's CTA, which owns a key block and
/// visits query blocks): the first holds query k0 - near, the last query
/// k0 + blockC - 1 - far; end >= first, and both are within
/// ceil(Nq / blockR) (`queryBlocks`).
template <typename A> struct QueryRange { typename A::Value first, end; };
template <typename A>
QueryRange<A>
queryBlockRange(A &a, const VisibleBand<A> &band, typename A::Value k0,
                typename A::Value queryBlocks, int64_t blockR, int64_t blockC) {
  QueryRange<A> range{a.c(0), queryBlocks};
  if (band.hasNear)
    range.first = a.minu(
        a.divu(a.maxs(a.sub(k0, band.near), a.c(0)), a.c(blockR)), queryBlocks);
  if (band.hasFar) {
    // ceil((k0 + blockC - far) / blockR) blocks hold a query that sees key
    // k0 + blockC - 1.
    typename A::Value reach =
        a.maxs(a.sub(a.add(k0, a.c(blockC + blockR - 1)), band.far), a.c(0));
    range.end =
        a.maxu(a.minu(a.divu(reach, a.c(blockR)), queryBlocks), range.first);
  }
  return range;
}

/// The last key block (of blockC keys, at most `lastBlock`) that reaches
/// the query block of rows [q0, q0 + blockR): key k reaches it while k <=
/// q0 + blockR - 1 + near. The key blocks that reach it are a range ending
/// there (a far edge cuts a prefix), and it is at least every key block
/// whose queryBlockRange holds the query block (signed: non-negative there).
template <typename A>
typename A::Value lastKeyBlockReaching(A &a, const VisibleBand<A> &band,
                                       typename A::Value q0,
                                       typename A::Value lastBlock,
                                       int64_t blockR, int64_t blockC) {
  if (!band.hasNear)
    return lastBlock;
  return a.mins(
      a.divs(a.add(a.add(q0, a.c(blockR - 1)), band.near), a.c(blockC)),
      lastBlock);
}

/// kvBlockRange on integers (the IO report).
struct IntegerArithmetic {
  using Value = int64_t;
  int64_t c(int64_t v) { return v; }
  int64_t add(int64_t x, int64_t y) { return x + y; }
  int64_t sub(int64_t x, int64_t y) { return x - y; }
  int64_t mul(int64_t x, int64_t y) { return x * y; }
  int64_t divu(int64_t x, int64_t y) { return x / y; }
  int64_t minu(int64_t x, int64_t y) { return std::min(x, y); }
  int64_t maxu(int64_t x, int64_t y) { return std::max(x, y); }
  int64_t maxs(int64_t x, int64_t y) { return std::max(x, y); }
  int64_t mins(int64_t x, int64_t y) { return std::min(x, y); }
  int64_t divs(int64_t x, int64_t y) { return x / y; }
};

} // namespace mlir::fa::model

#endif // FA_MODEL_BLOCKRANGE_H
