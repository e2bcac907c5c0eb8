//===- model-checks.cpp - the model library's rules against brute force ---===//
//
// The backward kernel's block ranges (fa/Model/BlockRange.h: visibleBand,
// queryBlockRange, lastKeyBlockReaching), evaluated on integers, against
// the mask's definition element by element, over every mask the kernel
// takes and ragged sizes:
//
//  * the band is the mask: key k is visible from query i exactly where the
//    kernel's probabilities keep it;
//  * a key block's query range holds every query block that sees one of
//    its keys (a missed block would drop gradient terms);
//  * the key blocks whose range holds a query block are a run that ends at
//    lastKeyBlockReaching (the deterministic kernel's turns J - j count
//    0, 1, ... there: a gap or a block past J would wait forever).
//
// The forward's K/V ranges (kvBlockRange, unmaskedBlocksEnd) the same way:
// no block with a visible key left out, no masked element in a block the
// kernel runs unmasked.
//
// Prints one line a check and exits non-zero at the first failure.
//
//===----------------------------------------------------------------------===//

#include "fa/Model/BlockRange.h"

#include <algorithm>
#include <cstdio>
#include <initializer_list>
#include <utility>
#include <vector>

using namespace mlir::fa::model;

namespace {

struct Mask {
  bool causal;
  int64_t window;
  bool bottomRight;
  int64_t offset;
};

/// The mask's definition: query i at key position i' = i (+ Nk - Nq) +
/// offset sees k <= i' (causal) and i' - w < k < i' + w (window w).
bool visible(const Mask &m, int64_t nq, int64_t nk, int64_t i, int64_t k) {
  int64_t at = i + (m.bottomRight ? nk - nq : 0) + m.offset;
  if (m.causal && k > at)
    return false;
  if (m.window && (k <= at - m.window || k >= at + m.window))
    return false;
  return true;
}

int fail(const Mask &m, int64_t nq, int64_t nk, int64_t blockR,
         int64_t blockC, const char *what, int64_t a, int64_t b) {
  std::printf("FAIL %s (%lld, %lld): causal %d window %lld bottom_right %d "
              "offset %lld Nq %lld Nk %lld block_r %lld block_c %lld\n",
              what, (long long)a, (long long)b, m.causal, (long long)m.window,
              m.bottomRight, (long long)m.offset, (long long)nq, (long long)nk,
              (long long)blockR, (long long)blockC);
  return 1;
}

int checkBackward(const Mask &m, int64_t nq, int64_t nk, int64_t blockR,
                  int64_t blockC) {
  IntegerArithmetic a;
  VisibleBand<IntegerArithmetic> band =
      visibleBand(a, nq, nk, m.causal, m.window, m.bottomRight, m.offset);
  for (int64_t i = 0; i < nq; ++i)
    for (int64_t k = 0; k < nk; ++k) {
      bool kept = (!band.hasNear || k <= i + band.near) &&
                  (!band.hasFar || k >= i + band.far);
      if (kept != visible(m, nq, nk, i, k))
        return fail(m, nq, nk, blockR, blockC, "band at (query, key)", i, k);
    }
  int64_t queryBlocks = (nq + blockR - 1) / blockR;
  int64_t keyBlocks = (nk + blockC - 1) / blockC;
  std::vector<std::vector<int64_t>> visitors(queryBlocks);
  for (int64_t kb = 0; kb < keyBlocks; ++kb) {
    QueryRange<IntegerArithmetic> r =
        queryBlockRange(a, band, kb * blockC, queryBlocks, blockR, blockC);
    if (r.first < 0 || r.first > r.end || r.end > queryBlocks)
      return fail(m, nq, nk, blockR, blockC, "range", r.first, r.end);
    for (int64_t qb = r.first; qb < r.end; ++qb)
      visitors[qb].push_back(kb);
    // Every query block that sees a key of the block is in the range.
    for (int64_t qb = 0; qb < queryBlocks; ++qb) {
      bool sees = false;
      for (int64_t i = qb * blockR; i < std::min(nq, (qb + 1) * blockR); ++i)
        for (int64_t k = kb * blockC; k < std::min(nk, (kb + 1) * blockC);
             ++k)
          sees = sees || visible(m, nq, nk, i, k);
      if (sees && (qb < r.first || qb >= r.end))
        return fail(m, nq, nk, blockR, blockC,
                    "missed (key block, query block)", kb, qb);
    }
  }
  // The deterministic turns J - j: the visitors of a query block are the
  // run J - n + 1 .. J.
  for (int64_t qb = 0; qb < queryBlocks; ++qb) {
    const std::vector<int64_t> &v = visitors[qb];
    if (v.empty())
      continue;
    int64_t last = lastKeyBlockReaching(a, band, qb * blockR, keyBlocks - 1,
                                        blockR, blockC);
    for (size_t t = 0; t < v.size(); ++t)
      if (v[v.size() - 1 - t] != last - int64_t(t))
        return fail(m, nq, nk, blockR, blockC, "turns of query block", qb,
                    v[v.size() - 1 - t]);
  }
  return 0;
}

/// The forward's K/V range of each query tile (kvBlockRange) and the end
/// of its unmasked blocks (unmaskedBlocksEnd): every key block that holds
/// a key visible from a row of the tile is in the range; every block
/// before the unmasked end is whole and visible from every row (the kernel
/// skips the mask there); a range is never empty where a tile must run a
/// block (bottom-right, windows).
int checkForward(const Mask &m, int64_t nq, int64_t nk, int64_t blockR,
                 int64_t blockC) {
  IntegerArithmetic a;
  int64_t keyBlocks = (nk + blockC - 1) / blockC;
  for (int64_t q0 = 0; q0 < nq; q0 += blockR) {
    KVRange<IntegerArithmetic> r =
        kvBlockRange(a, q0, nq, nk, blockR, blockC, m.causal, m.window,
                     m.bottomRight, m.offset);
    if (r.first < 0 || r.first > r.end || r.end > keyBlocks)
      return fail(m, nq, nk, blockR, blockC, "kvBlockRange", r.first, r.end);
    if ((m.bottomRight || m.window) && r.first == r.end)
      return fail(m, nq, nk, blockR, blockC, "empty range of tile", q0,
                  r.end);
    int64_t lastRow = std::min(nq, q0 + blockR);
    for (int64_t kb = 0; kb < keyBlocks; ++kb) {
      bool sees = false;
      for (int64_t i = q0; i < lastRow; ++i)
        for (int64_t k = kb * blockC; k < std::min(nk, (kb + 1) * blockC);
             ++k)
          sees = sees || visible(m, nq, nk, i, k);
      if (sees && (kb < r.first || kb >= r.end))
        return fail(m, nq, nk, blockR, blockC,
                    "forward missed (query tile, key block)", q0, kb);
    }
    int64_t unmasked =
        unmaskedBlocksEnd(a, r, q0, nq, nk, blockC, m.causal, m.window,
                          m.bottomRight, m.offset);
    for (int64_t kb = r.first; kb < unmasked; ++kb)
      for (int64_t i = q0; i < lastRow; ++i)
        for (int64_t k = kb * blockC; k < (kb + 1) * blockC; ++k)
          if (k >= nk || !visible(m, nq, nk, i, k))
            return fail(m, nq, nk, blockR, blockC,
                        "masked element in an unmasked block (row, key)", i,
                        k);
  }
  return 0;
}

/// Runs `check` on every mask the kernels take, ragged sizes and `tiles`
/// (B_r, B_c); returns its first failure, else 0 and the count.
template <typename Check>
int forEachCase(std::initializer_list<std::pair<int64_t, int64_t>> tiles,
                Check check, int64_t &checked) {
  const int64_t sizes[] = {1, 7, 63, 64, 65, 130, 200, 333};
  const int64_t windows[] = {0, 1, 5, 64, 97, 138, 500};
  const int64_t offsets[] = {0, 1, 37, 70};
  checked = 0;
  for (bool causal : {false, true})
    for (int64_t window : windows)
      for (bool bottomRight : {false, true})
        for (int64_t offset : offsets) {
          // Refused (fa::checkMaskPlacement): nothing to align or move.
          if (!causal && !window && (bottomRight || offset))
            continue;
          Mask m{causal, window, bottomRight, offset};
          for (int64_t nq : sizes)
            for (int64_t nk : sizes)
              for (auto [blockR, blockC] : tiles) {
                if (int rc = check(m, nq, nk, blockR, blockC))
                  return rc;
                ++checked;
              }
        }
  return 0;
}

} // namespace

int main() {
  int64_t checked = 0;
  // The backward's tiles are square (64 x 64 on the GPU).
  if (int rc = forEachCase({{16, 16}, {64, 64}}, checkBackward, checked))
    return rc;
  std::printf("backward block ranges: %lld configurations ok\n",
              (long long)checked);
  // The forward's: B_r and B_c differ on the GPU (128 x 128, 128 x 176,
  // 64 x 64 ...).
  if (int rc = forEachCase({{16, 16}, {64, 64}, {128, 176}, {64, 128}},
                           checkForward, checked))
    return rc;
  std::printf("forward block ranges: %lld configurations ok\n",
              (long long)checked);
  return 0;
}
