//===- TMAKernel.h - what the TMA-fed kernels (sm_90a, sm_100a) share -*- C++
//-*-===//
//
// The Hopper and Blackwell kernels are fed the same way: one CTA per
// (query block, head) tile, Q/K/V read by TMA (cp.async.bulk.tensor) into
// 128-byte-swizzled shared memory, every stage guarded by mbarriers, and
// the three CUtensorMaps passed by value as __grid_constant__ parameters.
// This header holds that common part: the kernel signature and shared-
// memory base, mbarrier waits, TMA tile loads, the shared-memory matrix
// descriptors of the swizzled tiles, the tile decoder (which K/V blocks a
// query block visits under causal and window masks), and the host side of
// the launch (tensor-map encoding + gpu.launch_func).
//
// Swizzled tiles: a tile of R rows x D columns is stored as D / 64 column
// blocks of R rows x 128 B, each 8-row group an atom of 1 KiB whose 16-byte
// chunks are XORed with (row mod 8) -- what the TMA writes with
// CU_TENSOR_MAP_SWIZZLE_128B and what wgmma/tcgen05 read with the 128-B
// swizzle mode. Matrix descriptors (both generations, 64 bits):
//   bits  0-13 start address >> 4      bits 16-29 leading byte offset >> 4
//   bits 32-45 stride byte offset >> 4 + a generation-specific format
//   (sm_90a: bits 62-63 = 1 for 128 B; sm_100a: bits 46-48 = 0b001
//   version, bits 61-63 = 2 for 128 B).
// K-major (Q, K): 8-row groups 1024 B apart (stride), k-steps of 16
// elements advance the start by 32 B inside the 128-B row, and by a column
// block past 64 elements. MN-major (V, transposed): 8-key groups 1024 B
// apart (stride), 64-column blocks R * 128 B apart (leading).
//
//===----------------------------------------------------------------------===//

#ifndef FA_LIB_CONVERSION_COMMON_TMAKERNEL_H
#define FA_LIB_CONVERSION_COMMON_TMAKERNEL_H

#include "Launch.h"
#include "OnlineSoftmax.h"

#include "fa/Dialect/FAGPU/IR/SharedMemory.h"
#include "fa/Model/BlockRange.h"

#include "mlir/Dialect/GPU/IR/GPUDialect.h"
#include "mlir/Dialect/MemRef/IR/MemRef.h"
#include "llvm/ADT/StringMap.h"

#include <array>

namespace mlir::fa {

constexpr int64_t kSwizzleBytes = fagpu::kMaxSwizzleBytes; // one swizzled row

/// The work of one CTA: B_r query rows of one (batch, head) and the K/V
/// blocks they visit.
struct AttentionTile {
  Value id; // position in the head-major order of the launch's tiles
  Value qStart, qMatrix, kvMatrix;
  Value batch, qHead, kvHead;               // qMatrix = batch * Hq + qHead
  Value firstBlock, unmaskedEnd, numBlocks; // K/V blocks visited
  // A mask_mod's full blocks [fullFirst, fullEnd): its mask lets every key
  // through to every row there (null without a mask_mod's key ranges).
  Value fullFirst, fullEnd;
  Value nk; // the keys of the tile's sequence: kv_lengths[batch], or Nk
  Value nq; // the queries of the tile's sequence: Nq, or a varlen one's
  // A varlen batch: where the sequence's query and key rows start in the
  // packed tensors (batch row 0); 0 otherwise.
  Value qBase, kBase;
};

class TMAKernelEmitter : public SoftmaxEmitter {
public:
  TMAKernelEmitter(OpBuilder &b, Location loc, bool bf16,
                   const SoftmaxConfig &config, int64_t headDim, int64_t blockR,
                   int64_t blockC)
      : SoftmaxEmitter(b, loc, bf16, config), headDim(headDim), blockR(blockR),
        blockC(blockC) {}

protected:
  /// Creates the kernel `name` in `module` with the TMA kernels' signature
  /// -- q, k, v tensor maps (CUtensorMap, 128 B, byval + grid_constant), o,
  /// lse, Nq, Nk, Hq, Hkv, scale_log2, B, and with `tileCounter` a u32
  /// counter in global memory for a dynamic tile scheduler -- and its entry
  /// block; with `oTensorMap` o is a tensor map too (for TMA stores). Sets
  /// the 1 KiB-aligned dynamic shared-memory base and the scalar
  /// parameters. The builder is left at the start of the entry block.
  LLVM::LLVMFuncOp beginKernel(gpu::GPUModuleOp module, StringRef name,
                               int64_t threads, int64_t ctasPerSM,
                               ArrayRef<fagpu::KernelParam> abi);

  /// The dynamic shared memory `smemGlobal`, aligned to the 1 KiB swizzle
  /// atom.
  Value alignedSharedBase(LLVM::GlobalOp smemGlobal) {
    Value raw = LLVM::AddressOfOp::create(b, loc, smemGlobal);
    Value rawAddress = LLVM::PtrToIntOp::create(b, loc, i32, raw);
    return gep(sharedPtr, b.getI8Type(), raw, alignmentPad(rawAddress));
  }

  /// Bytes from a shared address up to the next 1 KiB swizzle atom.
  Value alignmentPad(Value address) {
    return arith::AndIOp::create(b, loc, sub(c32(0), address), c32(1023));
  }

  /// How far `config`'s masks move the diagonal for a tile of `keys` keys
  /// and `queries` queries (mlir::fa::model::diagonalShift; null when they do
  /// not).
  Value diagonalShift(const SoftmaxConfig &config, Value keys, Value queries);

  /// The queries of `rows` tile rows: rows / G with pack-GQA beyond one
  /// query (fagpu.schedule's query_group, a power of two), else rows.
  Value queriesOfRows(const SoftmaxConfig &config, Value rows);

  /// Element `index` of the i32 array at global pointer `base` (kv_lengths,
  /// the block table): read-only for the kernel's lifetime.
  Value loadGlobalI32(Value base, Value index);

  /// Query blocks of `rows` query rows (ceil(rows / B_r)).
  Value queryBlocksOf(Value rows) {
    return divu(add(rows, c32(blockR - 1)), c32(blockR));
  }
  /// Query rows of varlen sequence `seq`, from the prefix sums.
  Value sequenceLength(Value seq) {
    return sub(loadGlobalI32(cuSeqlensQPtr, add(seq, c32(1))),
               loadGlobalI32(cuSeqlensQPtr, seq));
  }
  /// Query blocks per head, and (query block, head) tiles of the launch.
  Value queryBlocks() { return queryBlocksOf(nq); }
  Value tileCount() {
    if (varlenRealTiles)
      return varlenTileCount;
    return mul(queryBlocks(), mul(batches, hq));
  }
  /// Persistent varlen kernels: deal real tiles only, their count summed
  /// once at the kernel's start (one pass over the prefix sums), not at
  /// every use (the loop bounds, each fetch of the dynamic scheduler).
  void dealVarlenRealTiles() {
    varlenRealTiles = true;
    varlenTileCount = varlenTiles(Value()).total;
  }

  /// A varlen batch dealt by real tiles (persistent CTAs): sequence b has
  /// ceil(len_b / B_r) query blocks for each of the Hq heads, and its tiles
  /// follow the sequences before it, so a CTA never draws a tile past its
  /// sequence's end (the one-tile grid covers the longest sequence's
  /// blocks for every sequence instead). `tileId` (null: only the total)
  /// lies in sequence `batch`, at `local` of its `blocks` x Hq tiles.
  /// One pass over the B + 1 prefix sums (O(B) loads, from L1 after the
  /// first tile).
  struct VarlenTile {
    Value total, batch, local, blocks;
  };
  VarlenTile varlenTiles(Value tileId);

  /// varlenTiles from a cursor (cursorSeq, cursorPrefix: a sequence at or
  /// before `tileId`'s, and the tiles before it): it steps forward to the
  /// sequence holding `tileId` and leaves the cursor there. O(1) a tile
  /// amortised for a caller whose tile ids only grow.
  VarlenTile cursorVarlenTiles(Value tileId);

  /// varlenTiles by a whole warp (every lane converged; `lane` its lane
  /// id), 32 sequences a pass: lane i loads sequence 32 c + i's length,
  /// a warp scan (five shuffles) gives each lane its sequence's tile range,
  /// and a ballot finds the lane whose range holds `tileId`. The B loads
  /// are issued at once instead of one per iteration of a dependent loop,
  /// which the consumers ran before every tile (O(B) dependent loads a
  /// warp; bench/results/2026-12-03-varlen-warp-search.md).
  VarlenTile warpVarlenTiles(Value tileId, Value lane);

  // Shared memory, all offsets from the 1 KiB-aligned base.
  Value sharedAt(Value byteOffset) {
    return gep(sharedPtr, b.getI8Type(), smem, byteOffset);
  }
  Value sharedAt(int64_t byteOffset) { return sharedAt(c32(byteOffset)); }

  /// The aligned shared base, read from the symbol where it is used. A
  /// side-effecting `mov.u32 %r, fa_smem` is neither hoisted nor merged by
  /// LLVM, so ptxas sees the address next to each wgmma. Held in one
  /// register across the role branch and the loops, it made ptxas build
  /// every descriptor derived from it in vector registers and move them
  /// to uniform ones (R2UR) before each wgmma.
  Value localSmemAddress();

  void waitBarrier(Value bar, Value parity) {
    NVVM::MBarrierTryWaitParityOp::create(b, loc, bar, parity, c32(0x989680));
  }
  /// The producer's arrival on a "full" barrier, announcing the bytes the
  /// TMA will deliver.
  void expectBytes(Value bar, int64_t bytes) {
    NVVM::MBarrierArriveExpectTxOp::create(b, loc, Type(), bar, c32(bytes),
                                           NVVM::MemScopeKind::CTA, false,
                                           Value());
  }

  /// Brings the three tensor maps into the descriptor cache before the
  /// first TMA needs them (one thread, at the start of the kernel).
  void prefetchTensorMaps();

  /// A tensor map's coordinates of column `col`, row `row` of the matrix
  /// given by `matrixCoords` (its matrix, or its head and batch).
  SmallVector<Value> mapCoordinates(int64_t col, Value row,
                                    ValueRange matrixCoords) {
    SmallVector<Value> coords = {c32(col), row};
    llvm::append_range(coords, matrixCoords);
    return coords;
  }

  /// The TMA loads of one tile: D / 64 boxes of 64 columns x rows, each
  /// into its own swizzled column block, completing on `bar`. With
  /// `tileRows` (> rows) the boxes fill rows firstRow .. firstRow + rows - 1
  /// of a tile of that many rows (a K/V block gathered from several pages);
  /// firstRow is a multiple of 8, so that the 128-byte swizzle, whose
  /// pattern repeats every 8 rows (1 KiB), lands each row where the MMA's
  /// descriptors expect it.
  /// `column` (default 0) is the map's first column: a V^T tile of e4m3
  /// keys starts at its block's first key. A tile of a narrower `swizzle`
  /// (bytes) takes boxes that wide, one per column block.
  void loadTile(Value map, Value tileOffset, int64_t rows, Value row,
                ValueRange matrixCoords, Value bar, int64_t firstRow = 0,
                int64_t tileRows = 0, Value column = Value(),
                int64_t swizzle = kSwizzleBytes);

  /// The TMA store of one 64-row block of O: D / 64 boxes of 64 columns x
  /// 64 rows from the swizzled column blocks at `tileOffset` (`blockStride`
  /// bytes apart) to rows `row`.. of the matrix given by `matrixCoords`;
  /// rows past Nq are clipped by the tensor map.
  void storeRowBlock(Value tileOffset, int64_t blockStride, Value row,
                     ValueRange matrixCoords);

  /// Matrix descriptor of the swizzled operand at `byteOffset`; `format`
  /// holds the generation-specific bits (see the file comment).
  Value descriptor(Value byteOffset, int64_t leadingBytes, int64_t strideBytes,
                   int64_t format);
  /// K-major operand (Q, K, or e4m3's V^T) of `rows` rows whose column
  /// blocks are `swizzle` bytes wide: the k-step `kk` of 32 bytes (16
  /// 16-bit or 32 e4m3 elements), swizzle / 32 of them per column block;
  /// 8-row groups are 8 * swizzle bytes apart (the stride).
  Value kMajorDescriptor(Value tileOffset, int64_t rows, int64_t kk,
                         int64_t format, int64_t swizzle = kSwizzleBytes) {
    int64_t steps = swizzle / 32;
    int64_t offset = (kk / steps) * rows * swizzle + (kk % steps) * 32;
    return descriptor(add(tileOffset, c32(offset)), 16, 8 * swizzle, format);
  }
  /// MN-major V tile: keys 16 kk .. 16 kk + 15, all D columns.
  Value valueDescriptor(Value tileOffset, int64_t kk, int64_t format) {
    return descriptor(add(tileOffset, c32(kk * 16 * kSwizzleBytes)),
                      blockC * kSwizzleBytes, 1024, format);
  }

  /// The tile `tileId` of a grid with query blocks fastest, then heads,
  /// then batches.
  AttentionTile decodeTile(Value tileId);

  int64_t headDim, blockR, blockC;
  /// Bytes of the elements the tiles hold: 2 (f16, bf16) or 1 (e4m3).
  int64_t elementBytes = 2;
  /// Elements in a 128-byte row of a swizzled column block.
  int64_t columnsPerBlock() const { return kSwizzleBytes / elementBytes; }
  Value smem; // aligned base, !llvm.ptr<3>
  Value qMap, kMap, vMap, oMap, oPtr, lsePtr, scaleLog2;
  Value nq, nk, hq, hkv, batches;
  Value tileCounterPtr; // dynamic tile scheduler only
  // Split-KV only: the chunk count, the partials' scratch, the arrivals.
  Value kvSplits, oPartialPtr, lsePartialPtr, splitArrivalsPtr;
  // Strided targets: q, k, v (and a TMA-stored o) are rank-4 maps over
  // [B, H, N, D]; o stored from registers has these strides (elements).
  bool stridedMaps = false;
  std::array<Value, 3> oStrides;
  // KV caches: per-sequence key counts [B]; a paged cache's block table
  // [B, max_pages] (the K and V maps are then over [pages, Hkv, page_size,
  // D]). Null when absent.
  Value kvLengthsPtr, blockTablePtr, maxPages;
  /// The pages of a paged cache: the entries a sequence reads are asserted
  /// below it.
  Value numPages;
  /// Whether decodeTile asserts a tile's device-side inputs (KV lengths,
  /// prefix sums). Every role decodes every tile, so one role asserting is
  /// enough: the consumers (see SM90Kernel.cpp's emitProducer).
  bool assertsTileInputs = true;
  // A varlen batch: the prefix sums [B + 1] and the packed rows of Q and K.
  Value cuSeqlensQPtr, cuSeqlensKPtr, totalQ, totalK;
  /// Asserts that varlen sequence `seq`'s prefix sums (q from `qBase`,
  /// `qRows` rows; k likewise) describe sequences of the packed tensors:
  /// from 0, not decreasing, within total_q and total_k, and with no more
  /// queries than max_seqlen_q (the grid's query blocks).
  void assertSums(Value seq, Value qBase, Value qRows, Value kBase,
                  Value kRows);
  void assertSequenceSums(Value seq);
  /// Asserts that the block-table entries of the keys a tile reads,
  /// [firstBlock B_c, min(numBlocks B_c, its length)), are pages of the
  /// cache (entries past a sequence's keys are never read for data: their
  /// blocks are masked). A consumer warp checks them, `lane` taking every
  /// 32nd page (the producer's one issuing thread reads the entries for
  /// its loads; the consumers' warps check them a lane each). An
  /// out-of-range page's load is outside the K/V maps, which the TMA fills
  /// with zeros.
  void assertTilePages(const AttentionTile &tile, Value lane, int64_t pageSize);
  // Persistent varlen kernels deal real tiles only (varlenTiles), of which
  // there are varlenTileCount.
  bool varlenRealTiles = false;
  Value varlenTileCount;
  /// Set (to the lane id) where whole warps decode tiles -- the consumers;
  /// null where one thread does -- the producer.
  Value collectiveLane;
  /// The producer's search position (cursorVarlenTiles), carried by its
  /// tile loop; null elsewhere.
  Value cursorSeq, cursorPrefix;

  /// The tensor-map coordinates of a tile's query (or K/V) matrix.
  /// (A varlen batch's sequences are rows of batch row 0.)
  SmallVector<Value> queryMatrix(const AttentionTile &tile) {
    if (stridedMaps)
      return {tile.qHead, cuSeqlensQPtr ? c32(0) : tile.batch};
    return {tile.qMatrix};
  }
  SmallVector<Value> keyValueMatrix(const AttentionTile &tile) {
    if (stridedMaps)
      return {tile.kvHead, cuSeqlensQPtr ? c32(0) : tile.batch};
    return {tile.kvMatrix};
  }
  /// The tensor-map row of query `row` of a tile's sequence.
  Value queryMapRow(const AttentionTile &tile, Value row) {
    return cuSeqlensQPtr ? add(tile.qBase, row) : row;
  }
  /// The tensor-map row and matrix coordinates of key `key` of a tile's
  /// K/V: in a paged cache, row key mod pageSize of page
  /// table[batch, key / pageSize] (a rank-4 map over the pages).
  std::pair<Value, SmallVector<Value>> keyValueRow(const AttentionTile &tile,
                                                   Value key, int64_t pageSize);
};

/// What the host side of a TMA kernel's launch needs to know.
struct TensorMapLaunch {
  /// V's and O's head dim (Dv): the "D" and "Dv" of the workspaces' shapes
  /// (split-KV's partial O, an e4m3 kernel's V^T). The tensor maps take
  /// each tensor's own.
  int64_t valueHeadDim;
  int64_t blockR;
  bool bf16;
  int64_t threads, sharedBytes;
  /// The kernel's parameters (fagpu::kernelParams): the launch passes one
  /// argument per entry, in this order.
  ArrayRef<fagpu::KernelParam> abi;
  /// Split-KV: the K/V chunks per tile (the grid's y); 0 without.
  int64_t kvSplits = 0;
  /// e4m3: the kernel of the same module that writes the attention's v_t
  /// from V (fagpu::valueLayoutParams); empty otherwise.
  StringRef valueLayoutKernel;
};

/// fa.attention -> the host side of the launch: the three tensor maps
/// encoded by the runtime (faEncodeTensorMap, cuTensorMapEncodeTiled over
/// [B*H, N, D] with 64-column boxes and the 128-B swizzle), then a
/// gpu.launch_func of `kernel` with one CTA per (query block, head) tile.
void replaceWithTensorMapLaunch(fagpu::AttentionOp op, LLVM::LLVMFuncOp kernel,
                                const TensorMapLaunch &launch);

} // namespace mlir::fa

#endif // FA_LIB_CONVERSION_COMMON_TMAKERNEL_H
