//===- PackGQA.h - query heads sharing a K/V head in one tile ---*- C++ -*-===//
//
// Part of the MLIR-free model library (include/fa/Model): rules that the
// compiler, the IO reports and both runtimes apply, written once.
//
// Grouped-query attention has G = Hq / Hkv query heads per K/V head. A
// kernel that gives each (query block, query head) its own tile reads
// every K/V block G times, once per query head; at decode (one query per
// sequence) each tile also has one useful row of its B_r. Packing the G
// heads' rows into one tile (FlashAttention-3's PackGQA) reads each K/V
// block once per K/V head and fills G rows of the tile.
//
// At one query a sequence the packing needs no kernel of its own: query
// head h G + g is row g of matrix h, so Q [B, Hq, 1, D] is the view
// [B, Hkv, G, D] (strides: batch, G x head, head) of the same memory, O
// likewise, and the LSE [B, Hq, 1] is [B, Hkv, G]. The kernel then runs as
// multi-head attention over G queries. That is exact only where the kernel
// applies no mask: the G rows are one query, but a mask would see G query
// positions. A KV cache's bottom-right causal mask (and a right reach)
// hides nothing from its one query, the sequence's last position, so a
// caller drops it first (causalMaskIsVacuous) and launches the unmasked
// kernel; a window's left bound and a top-left causal mask depend on the
// query and keep the heads apart.
//
//===----------------------------------------------------------------------===//

#ifndef FA_MODEL_PACKGQA_H
#define FA_MODEL_PACKGQA_H

#include <cstdint>

namespace mlir::fa::model {

/// Whether a causal mask hides nothing from a launch of `queries` queries
/// a sequence: one query at the last key position (`bottomRight`, a KV
/// cache's alignment, with any right reach) sees every key of its
/// sequence. A window bounds it on the left; a top-left mask puts the
/// query at key 0.
inline bool causalMaskIsVacuous(int64_t queries, bool bottomRight,
                                int64_t window) {
  return queries == 1 && bottomRight && window == 0;
}

/// The query heads one tile's rows take at decode: G = qHeads / kvHeads
/// where `queries` is 1, the heads are grouped (G > 1) and the kernel
/// applies no mask (`masked`: causal or a window, which would tell the G
/// rows apart); else 1 (no packing). The launch then presents Q and O as
/// [B, kvHeads, G, D] and the LSE as [B, kvHeads, G].
inline int64_t decodeHeadsPerTile(int64_t queries, int64_t qHeads,
                                  int64_t kvHeads, bool masked) {
  if (queries != 1 || masked || kvHeads <= 0 || qHeads <= kvHeads ||
      qHeads % kvHeads != 0)
    return 1;
  return qHeads / kvHeads;
}

/// The query heads packed a K/V head beyond one query (fagpu's
/// query_group): G = qHeads / kvHeads where the heads are grouped (G a
/// power of two up to 64), the launch has a few queries a sequence -- 2 to
/// kMaxPackedQueries (speculative decoding, small chunks), or one with a
/// mask that tells the rows apart (a window), which decodeHeadsPerTile's
/// views cannot pack -- and the K/V it reads, `kvBytes`, is at least
/// kMinPackedKVBytes; else 0. The kernel then reads Q, O and the LSE packed
/// [B, kvHeads, queries G, D] (row r query r / G of head h G + r mod G),
/// which the caller copies in and out. Past a few queries the tiles fill
/// with one head's queries and the kernel is bound by its MMAs, not by K/V
/// reads; below an L2's worth of K/V (50 MB on the H100 and H200) the G
/// heads' repeated reads of a block come from the L2, and the two copies
/// cost more than the packing saves (docs/serving.md has the measurement).
inline constexpr int64_t kMaxPackedQueries = 16;
inline constexpr int64_t kMinPackedKVBytes = int64_t(64) << 20;
inline int64_t queryGroupFor(int64_t queries, int64_t qHeads, int64_t kvHeads,
                             bool masked, int64_t kvBytes) {
  if (kvHeads <= 0 || qHeads <= kvHeads || qHeads % kvHeads != 0 ||
      kvBytes < kMinPackedKVBytes)
    return 0;
  int64_t group = qHeads / kvHeads;
  if (group > 64 || (group & (group - 1)) != 0)
    return 0;
  if (queries < 1 || queries > kMaxPackedQueries ||
      (queries == 1 && !masked))
    return 0;
  return group;
}

} // namespace mlir::fa::model

#endif // FA_MODEL_PACKGQA_H
