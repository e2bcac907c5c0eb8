//===- Traffic.h - the global-memory traffic of a kernel ------*- C++ -*-===//
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

#ifndef FA_MODEL_TRAFFIC_H
#define FA_MODEL_TRAFFIC_H

#include "fa/Model/BlockRange.h"
#include "fa/Model/KVChunk.h"

#include <algorithm>
#include <cstdint>
#include <list>
#include <optional>
#include <queue>
#include <string>
#include <unordered_map>
#include <vector>

namespace mlir::fa::model {

/// What of a kernel decides its traffic.
struct TrafficKernel {
  int64_t blockR = 0, blockC = 0, headDim = 0, valueHeadDim = 0;
  /// Bytes of a Q, K, V element, and of an O element (2 for e4m3 inputs'
  /// f16/bf16 O).
  int64_t elementBytes = 2, outputBytes = 2;
  bool causal = false, bottomRight = false;
  int64_t window = 0, diagonalOffset = 0;
  /// TMA kernels move whole boxes: a ragged tail's rows past N cross from
  /// L2 too (measured on the H200: N = 1000 moves the bytes of N = 1024).
  /// The mma.sync kernel's cp.async zero-fills them instead (src-size 0),
  /// moving the rows in bounds only (measured: exact at Nq = 333 and 1000).
  bool wholeBoxes = true;
  bool dynamicScheduler = false;
  /// Persistent CTAs that take every R-th tile (R CTAs at once); else each
  /// CTA's next tile is whichever comes next when it frees (the dynamic
  /// scheduler, or a grid of one tile per CTA). For the DRAM model.
  bool staticPersistent = false;
  /// The kernel's code (the cubin's .text), read from DRAM once per
  /// launch; 0 when not known. For the DRAM model.
  int64_t codeBytes = 0;
  bool writesLse = true;
  /// A varlen kernel: the sequences' rows are packed, LSE [H, total_q]
  /// (else [B, H, Nq]); decides where each LSE store lands.
  bool packedSequences = false;
  /// Split-KV: the launch's chunk count (0: not a split kernel). Each
  /// non-empty chunk (mlir::fa::model::kvChunk) loads the tile's Q and its own
  /// blocks; every chunk writes its rows' partial O and LSE in f32; the last
  /// chunk of each warp's 16 rows reads them back and writes O and LSE.
  int64_t kvSplits = 0;
  /// Pack-GQA beyond one query (the schedule's query_group): the launch's
  /// rows are G a query (its shape is Hkv heads of Nq G rows), so a tile's
  /// K/V blocks are those of its queries, rows / G; 0: a row is a query.
  int64_t queryGroup = 0;
};

/// The K/V blocks a tile of rows [qStart, qStart + B_r) of a launch of
/// `nq` rows visits (kvBlockRange), on the tile's queries for a packed
/// kernel: [qStart / G, (qStart + B_r) / G) of nq / G (G divides B_r).
inline KVRange<IntegerArithmetic> tileBlockRange(const TrafficKernel &kernel,
                                                 int64_t qStart, int64_t nq,
                                                 int64_t nk) {
  IntegerArithmetic ints;
  int64_t g = kernel.queryGroup ? kernel.queryGroup : 1;
  return kvBlockRange(ints, qStart / g, nq / g, nk, kernel.blockR / g,
                      kernel.blockC, kernel.causal, kernel.window,
                      kernel.bottomRight, kernel.diagonalOffset);
}

/// The bytes a row of Q, K or V moves from L2: with whole TMA boxes, the
/// columns of the tiles (a head dim padded to whole 128-byte box rows: D =
/// 96 moves D = 128's, like a ragged tail's rows; V's tiles are K's, so V
/// narrower than K moves K's row too, its boxes past Dv included: both
/// measured on the H200, bench/results/2026-12-02-io-check-runtime.md),
/// else the tensor's own.
inline int64_t rowBytes(const TrafficKernel &kernel, int64_t columns) {
  int64_t bytes = columns * kernel.elementBytes;
  if (!kernel.wholeBoxes)
    return bytes;
  int64_t tile = std::max(kernel.headDim, columns) * kernel.elementBytes;
  return (tile + 127) / 128 * 128;
}

/// The bytes the SM -> L2 path moves for the 4-byte LSE stores of `rows`
/// consecutive rows, the first at element `first` of the LSE, written
/// `perStore` consecutive rows at a time: each 32-byte sector such a write
/// touches crosses whole. A warp writes its 16 rows (rows 16w .. 16w + 15
/// of a head) as two 8-row stores issued back to back, which L1 merges
/// where they share a sector, so perStore is 16 there; split-KV's merge
/// writes one row at a time. A head whose rows start off a sector boundary
/// (Nq not a multiple of 8, a varlen sequence anywhere in the batch) moves
/// a sector more per write than its payload.
inline int64_t lseStoreBytes(int64_t first, int64_t rows, int64_t perStore) {
  constexpr int64_t kSector = 32, kLse = 4;
  int64_t bytes = 0;
  for (int64_t r = 0; r < rows; r += perStore) {
    int64_t lo = (first + r) * kLse;
    int64_t hi = (first + std::min(r + perStore, rows)) * kLse;
    bytes += ((hi + kSector - 1) / kSector - lo / kSector) * kSector;
  }
  return bytes;
}

/// lseStoreBytes over `heads` heads of `rows` rows each, head h's first
/// row at element first + h * stride: the heads fall into eight classes by
/// their first row's offset in its sector.
inline int64_t lseHeadsStoreBytes(int64_t first, int64_t heads, int64_t stride,
                                  int64_t rows, int64_t perStore) {
  constexpr int64_t kRowsPerSector = 8;
  int64_t bytes = 0;
  for (int64_t h = 0; h < std::min(heads, kRowsPerSector); ++h) {
    // Heads h, h + 8, ... start at the same offset in their sectors.
    int64_t count = (heads - h + kRowsPerSector - 1) / kRowsPerSector;
    bytes += count * lseStoreBytes((first + h * stride) % kRowsPerSector, rows,
                                   perStore);
  }
  return bytes;
}

/// An attention's shape.
struct TrafficShape {
  int64_t batch = 0, queryHeads = 0, kvHeads = 0, queryLen = 0, keyLen = 0;
};

/// Why the model cannot count `shape` for `kernel` (nullopt if it can), the
/// one check of its inputs that fagpu-io-report, the runtime's
/// faMetadataPredictedBytes and Python's predicted_bytes make: sizes are
/// not negative, K/V heads divide the query heads, tiles are [1, 2^20],
/// windows and offsets the kernels' 2^30 at most, and every byte count it
/// forms -- the FA2 model's Q + (K + V) T_r per head, the heads' products
/// -- fits in 64 bits. Empty shapes (a zero size) are counted: zero.
inline std::optional<std::string> checkTrafficShape(const TrafficKernel &kernel,
                                                    const TrafficShape &shape) {
  const TrafficShape &s = shape;
  for (int64_t v : {s.batch, s.queryHeads, s.kvHeads, s.queryLen, s.keyLen})
    if (v < 0)
      return std::string("the shape's sizes must not be negative");
  if (s.queryHeads > 0 && (s.kvHeads < 1 || s.queryHeads % s.kvHeads != 0))
    return "query heads (" + std::to_string(s.queryHeads) +
           ") must be a multiple of key/value heads (" +
           std::to_string(s.kvHeads) + ")";
  for (int64_t tile : {kernel.blockR, kernel.blockC})
    if (tile < 1 || tile > (int64_t(1) << 20))
      return "tiles must be 1 to 2^20 rows, got " + std::to_string(tile);
  constexpr int64_t kMaxPosition = int64_t(1) << 30; // fa/Model/Positions.h
  if (kernel.window < 0 || kernel.window > kMaxPosition ||
      kernel.diagonalOffset < 0 || kernel.diagonalOffset > kMaxPosition)
    return std::string("windows and diagonal offsets must be 0 to 2^30");
  // The largest count the model forms, in 128-bit arithmetic.
  __int128 rowBytes128 =
      (__int128)(std::max(kernel.headDim, kernel.valueHeadDim) + 128) * 2 *
      std::max<int64_t>(kernel.elementBytes, 4);
  __int128 tiles = (s.queryLen + kernel.blockR - 1) / kernel.blockR;
  __int128 perHead =
      ((__int128)s.queryLen + (__int128)s.keyLen * (tiles + 1) +
       (__int128)s.queryLen * std::max<int64_t>(kernel.kvSplits, 1)) *
      rowBytes128;
  __int128 total = perHead * s.batch * std::max<int64_t>(s.queryHeads, 1);
  if (total >= ((__int128)1 << 62))
    return std::string("the attention's byte counts do not fit in 64 bits");
  return std::nullopt;
}

/// Where a launch's LSE rows lie, in elements: (batch, head) matrix m's row
/// 0 at first + m * headStride; split-KV's partial LSE of chunk c at
/// partialFirst + c * chunkStride + m * headStride. Default (headStride 0):
/// a batch of its own, LSE [B, H, Nq], partials [S, B, H, Nq].
struct LsePlacement {
  int64_t first = 0, headStride = 0, partialFirst = 0, chunkStride = 0;
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
  int64_t reads() const {
    return q + k + v + scheduler + mergeReads + arrivals;
  }
  /// O as payload: every epilogue writes whole 32-byte sectors (the TMA
  /// store, the staged copy's 16-byte pieces of rows, the register
  /// epilogue's quad-transposed 16-byte stores, split-KV's f32 pairs); the
  /// LSE in the sectors its stores touch (lseStoreBytes).
  int64_t writes() const {
    return o + lse + scheduler + partialWrites + arrivals;
  }
};

/// The key rows blocks [first, end) move from L2: whole blocks of B_c with
/// whole boxes, else each block's keys below nk (the last one ragged).
/// Closed form of the sum over the blocks, so the count takes time in the
/// tiles, not tiles x blocks.
inline int64_t blockKeys(const TrafficKernel &kernel, int64_t nk, int64_t first,
                         int64_t end) {
  int64_t bc = kernel.blockC;
  int64_t blocks = std::max<int64_t>(0, end - first);
  if (kernel.wholeBoxes)
    return blocks * bc;
  // Blocks before nk / bc are full; block nk / bc holds the ragged rest
  // (none when bc divides nk); none lies past it.
  int64_t full = nk / bc;
  int64_t keys = std::max<int64_t>(0, std::min(end, full) - first) * bc;
  if (first <= full && full < end)
    keys += nk - full * bc;
  return keys;
}

/// Split-KV's part of one tile's traffic (rows [qStart, qStart + rows)):
/// added to `head`.
inline void splitTileTraffic(const TrafficKernel &kernel, int64_t qStart,
                             int64_t rows, int64_t nq, int64_t nk,
                             KVRange<IntegerArithmetic> range, Traffic &head) {
  IntegerArithmetic ints;
  int64_t br = kernel.blockR, bc = kernel.blockC;
  int64_t d = kernel.headDim, dv = kernel.valueHeadDim;
  int64_t splits = kernel.kvSplits;
  // Row i's visible keys [lo, hi), as the kernel masks them (a packed
  // kernel's row i is query i / G).
  int64_t g = kernel.queryGroup ? kernel.queryGroup : 1;
  int64_t shift = diagonalShift(ints, nq / g, nk, kernel.bottomRight,
                                kernel.diagonalOffset);
  auto visible = [&](int64_t i, int64_t first, int64_t end) {
    int64_t at = i / g + shift, lo = 0, hi = nk;
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
    auto [begin, end] = kvChunk(ints, range.first, range.end, c, splits);
    // Partial O rows in f32 pairs, a quad's 32 bytes a sector; their LSE
    // in kernelTraffic (lseStoreBytes).
    head.partialWrites += rows * dv * 4;
    head.mergeReads += rows * 2 * 32;
    if (begin >= end)
      continue;
    head.q += (kernel.wholeBoxes ? br : rows) * rowBytes(kernel, d);
    int64_t keys = blockKeys(kernel, nk, begin, end);
    head.k += keys * rowBytes(kernel, d);
    head.v += keys * rowBytes(kernel, dv);
    head.blocksVisitedPerHead += end - begin;
    for (int64_t i = qStart; i < qStart + rows; ++i)
      if (visible(i, begin * bc, std::min(end * bc, nk)))
        head.mergeReads += dv * 4;
  }
}

inline Traffic kernelTraffic(const TrafficKernel &kernel,
                             const TrafficShape &shape, LsePlacement lse = {}) {
  int64_t br = kernel.blockR, elt = kernel.elementBytes;
  int64_t d = kernel.headDim, dv = kernel.valueHeadDim;
  int64_t nq = shape.queryLen, nk = shape.keyLen;
  // One (batch, query head): every query tile and the blocks it visits.
  Traffic head;
  head.tilesPerHead = (nq + br - 1) / br;
  for (int64_t i = 0; i < head.tilesPerHead; ++i) {
    int64_t qStart = i * br;
    int64_t rows = kernel.wholeBoxes ? br : std::min(br, nq - qStart);
    KVRange<IntegerArithmetic> range = tileBlockRange(kernel, qStart, nq, nk);
    if (kernel.kvSplits) {
      splitTileTraffic(kernel, qStart, std::min(br, nq - qStart), nq, nk, range,
                       head);
      continue;
    }
    head.q += rows * rowBytes(kernel, d);
    int64_t keys = blockKeys(kernel, nk, range.first, range.end);
    head.k += keys * rowBytes(kernel, d);
    head.v += keys * rowBytes(kernel, dv);
    head.blocksVisitedPerHead += std::max<int64_t>(0, range.end - range.first);
  }
  int64_t heads = shape.batch * shape.queryHeads;
  Traffic total = head;
  total.q *= heads;
  total.k *= heads;
  total.v *= heads;
  total.partialWrites *= heads;
  total.mergeReads *= heads;
  total.arrivals *= heads;
  total.o = heads * nq * dv * kernel.outputBytes;
  if (!lse.headStride)
    lse = {0, nq, 0, heads * nq};
  // Split-KV's merge stores a row's LSE at a time; the other epilogues a
  // warp's 16 rows at a time (lseStoreBytes).
  int64_t perStore = kernel.kvSplits ? 1 : 16;
  total.lse =
      kernel.writesLse
          ? lseHeadsStoreBytes(lse.first, heads, lse.headStride, nq, perStore)
          : 0;
  for (int64_t c = 0; c < kernel.kvSplits; ++c)
    total.partialWrites += lseHeadsStoreBytes(
        lse.partialFirst + c * lse.chunkStride, heads, lse.headStride, nq, 16);
  total.scheduler =
      kernel.dynamicScheduler ? (head.tilesPerHead * heads + 1) * 32 : 0;
  total.fa2Model =
      heads * (nq * d + (nk * d + nk * dv) * head.tilesPerHead) * elt;
  return total;
}

/// One sequence of a batch whose sequences have lengths of their own: a KV
/// cache's (kv_lengths: every sequence's Nq queries, its own keys) or a
/// varlen batch's (cu_seqlens_q / cu_seqlens_k).
struct SequenceLengths {
  int64_t queryLen = 0, keyLen = 0;
};

/// checkTrafficShape for a batch of sequences of their own lengths
/// (sequencesTraffic's input): each sequence, and their sum.
inline std::optional<std::string>
checkSequencesTraffic(const TrafficKernel &kernel, int64_t queryHeads,
                      int64_t kvHeads, const SequenceLengths *sequences,
                      int64_t count) {
  if (count < 0)
    return std::string("the sequence count must not be negative");
  int64_t queries = 0, keys = 0;
  for (int64_t i = 0; i < count; ++i) {
    const SequenceLengths &seq = sequences[i];
    if (std::optional<std::string> why = checkTrafficShape(
            kernel, {1, queryHeads, kvHeads, seq.queryLen, seq.keyLen}))
      return "sequence " + std::to_string(i) + ": " + *why;
    // Past 2^40 rows, the sums below would be the first to wrap.
    if (seq.queryLen > (int64_t(1) << 40) - queries ||
        seq.keyLen > (int64_t(1) << 40) - keys)
      return std::string("the sequences' lengths add up past 2^40 rows");
    queries += seq.queryLen;
    keys += seq.keyLen;
  }
  // Every sequence's counts at once: bounded by one sequence of the summed
  // lengths, whose tiles visit at least as many blocks.
  return checkTrafficShape(kernel, {1, queryHeads, kvHeads, queries, keys});
}

/// The traffic of such a batch: each sequence as a batch of one of its own
/// lengths, since the kernels tile, mask and box each sequence on its own
/// (a varlen sequence's Q box still moves whole B_r rows, reaching into
/// the next sequence's; a KV cache's last block moves whole B_c rows of
/// the cache, or whole pages), and the dynamic scheduler's atomics once for
/// all the tiles taken. A sequence with no queries moves nothing; one with
/// no keys loads its tiles' Q (split-KV: none) and writes O and LSE.
inline Traffic sequencesTraffic(const TrafficKernel &kernel, int64_t queryHeads,
                                int64_t kvHeads,
                                const SequenceLengths *sequences,
                                int64_t count) {
  TrafficKernel perSequence = kernel;
  perSequence.dynamicScheduler = false;
  Traffic total;
  int64_t tiles = 0, totalQueries = 0;
  for (int64_t s = 0; s < count; ++s)
    totalQueries += sequences[s].queryLen;
  for (int64_t s = 0, rowsBefore = 0; s < count;
       rowsBefore += sequences[s].queryLen, ++s) {
    if (sequences[s].queryLen == 0)
      continue;
    // Varlen: LSE [H, total_q]; a KV cache's sequences: [B, H, Nq], its
    // partials [S, B, H, Nq].
    int64_t nq = sequences[s].queryLen;
    LsePlacement lse =
        kernel.packedSequences
            ? LsePlacement{rowsBefore, totalQueries, rowsBefore,
                           queryHeads * totalQueries}
            : LsePlacement{s * queryHeads * nq, nq, s * queryHeads * nq,
                           count * queryHeads * nq};
    Traffic t = kernelTraffic(
        perSequence, {1, queryHeads, kvHeads, nq, sequences[s].keyLen}, lse);
    total.q += t.q;
    total.k += t.k;
    total.v += t.v;
    total.o += t.o;
    total.lse += t.lse;
    total.partialWrites += t.partialWrites;
    total.mergeReads += t.mergeReads;
    total.arrivals += t.arrivals;
    total.fa2Model += t.fa2Model;
    total.blocksVisitedPerHead += t.blocksVisitedPerHead;
    tiles += t.tilesPerHead * queryHeads;
  }
  total.scheduler = kernel.dynamicScheduler ? (tiles + 1) * 32 : 0;
  return total;
}

/// What the DRAM model needs of the machine: how many CTAs run at once, and
/// the L2 they share.
struct TrafficMachine {
  int64_t sms = 0;
  int64_t ctasPerSM = 1;
  int64_t l2Bytes = 0;
};

/// The part of the L2 that holds K/V blocks shared by all SMs: the H200's
/// L2 is two partitions, and a line read by SMs on both sides is held in
/// both, so shared data sees about half of it. Fitted, with the fraction a
/// little above one half, on the H200's ncu DRAM counts
/// (bench/results/2026-12-02-io-check-dram-lru.md).
inline constexpr double kSharedL2Fraction = 0.55;

/// DRAM bytes of a launch under the L2 model below.
struct DramTraffic {
  int64_t reads = 0, writes = 0;
  /// Of the reads: Q, K and V, split-KV partials (each way), the code.
  int64_t q = 0, kv = 0, partials = 0, code = 0;
  int64_t residentCTAs = 0, workItems = 0, capacity = 0;
  /// Distinct K/V bytes the launch touches (each from DRAM once at best),
  /// and the K/V block reads the simulation replayed.
  int64_t kvOnce = 0, blockReads = 0;
  /// False where the launch is past the replay's budget
  /// (kMaxReplayedBlockReads): no DRAM counts then.
  bool modelled = true;
};

/// The most block reads (and K/V blocks) the DRAM model replays: its time
/// and memory grow with them, about a second per 2^24 reads here.
inline constexpr int64_t kMaxReplayedBlockReads = int64_t(1) << 26;

/// A least-recently-used cache of `capacity` bytes over keyed entries:
/// access() says whether the entry was held, and holds it.
class LruBytes {
public:
  explicit LruBytes(int64_t capacity) : capacity(capacity) {}
  bool access(int64_t key, int64_t bytes) {
    auto it = where.find(key);
    bool held = it != where.end();
    if (held)
      order.splice(order.begin(), order, it->second);
    else {
      order.push_front({key, bytes});
      where[key] = order.begin();
      used += bytes;
    }
    while (used > capacity && order.size() > 1) {
      used -= order.back().second;
      where.erase(order.back().first);
      order.pop_back();
    }
    return held;
  }

private:
  int64_t capacity, used = 0;
  std::list<std::pair<int64_t, int64_t>> order;
  std::unordered_map<int64_t, std::list<std::pair<int64_t, int64_t>>::iterator>
      where;
};

/// The L2-aware DRAM model: the launch replayed on an LRU cache of the
/// shared L2 (kSharedL2Fraction of it).
///   * Work items (a query tile, or a tile's K/V chunk with split-KV) in
///     the kernels' order: a K/V head's query heads next to each other,
///     each head's query blocks next to each other (causal: longest
///     first), chunk-major for a split grid (its y dimension).
///   * R = SMs x CTAs per SM run at once. A static persistent CTA r takes
///     items r, r + R, ...; the dynamic scheduler and a grid of one item
///     per CTA give the next item to the CTA that frees first.
///   * Time advances one step per K/V block: each CTA reads its item's Q
///     when it starts, one block per step, and writes its O when done.
///     CTAs reading the same block at about the same time share one DRAM
///     read; a block comes back from DRAM when more than the cache's bytes
///     of other blocks, Q and O were touched since its last read.
///   * DRAM moves only real rows (a TMA box's rows past N are zero-filled
///     by the TMA unit, not read). Split-KV partials stay in L2 when they
///     fit (written, read back and overwritten before eviction), else they
///     cross twice. The kernel's code is read once (`codeBytes`, when the
///     cubin is known). The tile and arrival counters are a few sectors.
inline DramTraffic dramTraffic(const TrafficKernel &kernel,
                               const TrafficShape &shape,
                               const TrafficMachine &machine) {
  int64_t br = kernel.blockR, bc = kernel.blockC, elt = kernel.elementBytes;
  int64_t d = kernel.headDim, dv = kernel.valueHeadDim;
  int64_t nq = shape.queryLen, nk = shape.keyLen;
  int64_t group = shape.queryHeads / shape.kvHeads;
  int64_t groups = shape.batch * shape.kvHeads;
  int64_t tilesPerHead = (nq + br - 1) / br;
  int64_t blocksPerHead = (nk + bc - 1) / bc;
  int64_t chunks = std::max<int64_t>(1, kernel.kvSplits);
  IntegerArithmetic ints;
  DramTraffic t;

  // Work item i: chunk-major, then K/V head group, query head, query block.
  int64_t tilesPerChunk = groups * group * tilesPerHead;
  t.workItems = tilesPerChunk * chunks;
  // Nothing to replay (an empty shape), or more than the replay's budget:
  // it steps once per block read and keeps a flag per K/V block.
  if (t.workItems == 0)
    return t;
  if ((__int128)t.workItems * std::max<int64_t>(1, blocksPerHead) >
          kMaxReplayedBlockReads ||
      (__int128)groups * blocksPerHead > kMaxReplayedBlockReads) {
    t.modelled = false;
    return t;
  }
  struct Item {
    int64_t group, first, end, rows;
  };
  auto item = [&](int64_t i) {
    int64_t chunk = i / tilesPerChunk, tile = i % tilesPerChunk;
    int64_t g = tile / (group * tilesPerHead);
    int64_t qBlock = tile % tilesPerHead;
    if (kernel.causal)
      qBlock = tilesPerHead - 1 - qBlock;
    KVRange<IntegerArithmetic> r = tileBlockRange(kernel, qBlock * br, nq, nk);
    if (kernel.kvSplits) {
      auto [begin, end] = kvChunk(ints, r.first, r.end, chunk, chunks);
      r = {begin, end};
    }
    return Item{g, r.first, r.end, std::min(br, nq - qBlock * br)};
  };
  t.residentCTAs = std::max<int64_t>(
      1, std::min(t.workItems, machine.sms * machine.ctasPerSM));
  t.capacity = int64_t(kSharedL2Fraction * double(machine.l2Bytes));
  LruBytes cache(t.capacity);
  // Q and O entries are touched once: keys past the K/V blocks'.
  int64_t onceKey = groups * blocksPerHead;
  std::vector<bool> seen(onceKey, false);

  // A CTA's state: its item, the next block, the time of its next step.
  struct Cta {
    int64_t time = 0, item = -1, block = 0;
    Item work{};
  };
  std::vector<Cta> ctas(t.residentCTAs);
  int64_t nextItem = 0;
  using Event = std::pair<int64_t, int64_t>; // (time, CTA)
  std::priority_queue<Event, std::vector<Event>, std::greater<Event>> events;
  auto start = [&](int64_t c, int64_t i) {
    Cta &cta = ctas[c];
    cta.item = i;
    cta.work = item(i);
    cta.block = cta.work.first;
    int64_t qBytes = cta.work.rows * d * elt;
    t.q += qBytes;
    cache.access(onceKey++, qBytes);
    events.push({cta.time, c});
  };
  for (int64_t c = 0; c < t.residentCTAs; ++c)
    start(c, nextItem++);
  while (!events.empty()) {
    auto [time, c] = events.top();
    events.pop();
    Cta &cta = ctas[c];
    cta.time = time + 1;
    if (cta.block < cta.work.end) {
      int64_t j = cta.block++;
      int64_t rows = std::min(bc, nk - j * bc);
      int64_t bytes = rows * (d + dv) * elt;
      int64_t key = cta.work.group * blocksPerHead + j;
      ++t.blockReads;
      if (!seen[key]) {
        seen[key] = true;
        t.kvOnce += bytes;
      }
      if (!cache.access(key, bytes))
        t.kv += bytes;
      events.push({cta.time, c});
      continue;
    }
    // The item is done: its O, then the CTA's next item.
    cache.access(onceKey++, cta.work.rows * dv * kernel.outputBytes);
    int64_t next =
        kernel.staticPersistent ? cta.item + t.residentCTAs : nextItem;
    if (next < t.workItems) {
      if (!kernel.staticPersistent)
        ++nextItem;
      start(c, next);
    }
  }
  int64_t heads = shape.batch * shape.queryHeads;
  // Split-KV reloads a tile's Q per chunk through L2: from DRAM once.
  t.q = std::min(t.q, heads * nq * d * elt);
  if (kernel.kvSplits) {
    int64_t partials = kernel.kvSplits * heads * nq * (dv + 1) * 4;
    t.partials = partials > machine.l2Bytes ? partials : 0;
  }
  t.code = kernel.codeBytes;
  t.reads = t.q + t.kv + t.partials + t.code;
  t.writes = heads * nq * dv * kernel.outputBytes +
             (kernel.writesLse ? heads * nq * 4 : 0) + t.partials;
  return t;
}

} // namespace mlir::fa::model

#endif // FA_MODEL_TRAFFIC_H
