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

#include <algorithm>
#include <cstdint>
#include <limits>

namespace mlir::fagpu {

/// What of a kernel decides its traffic.
struct TrafficKernel {
  int64_t blockR = 0, blockC = 0, headDim = 0, valueHeadDim = 0;
  /// Bytes of a Q, K, V element, and of an O element (2 for e4m3 inputs'
  /// f16/bf16 O).
  int64_t elementBytes = 2, outputBytes = 2;
  bool causal = false, bottomRight = false;
  int64_t window = 0;
  /// TMA kernels move whole boxes: a ragged tail's rows past N cross from
  /// L2 too (measured on the H200: N = 1000 moves the bytes of N = 1024).
  /// The sm_80 kernel's cp.async zero-fills them instead (not measured).
  bool wholeBoxes = true;
  bool dynamicScheduler = false;
  bool writesLse = true;
  /// A varlen kernel: the sequences' rows are packed, LSE [H, total_q]
  /// (else [B, H, Nq]); decides where each LSE store lands.
  bool packedSequences = false;
  /// Split-KV: the launch's chunk count (0: not a split kernel). Each
  /// non-empty chunk (fa::kvChunk) loads the tile's Q and its own blocks;
  /// every chunk writes its rows' partial O and LSE in f32; the last chunk
  /// of each warp's 16 rows reads them back and writes O and LSE.
  int64_t kvSplits = 0;
};

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
    bytes += count * lseStoreBytes((first + h * stride) % kRowsPerSector,
                                   rows, perStore);
  }
  return bytes;
}

/// An attention's shape.
struct TrafficShape {
  int64_t batch = 0, queryHeads = 0, kvHeads = 0, queryLen = 0, keyLen = 0;
};

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
  int64_t reads() const { return q + k + v + scheduler + mergeReads + arrivals; }
  /// O as payload (the TMA store and the staged copy write whole sectors;
  /// the register epilogue's 4-byte stores leave half-written sectors,
  /// which the hardware moves whole: not modelled), the LSE in the sectors
  /// its stores touch (lseStoreBytes).
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
  int64_t br = kernel.blockR, bc = kernel.blockC;
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
    // Partial O rows in f32 pairs, a quad's 32 bytes a sector; their LSE
    // in kernelTraffic (lseStoreBytes).
    head.partialWrites += rows * dv * 4;
    head.mergeReads += rows * 2 * 32;
    if (begin >= end)
      continue;
    head.q += (kernel.wholeBoxes ? br : rows) * rowBytes(kernel, d);
    for (int64_t j = begin; j < end; ++j) {
      int64_t cols = kernel.wholeBoxes ? bc : std::min(bc, nk - j * bc);
      head.k += cols * rowBytes(kernel, d);
      head.v += cols * rowBytes(kernel, dv);
      ++head.blocksVisitedPerHead;
    }
    for (int64_t i = qStart; i < qStart + rows; ++i)
      if (visible(i, begin * bc, std::min(end * bc, nk)))
        head.mergeReads += dv * 4;
  }
}

inline Traffic kernelTraffic(const TrafficKernel &kernel,
                             const TrafficShape &shape,
                             LsePlacement lse = {}) {
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
    head.q += rows * rowBytes(kernel, d);
    for (int64_t j = range.first; j < range.end; ++j) {
      int64_t cols = kernel.wholeBoxes ? bc : std::min(bc, nk - j * bc);
      head.k += cols * rowBytes(kernel, d);
      head.v += cols * rowBytes(kernel, dv);
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
  total.o = heads * nq * dv * kernel.outputBytes;
  if (!lse.headStride)
    lse = {0, nq, 0, heads * nq};
  // Split-KV's merge stores a row's LSE at a time; the other epilogues a
  // warp's 16 rows at a time (lseStoreBytes).
  int64_t perStore = kernel.kvSplits ? 1 : 16;
  total.lse = kernel.writesLse ? lseHeadsStoreBytes(lse.first, heads,
                                                    lse.headStride, nq,
                                                    perStore)
                               : 0;
  for (int64_t c = 0; c < kernel.kvSplits; ++c)
    total.partialWrites +=
        lseHeadsStoreBytes(lse.partialFirst + c * lse.chunkStride, heads,
                           lse.headStride, nq, 16);
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

/// The traffic of such a batch: each sequence as a batch of one of its own
/// lengths, since the kernels tile, mask and box each sequence on its own
/// (a varlen sequence's Q box still moves whole B_r rows, reaching into
/// the next sequence's; a KV cache's last block moves whole B_c rows of
/// the cache, or whole pages), and the dynamic scheduler's atomics once for
/// all the tiles taken. A sequence with no queries moves nothing; one with
/// no keys loads its tiles' Q (split-KV: none) and writes O and LSE.
inline Traffic sequencesTraffic(const TrafficKernel &kernel,
                                int64_t queryHeads, int64_t kvHeads,
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
    Traffic t = kernelTraffic(perSequence,
                              {1, queryHeads, kvHeads, nq,
                               sequences[s].keyLen},
                              lse);
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

/// DRAM bytes of a launch under the L2 model below.
struct DramTraffic {
  int64_t reads = 0, writes = 0;
  /// Of the reads: Q, K and V, split-KV partials (each way).
  int64_t q = 0, kv = 0, partials = 0;
  int64_t residentCTAs = 0, tilesPerGroup = 0;
  int64_t kvBytesPerGroup = 0, workingSet = 0;
  /// K/V bytes if every re-read across waves hits, and if none does; the
  /// fraction of the difference that comes from DRAM.
  int64_t kvOnce = 0, kvEveryWave = 0;
  double missFraction = 0;
};

/// The L2-aware DRAM model. The launch's tiles run in their decoder's order
/// (a K/V head's query heads next to each other, each head's query blocks
/// next to each other), R = SMs x CTAs per SM at a time, so tile t runs in
/// wave t / R. The T = T_r x (Hq / Hkv) tiles that read one K/V head (a
/// "group") are consecutive.
///   * Compulsory: Q, read by its one tile; O and LSE written once.
///   * K/V: the tiles of one wave read a block at about the same time, so
///     the first brings it from DRAM and the others hit in L2. Across waves
///     a group's blocks hit or miss: between kvOnce (each visited block of
///     a group from DRAM once) and kvEveryWave (every wave that reads the
///     group brings its blocks again) by the miss fraction
///       m = clamp((W - L2 / 4) / (L2 / 4), 0, 1),
///     W the K/V bytes in flight: min(groups, 1 + R / T) groups of
///     Nk (D + Dv) bytes, three quarters of it under a causal mask (its
///     tiles stop at the diagonal). Fitted on the H200 (60 MiB of L2):
///     working sets to 15 MiB are read once, from 30 MiB every wave (the
///     L2 is two partitions, and lines are not all kept to the last).
///   * Split-KV partials stay in L2 when they fit (written, read back and
///     overwritten before eviction), else they cross twice.
/// DRAM moves only the real rows: a TMA box's rows past N are zero-filled
/// by the TMA unit, not read. The dynamic scheduler's counter and the
/// arrival counters are a few sectors: not counted.
inline DramTraffic dramTraffic(const TrafficKernel &kernel,
                               const TrafficShape &shape,
                               const TrafficMachine &machine) {
  int64_t br = kernel.blockR, bc = kernel.blockC, elt = kernel.elementBytes;
  int64_t d = kernel.headDim, dv = kernel.valueHeadDim;
  int64_t nq = shape.queryLen, nk = shape.keyLen;
  int64_t group = shape.queryHeads / shape.kvHeads;
  int64_t groups = shape.batch * shape.kvHeads;
  int64_t tilesPerHead = (nq + br - 1) / br;
  DramTraffic t;
  t.tilesPerGroup = tilesPerHead * group;
  int64_t tiles = t.tilesPerGroup * groups;
  t.residentCTAs =
      std::max<int64_t>(1, std::min(tiles, machine.sms * machine.ctasPerSM));
  t.kvBytesPerGroup = nk * (d + dv) * elt;
  double inFlight =
      std::min<double>(groups, 1.0 + double(t.residentCTAs) / t.tilesPerGroup);
  t.workingSet =
      int64_t(inFlight * t.kvBytesPerGroup * (kernel.causal ? 0.75 : 1.0));
  double quarter = machine.l2Bytes / 4.0;
  t.missFraction =
      std::clamp((double(t.workingSet) - quarter) / quarter, 0.0, 1.0);

  // The K/V bytes of blocks [first, end).
  auto blockBytes = [&](int64_t first, int64_t end) {
    int64_t rows = std::max<int64_t>(0, std::min(end * bc, nk) - first * bc);
    return rows * (d + dv) * elt;
  };
  IntegerArithmetic ints;
  // Tile i of the group (the decoder's order: causal runs a head's longest
  // query block first) visits blocks range.first .. range.end - 1.
  auto rangeOf = [&](int64_t i) {
    int64_t qBlock = i % tilesPerHead;
    if (kernel.causal)
      qBlock = tilesPerHead - 1 - qBlock;
    return kvBlockRange(ints, qBlock * br, nq, nk, br, bc, kernel.causal,
                        kernel.window, kernel.bottomRight);
  };
  for (int64_t g = 0; g < groups; ++g) {
    int64_t begin = g * t.tilesPerGroup, end = begin + t.tilesPerGroup;
    // The union of the blocks visited by the tiles of [from, to) (each
    // tile's range is an interval; the masks make them overlap).
    auto unionBytes = [&](int64_t from, int64_t to) {
      int64_t lo = std::numeric_limits<int64_t>::max(), hi = 0;
      for (int64_t tile = from; tile < to; ++tile) {
        KVRange<IntegerArithmetic> r = rangeOf(tile - begin);
        if (r.first < r.end) {
          lo = std::min(lo, r.first);
          hi = std::max(hi, r.end);
        }
      }
      return lo < hi ? blockBytes(lo, hi) : 0;
    };
    t.kvOnce += unionBytes(begin, end);
    for (int64_t w = begin / t.residentCTAs; w * t.residentCTAs < end; ++w)
      t.kvEveryWave += unionBytes(std::max(begin, w * t.residentCTAs),
                                  std::min(end, (w + 1) * t.residentCTAs));
  }
  t.kv = t.kvOnce + int64_t(t.missFraction * (t.kvEveryWave - t.kvOnce));
  int64_t heads = shape.batch * shape.queryHeads;
  t.q = heads * nq * d * elt;
  if (kernel.kvSplits) {
    int64_t partials = kernel.kvSplits * heads * nq * (dv + 1) * 4;
    t.partials = partials > machine.l2Bytes ? partials : 0;
  }
  t.reads = t.q + t.kv + t.partials;
  t.writes = heads * nq * dv * kernel.outputBytes +
             (kernel.writesLse ? heads * nq * 4 : 0) +
             t.partials;
  return t;
}

} // namespace mlir::fagpu

#endif // FA_DIALECT_FAGPU_IR_TRAFFIC_H
