//===- KVChunk.h - the K/V blocks of a split-KV chunk ----------*- C++ -*-===//
//
// Split-KV cuts the K/V blocks a query tile visits into chunks computed in
// parallel. The rule is written once over an arithmetic `A` (Value, c,
// add, sub, mul, divu, minu, maxu): the CPU nest (fa-lower-fa2, on index
// values) and the GPU kernel (on i32) then split the same keys.
//
//===----------------------------------------------------------------------===//

#ifndef FA_MODEL_KVCHUNK_H
#define FA_MODEL_KVCHUNK_H

#include <algorithm>
#include <cstdint>
#include <utility>

namespace mlir::fa::model {

/// The blocks [begin, end) of the visible blocks [first, end) that chunk
/// `chunk` of `splits` visits. Chunks are ceil(n / splits) blocks long, in
/// order: all but the last ones are full and no intermediate exceeds
/// n + splits. Trailing chunks may be empty; an empty chunk's partial is
/// O = 0, LSE = -inf, which the merge weighs 0.
template <typename A>
std::pair<typename A::Value, typename A::Value>
kvChunk(A &a, typename A::Value first, typename A::Value end,
        typename A::Value chunk, typename A::Value splits) {
  using V = typename A::Value;
  V n = a.sub(a.maxu(end, first), first);
  V size = a.divu(a.add(n, a.sub(splits, a.c(1))), splits);
  V begin = a.minu(a.mul(chunk, size), n);
  V stop = a.minu(a.add(begin, size), n);
  return {a.add(first, begin), a.add(first, stop)};
}

/// The chunk count split-KV uses when the caller leaves it to the launch
/// ("auto"): `tiles` (query block, head) work items, each over `kvBlocks`
/// K/V blocks, `queryBlocks` of them per (sequence, head) -- 1 for a
/// decode launch --, on a GPU of `sms` SMs and `dramGBps` GB/s of DRAM
/// bandwidth (0: unknown). A memory-bound decode kernel
/// streams K/V at the rate of the CTAs in flight, and one CTA per SM
/// nearly saturates an SM's share of DRAM bandwidth, so the grid should
/// fill whole waves of one CTA per SM (also for kernels built for two CTAs
/// per SM: docs/hopper.md has the measurement): for each S, the wave
/// efficiency is tiles S / (sms ceil(tiles S / sms)), and the smallest S
/// within 5% of the best wins (fewer chunks, less merging). No split into
/// chunks of fewer than two blocks.
///
/// Once the tiles fill 80% of a wave: no split for tiles of several query
/// blocks (prefill: the tiles alone fill the SMs, and the merge would add
/// to their work). Decode tiles under four waves take two chunks where the
/// GPU's DRAM bandwidth per SM (`dramGBps` / `sms`) reaches 30 GB/s, and
/// one otherwise (or where `dramGBps` is 0, unknown). The split-KV kernels
/// fit two CTAs per SM, and where an SM's share of DRAM bandwidth is large,
/// one decode CTA per SM does not reach it and a second one streaming
/// beside it does. The threshold lies between the H100 (3.35 TB/s on 132
/// SMs: 25 GB/s per SM, where two chunks lose) and the H200 (4.8 TB/s: 36
/// GB/s per SM, where they win); docs/serving.md has the measurements.
/// The Python runtime's auto_kv_splits is this rule; a test checks they
/// agree.
inline int64_t autoKVSplits(int64_t tiles, int64_t queryBlocks,
                            int64_t kvBlocks, int64_t sms, int64_t dramGBps) {
  int64_t slots = sms;
  constexpr int64_t kFilledNum = 4, kFilledDen = 5, kMinBlocks = 2,
                    kWithinPercent = 95, kMaxSplits = 1024,
                    kDecodeSplitWaves = 4, kDecodeSplitGBpsPerSM = 30;
  if (tiles <= 0 || queryBlocks <= 0 || kvBlocks <= 0 || slots <= 0)
    return 1;
  if (tiles * kFilledDen >= slots * kFilledNum) {
    bool decode = queryBlocks == 1;
    bool wantsSecondCTA = dramGBps >= kDecodeSplitGBpsPerSM * sms;
    return decode && wantsSecondCTA && tiles < kDecodeSplitWaves * slots &&
                   kvBlocks >= 2 * kMinBlocks
               ? 2
               : 1;
  }
  int64_t most = std::min(kvBlocks / kMinBlocks, kMaxSplits);
  if (most < 2)
    return 1;
  auto efficiency = [&](int64_t s) {
    int64_t items = tiles * s;
    int64_t waves = (items + slots - 1) / slots;
    return double(items) / double(waves * slots);
  };
  double best = 0;
  for (int64_t s = 1; s <= most; ++s)
    best = std::max(best, efficiency(s));
  for (int64_t s = 1; s <= most; ++s)
    if (efficiency(s) * 100 >= best * kWithinPercent)
      return s;
  return 1;
}

} // namespace mlir::fa::model

#endif // FA_MODEL_KVCHUNK_H
