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
#include "llvm/ADT/StringMap.h"
#include "mlir/Dialect/MemRef/IR/MemRef.h"

#include <array>

namespace mlir::fa {

constexpr int64_t kSwizzleBytes = fagpu::kMaxSwizzleBytes; // one swizzled row

/// The work of one CTA: B_r query rows of one (batch, head) and the K/V
/// blocks they visit.
struct AttentionTile {
  Value id; // position in the head-major order of the launch's tiles
  Value qStart, qMatrix, kvMatrix;
  Value batch, qHead, kvHead; // qMatrix = batch * Hq + qHead
  Value firstBlock, unmaskedEnd, numBlocks; // K/V blocks visited
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
                               ArrayRef<fagpu::KernelParam> abi) {
    b.setInsertionPointToStart(module.getBody());
    auto smemType = LLVM::LLVMArrayType::get(b.getI8Type(), 0);
    LLVM::GlobalOp smemGlobal;
    if (!(smemGlobal = module.lookupSymbol<LLVM::GlobalOp>("fa_smem")))
      smemGlobal = LLVM::GlobalOp::create(
          b, loc, smemType, /*isConstant=*/false, LLVM::Linkage::External,
          "fa_smem", Attribute(), /*alignment=*/1024, /*addrSpace=*/3);
    LLVM::LLVMFuncOp fn =
        declareKernel(b, loc, module, name, threads, ctasPerSM, abi);
    auto arg = [&](StringRef param) { return kernelArgument(fn, abi, param); };
    qMap = arg("q");
    kMap = arg("k");
    // e4m3 kernels read V as the layout kernel's V^T.
    vMap = arg("v") ? arg("v") : arg("v_t");
    oMap = oPtr = Value();
    (abi[3].kind == fagpu::ParamKind::TensorMap ? oMap : oPtr) = arg("o");
    // O's data beside its map, where the threads copy a partial block.
    if (Value rows = arg("o_rows"))
      oPtr = rows;
    lsePtr = arg("lse");
    nq = arg("Nq");
    nk = arg("Nk");
    hq = arg("Hq");
    hkv = arg("Hkv");
    scaleLog2 = arg("scale_log2");
    batches = arg("B");
    tileCounterPtr = arg("tile_counter");
    kvSplits = arg("kv_splits");
    oPartialPtr = arg("o_partial");
    lsePartialPtr = arg("lse_partial");
    splitArrivalsPtr = arg("split_arrivals");
    oStrides = {arg("o_stride_b"), arg("o_stride_h"), arg("o_stride_n")};
    cuSeqlensQPtr = arg("cu_seqlens_q");
    cuSeqlensKPtr = arg("cu_seqlens_k");
    totalQ = arg("total_q");
    kvLengthsPtr = arg("kv_lengths");
    blockTablePtr = arg("block_table");
    maxPages = arg("max_pages");
    numPages = arg("num_pages");
    totalK = arg("total_k");
    stridedMaps = abi.front().rank == 4;

    smem = alignedSharedBase(smemGlobal);
    return fn;
  }

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
  Value diagonalShift(const SoftmaxConfig &config, Value keys,
                      Value queries) {
    IRArithmetic ir{b, loc};
    return mlir::fa::model::diagonalShift(ir, queriesOfRows(config, queries),
                                          keys, config.bottomRight,
                                          config.diagonalOffset);
  }

  /// The queries of `rows` tile rows: rows / G with pack-GQA beyond one
  /// query (fagpu.schedule's query_group, a power of two), else rows.
  Value queriesOfRows(const SoftmaxConfig &config, Value rows) {
    if (!config.queryGroup)
      return rows;
    return arith::ShRUIOp::create(b, loc, rows,
                                  c32(llvm::Log2_64(config.queryGroup)));
  }

  /// Element `index` of the i32 array at global pointer `base` (kv_lengths,
  /// the block table): read-only for the kernel's lifetime.
  Value loadGlobalI32(Value base, Value index) {
    return LLVM::LoadOp::create(b, loc, i32,
                                gep(globalPtr, i32, base, ext64(index)),
                                /*alignment=*/4, /*isVolatile=*/false,
                                /*isNonTemporal=*/false, /*isInvariant=*/true);
  }

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
  VarlenTile varlenTiles(Value tileId) {
    Value zero = c32(0);
    auto loop = scf::ForOp::create(b, loc, zero, batches, c32(1),
                                   ValueRange{zero, zero, zero, c32(1)});
    {
      OpBuilder::InsertionGuard guard(b);
      b.setInsertionPointToStart(loop.getBody());
      Value seq = loop.getInductionVar();
      ValueRange carried = loop.getRegionIterArgs();
      Value prefix = carried[0];
      Value blocks = queryBlocksOf(sequenceLength(seq));
      Value next = add(prefix, mul(blocks, hq));
      SmallVector<Value> yielded = {next, carried[1], carried[2], carried[3]};
      // The count pass (once a CTA, before the roles split) asserts every
      // sequence's sums: a sequence whose sums decrease has no tiles, so
      // decodeTile's per-tile check would never see it.
      if (!tileId)
        assertSequenceSums(seq);
      if (tileId) {
        Value here = arith::AndIOp::create(
            b, loc,
            arith::CmpIOp::create(b, loc, arith::CmpIPredicate::uge, tileId,
                                  prefix),
            ult(tileId, next));
        yielded[1] = select(here, seq, carried[1]);
        yielded[2] = select(here, sub(tileId, prefix), carried[2]);
        yielded[3] = select(here, blocks, carried[3]);
      }
      scf::YieldOp::create(b, loc, yielded);
    }
    return {loop.getResult(0), loop.getResult(1), loop.getResult(2),
            loop.getResult(3)};
  }

  /// varlenTiles from a cursor (cursorSeq, cursorPrefix: a sequence at or
  /// before `tileId`'s, and the tiles before it): it steps forward to the
  /// sequence holding `tileId` and leaves the cursor there. O(1) a tile
  /// amortised for a caller whose tile ids only grow.
  VarlenTile cursorVarlenTiles(Value tileId) {
    SmallVector<Location> locs(4, loc);
    auto loop = scf::WhileOp::create(b, loc, TypeRange{i32, i32, i32, i32},
                                     ValueRange{cursorSeq, cursorPrefix,
                                                c32(0), c32(1)});
    {
      OpBuilder::InsertionGuard guard(b);
      Block *before = b.createBlock(&loop.getBefore(), {},
                                    TypeRange{i32, i32, i32, i32}, locs);
      Value seq = before->getArgument(0), prefix = before->getArgument(1);
      Value blocks = queryBlocksOf(sequenceLength(seq));
      Value next = add(prefix, mul(blocks, hq));
      // Past this sequence (and not the last): step on.
      Value onward = arith::AndIOp::create(
          b, loc, ult(add(seq, c32(1)), batches),
          arith::CmpIOp::create(b, loc, arith::CmpIPredicate::uge, tileId,
                                next));
      scf::ConditionOp::create(b, loc, onward,
                               ValueRange{seq, prefix, next, blocks});
      Block *after = b.createBlock(&loop.getAfter(), {},
                                   TypeRange{i32, i32, i32, i32}, locs);
      scf::YieldOp::create(
          b, loc, ValueRange{add(after->getArgument(0), c32(1)),
                             after->getArgument(2), c32(0), c32(1)});
    }
    cursorSeq = loop.getResult(0);
    cursorPrefix = loop.getResult(1);
    return {Value(), loop.getResult(0), sub(tileId, loop.getResult(1)),
            loop.getResult(3)};
  }

  /// varlenTiles by a whole warp (every lane converged; `lane` its lane
  /// id), 32 sequences a pass: lane i loads sequence 32 c + i's length,
  /// a warp scan (five shuffles) gives each lane its sequence's tile range,
  /// and a ballot finds the lane whose range holds `tileId`. The B loads
  /// are issued at once instead of one per iteration of a dependent loop,
  /// which the consumers ran before every tile (O(B) dependent loads a
  /// warp; bench/results/2026-12-03-varlen-warp-search.md).
  VarlenTile warpVarlenTiles(Value tileId, Value lane) {
    Value zero = c32(0);
    auto shfl = [&](NVVM::ShflKind kind, Value v, Value offset, int64_t clamp) {
      return NVVM::ShflOp::create(b, loc, i32, c32(-1), v, offset, c32(clamp),
                                  NVVM::ShflKindAttr::get(b.getContext(), kind),
                                  UnitAttr())
          .getResult();
    };
    Value passes = divu(add(batches, c32(31)), c32(32));
    auto loop = scf::ForOp::create(b, loc, zero, passes, c32(1),
                                   ValueRange{zero, zero, zero, c32(1)});
    {
      OpBuilder::InsertionGuard guard(b);
      b.setInsertionPointToStart(loop.getBody());
      Value first = mul(loop.getInductionVar(), c32(32));
      ValueRange carried = loop.getRegionIterArgs();
      Value seq = add(first, lane);
      Value valid = ult(seq, batches);
      Value safe = select(valid, seq, zero);
      Value blocks =
          queryBlocksOf(select(valid, sequenceLength(safe), zero));
      Value tiles = mul(blocks, hq);
      // Inclusive scan of the lanes' tile counts (lanes past B add 0).
      Value end = tiles;
      for (int64_t k = 1; k < 32; k *= 2) {
        Value up = shfl(NVVM::ShflKind::up, end, c32(k), 0);
        end = select(ult(lane, c32(k)), end, add(end, up));
      }
      end = add(end, carried[0]);
      Value start = sub(end, tiles);
      Value here = arith::AndIOp::create(
          b, loc,
          arith::CmpIOp::create(b, loc, arith::CmpIPredicate::uge, tileId,
                                start),
          ult(tileId, end));
      Value mask = NVVM::VoteSyncOp::create(
                       b, loc, i32, c32(-1), here,
                       NVVM::VoteSyncKindAttr::get(b.getContext(),
                                                   NVVM::VoteSyncKind::ballot))
                       .getResult();
      Value found = arith::CmpIOp::create(b, loc, arith::CmpIPredicate::ne,
                                          mask, zero);
      Value owner = select(
          found, math::CountTrailingZerosOp::create(b, loc, mask), zero);
      Value ownerStart = shfl(NVVM::ShflKind::idx, start, owner, 0x1f);
      Value ownerBlocks = shfl(NVVM::ShflKind::idx, blocks, owner, 0x1f);
      scf::YieldOp::create(
          b, loc,
          ValueRange{shfl(NVVM::ShflKind::idx, end, c32(31), 0x1f),
                     select(found, add(first, owner), carried[1]),
                     select(found, sub(tileId, ownerStart), carried[2]),
                     select(found, ownerBlocks, carried[3])});
    }
    return {loop.getResult(0), loop.getResult(1), loop.getResult(2),
            loop.getResult(3)};
  }

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
  Value localSmemAddress() {
    Value raw = LLVM::InlineAsmOp::create(
                    b, loc, i32, ValueRange{}, "mov.u32 $0, fa_smem;", "=r",
                    /*has_side_effects=*/true, /*is_align_stack=*/false,
                    LLVM::tailcallkind::TailCallKind::None,
                    LLVM::AsmDialectAttr(), ArrayAttr())
                    .getResult(0);
    return add(raw, alignmentPad(raw));
  }

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
  void prefetchTensorMaps() {
    for (Value map : {qMap, kMap, vMap})
      NVVM::PrefetchOp::create(b, loc, /*cacheLevel=*/nullptr,
                               /*evictPriority=*/nullptr, map,
                               /*predicate=*/Value(), /*tensormap=*/true);
  }

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
                int64_t swizzle = kSwizzleBytes) {
    if (!tileRows)
      tileRows = rows;
    int64_t blockColumns = swizzle / elementBytes;
    for (int64_t cb = 0; cb < headDim / blockColumns; ++cb) {
      Value dst = sharedAt(add(
          tileOffset, c32((cb * tileRows + firstRow) * swizzle)));
      SmallVector<Value> coords =
          mapCoordinates(cb * blockColumns, row, matrixCoords);
      if (column)
        coords[0] = add(column, coords[0]);
      NVVM::CpAsyncBulkTensorGlobalToSharedClusterOp::create(
          b, loc, dst, map, coords, bar,
          ValueRange{}, Value(), Value(), NVVM::TMALoadMode::TILE,
          /*isCTAOnly=*/true, NVVM::CTAGroupKindAttr(), Value());
    }
  }

  /// The TMA store of one 64-row block of O: D / 64 boxes of 64 columns x
  /// 64 rows from the swizzled column blocks at `tileOffset` (`blockStride`
  /// bytes apart) to rows `row`.. of the matrix given by `matrixCoords`;
  /// rows past Nq are clipped by the tensor map.
  void storeRowBlock(Value tileOffset, int64_t blockStride, Value row,
                     ValueRange matrixCoords) {
    int64_t blockColumns = columnsPerBlock();
    for (int64_t cb = 0; cb < headDim / blockColumns; ++cb) {
      Value src = sharedAt(add(tileOffset, c32(cb * blockStride)));
      NVVM::CpAsyncBulkTensorSharedCTAToGlobalOp::create(
          b, loc, oMap, src,
          mapCoordinates(cb * blockColumns, row, matrixCoords),
          /*l2CacheHint=*/Value(),
          NVVM::TMAStoreModeAttr::get(b.getContext(), NVVM::TMAStoreMode::TILE),
          /*predicate=*/Value());
    }
  }

  /// Matrix descriptor of the swizzled operand at `byteOffset`; `format`
  /// holds the generation-specific bits (see the file comment).
  Value descriptor(Value byteOffset, int64_t leadingBytes, int64_t strideBytes,
                   int64_t format) {
    Value addr = ext64(add(localSmemAddress(), byteOffset));
    Value encoded = arith::ShRUIOp::create(b, loc, addr, c64(4));
    int64_t fixed = ((leadingBytes >> 4) & 0x3FFF) << 16 |
                    ((strideBytes >> 4) & 0x3FFF) << 32 | format;
    return arith::OrIOp::create(b, loc, encoded, c64(fixed));
  }
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
  AttentionTile decodeTile(Value tileId) {
    AttentionTile tile;
    tile.id = tileId;
    // Query blocks of one head next to each other: they share K/V in L2
    // (a longest-first order across all heads measured slower,
    // docs/hopper.md). Causal: the longest of a head first, so the short
    // ones fill the gaps at the end.
    Value qBlock, batch, head, matrix;
    auto longestFirst = [&](Value qBlocks) {
      if (config.causal)
        qBlock = sub(sub(qBlocks, c32(1)), qBlock);
    };
    if (varlenRealTiles) {
      VarlenTile found = collectiveLane
                             ? warpVarlenTiles(tileId, collectiveLane)
                         : cursorSeq ? cursorVarlenTiles(tileId)
                                     : varlenTiles(tileId);
      qBlock = remu(found.local, found.blocks);
      longestFirst(found.blocks);
      batch = found.batch;
      head = divu(found.local, found.blocks);
      matrix = add(mul(batch, hq), head);
    } else {
      Value qBlocks = queryBlocks();
      qBlock = remu(tileId, qBlocks);
      matrix = divu(tileId, qBlocks);
      longestFirst(qBlocks);
      batch = divu(matrix, hq);
      head = remu(matrix, hq);
    }
    Value kvHead = divu(head, divu(hq, hkv));
    // Third coordinate of the tensor maps: the [N, D] matrix of (batch,
    // head).
    tile.qMatrix = matrix;
    tile.kvMatrix = add(mul(batch, hkv), kvHead);
    tile.batch = batch;
    tile.qHead = head;
    tile.kvHead = kvHead;
    Value qStart = tile.qStart = mul(qBlock, c32(blockR));
    // A KV cache: the sequence's own key count, asserted to be within the
    // cache's capacity Nk (a negative one is a large unsigned one), so that
    // a bad length never reads past a sequence's pages nor is silently
    // clamped.
    tile.nk = nk;
    if (kvLengthsPtr) {
      tile.nk = loadGlobalI32(kvLengthsPtr, batch);
      if (assertsTileInputs)
        deviceAssert(ule(tile.nk, nk),
                     "flash-mlir: kv_lengths (cache_seqlens) must be in "
                     "[0, capacity]");
    }
    tile.nq = nq;
    tile.qBase = tile.kBase = c32(0);
    if (cuSeqlensQPtr) {
      // A varlen batch: the sequence's rows from its prefix sums.
      Value next = add(batch, c32(1));
      tile.qBase = loadGlobalI32(cuSeqlensQPtr, batch);
      tile.nq = sub(loadGlobalI32(cuSeqlensQPtr, next), tile.qBase);
      tile.kBase = loadGlobalI32(cuSeqlensKPtr, batch);
      tile.nk = sub(loadGlobalI32(cuSeqlensKPtr, next), tile.kBase);
    }
    // Persistent varlen kernels asserted every sequence's sums when they
    // counted the tiles (varlenTiles), before the roles split.
    if (cuSeqlensQPtr && assertsTileInputs && !varlenRealTiles)
      assertSums(batch, tile.qBase, tile.nq, tile.kBase, tile.nk);

    // K/V blocks visited (mlir::fa::model::kvBlockRange: causal stops at the
    // last row's diagonal, a window bounds both sides; at least one block where
    // a sequence may have no keys).
    IRArithmetic ir{b, loc};
    // Pack-GQA beyond one query: the tile's rows are queries
    // [qStart / G, (qStart + B_r) / G) (G divides B_r and qStart).
    Value firstQuery = queriesOfRows(config, qStart);
    Value queries = queriesOfRows(config, tile.nq);
    int64_t queryRows = config.queryGroup ? blockR / config.queryGroup
                                          : blockR;
    mlir::fa::model::KVRange<IRArithmetic> range =
        mlir::fa::model::kvBlockRange(
            ir, firstQuery, queries, tile.nk, queryRows, blockC, config.causal,
            config.window, config.bottomRight, config.diagonalOffset,
            /*keyLengths=*/static_cast<bool>(kvLengthsPtr || cuSeqlensQPtr));
    tile.firstBlock = range.first;
    tile.numBlocks = range.end;
    tile.unmaskedEnd = mlir::fa::model::unmaskedBlocksEnd(
        ir, range, firstQuery, queries, tile.nk, blockC, config.causal,
        config.window, config.bottomRight, config.diagonalOffset);
    if (cuSeqlensQPtr) {
      // A varlen tile past its sequence's end (the grid covers the longest
      // sequence's query blocks): one masked block, nothing stored, so that
      // a persistent loop's roles agree on it without a branch.
      Value empty = arith::CmpIOp::create(b, loc, arith::CmpIPredicate::uge,
                                          qStart, tile.nq);
      tile.numBlocks = select(
          empty, minu(tile.numBlocks, add(tile.firstBlock, c32(1))),
          tile.numBlocks);
      tile.unmaskedEnd = select(empty, tile.firstBlock, tile.unmaskedEnd);
    }
    return tile;
  }

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
                  Value kRows) {
    Value qEnd = add(qBase, qRows), kEnd = add(kBase, kRows);
    // Sequence 0 starts both sums at 0 (q | k == 0).
    Value startsAtZero = arith::OrIOp::create(
        b, loc, ult(c32(0), seq),
        eq(arith::OrIOp::create(b, loc, qBase, kBase), c32(0)));
    Value ok = andi(andi(ule(qBase, qEnd), ule(qEnd, totalQ)),
                    andi(ule(kBase, kEnd), ule(kEnd, totalK)));
    ok = andi(andi(ok, ule(qRows, nq)), startsAtZero);
    deviceAssert(ok, "flash-mlir: cu_seqlens_q and cu_seqlens_k must start "
                     "at 0, not decrease and end within the packed rows, "
                     "and no sequence may have more queries than "
                     "max_seqlen_q");
  }
  void assertSequenceSums(Value seq) {
    Value next = add(seq, c32(1));
    Value qBase = loadGlobalI32(cuSeqlensQPtr, seq);
    Value kBase = loadGlobalI32(cuSeqlensKPtr, seq);
    assertSums(seq, qBase, sub(loadGlobalI32(cuSeqlensQPtr, next), qBase),
               kBase, sub(loadGlobalI32(cuSeqlensKPtr, next), kBase));
  }
  /// Asserts that the block-table entries of the keys a tile reads,
  /// [firstBlock B_c, min(numBlocks B_c, its length)), are pages of the
  /// cache (entries past a sequence's keys are never read for data: their
  /// blocks are masked). A consumer warp checks them, `lane` taking every
  /// 32nd page (the producer's one issuing thread reads the entries for
  /// its loads; the consumers' warps check them a lane each). An
  /// out-of-range page's load is outside the K/V maps, which the TMA fills
  /// with zeros.
  void assertTilePages(const AttentionTile &tile, Value lane,
                       int64_t pageSize) {
    Value endKey = minu(mul(tile.numBlocks, c32(blockC)), tile.nk);
    Value firstPage = divu(mul(tile.firstBlock, c32(blockC)), c32(pageSize));
    Value endPage = divu(add(endKey, c32(pageSize - 1)), c32(pageSize));
    Value rowStart = mul(tile.batch, maxPages);
    auto loop = scf::ForOp::create(b, loc, add(firstPage, lane), endPage,
                                   c32(32));
    OpBuilder::InsertionGuard guard(b);
    b.setInsertionPointToStart(loop.getBody());
    Value page =
        loadGlobalI32(blockTablePtr, add(rowStart, loop.getInductionVar()));
    deviceAssert(ult(page, numPages),
                 "flash-mlir: block_table entries a sequence reads must be "
                 "pages of the cache, in [0, num_pages)");
  }
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
  std::pair<Value, SmallVector<Value>>
  keyValueRow(const AttentionTile &tile, Value key, int64_t pageSize) {
    if (!pageSize)
      return {cuSeqlensQPtr ? add(tile.kBase, key) : key,
              keyValueMatrix(tile)};
    Value entry = add(mul(tile.batch, maxPages), divu(key, c32(pageSize)));
    Value page = loadGlobalI32(blockTablePtr, entry);
    return {remu(key, c32(pageSize)), {tile.kvHead, page}};
  }
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
inline void replaceWithTensorMapLaunch(fagpu::AttentionOp op,
                                       LLVM::LLVMFuncOp kernel,
                                       const TensorMapLaunch &launch) {
  OpBuilder b(op);
  Location loc = op.getLoc();
  MLIRContext *ctx = b.getContext();
  auto globalPtr = LLVM::LLVMPointerType::get(ctx, 1);
  auto hostPtr = LLVM::LLVMPointerType::get(ctx);
  auto i32 = b.getI32Type(), i64 = b.getI64Type();
  auto mapType = LLVM::LLVMArrayType::get(i64, 16);
  auto module = op->getParentOfType<ModuleOp>();
  auto encodeType = LLVM::LLVMFunctionType::get(
      i32, {hostPtr, hostPtr, i64, i64, i64, i64, i32, i32});
  auto stridedEncodeType = LLVM::LLVMFunctionType::get(
      i32,
      {hostPtr, hostPtr, i64, i64, i64, i64, i64, i64, i64, i32, i32, i32});
  auto runtimeFunction = [&](StringRef name, LLVM::LLVMFunctionType type) {
    auto fn = module.lookupSymbol<LLVM::LLVMFuncOp>(name);
    if (!fn) {
      OpBuilder mb(module.getBodyRegion());
      fn = LLVM::LLVMFuncOp::create(mb, loc, name, type);
    }
    return fn;
  };
  LaunchOperands operands(b, loc, op);
  auto dim = [&](Value memref, int64_t d) { return operands.dim(memref, d); };
  auto toI64 = [&](Value index) -> Value {
    return arith::IndexCastOp::create(b, loc, i64, index);
  };
  auto c32 = [&](int64_t v) {
    return arith::ConstantIntOp::create(b, loc, v, 32);
  };
  // The memref's batch, head and row strides in elements, as i64.
  auto stridesOf = [&](Value memref) -> std::array<Value, 3> {
    auto metadata = memref::ExtractStridedMetadataOp::create(b, loc, memref);
    return {toI64(metadata.getStrides()[0]), toI64(metadata.getStrides()[1]),
            toI64(metadata.getStrides()[2])};
  };
  auto c64 = [&](int64_t v) -> Value {
    return arith::ConstantIntOp::create(b, loc, v, 64);
  };
  // Rank 4: faEncodeStridedTensorMapL2(map, base, B, H, N, D, batch, head
  // and row strides, boxRows, dtype (0 f16, 1 bf16, 2 e4m3), the map's L2
  // promotion in bytes); rank 3 (the 256-byte promotion only):
  // faEncodeTensorMap(map, base, B * H, N, D, elemBits, boxRows, dtype).
  // Each writes the 128-B CUtensorMap.
  auto mapSlot = [&] {
    Value one = arith::ConstantIntOp::create(b, loc, 1, 64);
    return LLVM::AllocaOp::create(b, loc, hostPtr, mapType, one, 64)
        .getResult();
  };
  auto dtypeCode = [&](const fagpu::KernelParam &p) {
    return c32(p.dtype == "e4m3" ? 2 : launch.bf16 ? 1 : 0);
  };
  auto encodeMap = [&](Value memref, const fagpu::KernelParam &p) -> Value {
    Value slot = mapSlot();
    Value base = alignedPointer(b, loc, memref, hostPtr);
    // The tensor's own columns (D for q and k, Dv for v and o): boxes past
    // them (a head dim padded to the tiles') read zeros.
    Value columns = c64(cast<MemRefType>(memref.getType()).getDimSize(3));
    if (p.rank == 4) {
      std::array<Value, 3> strides = stridesOf(memref);
      LLVM::CallOp::create(
          b, loc,
          runtimeFunction("faEncodeStridedTensorMapL2", stridedEncodeType),
          ValueRange{slot, base, toI64(dim(memref, 0)), toI64(dim(memref, 1)),
                     toI64(dim(memref, 2)), columns, strides[0],
                     strides[1], strides[2], c32(p.boxRows), dtypeCode(p),
                     c32(p.l2Promotion)});
    } else {
      Value matrices = arith::MulIOp::create(b, loc, toI64(dim(memref, 0)),
                                             toI64(dim(memref, 1)));
      LLVM::CallOp::create(
          b, loc, runtimeFunction("faEncodeTensorMap", encodeType),
          ValueRange{slot, base, matrices, toI64(dim(memref, 2)),
                     columns, c64(16), c32(p.boxRows),
                     c32(launch.bf16 ? 1 : 0)});
    }
    return LLVM::LoadOp::create(b, loc, mapType, slot);
  };
  // Counters (the dynamic tile scheduler's, split-KV's arrivals) and
  // split-KV's partial results: device memory for this launch, counters
  // zeroed, freed after it (the runtimes keep them per stream instead).
  auto tokenType = gpu::AsyncTokenType::get(ctx);
  Value token;
  llvm::StringMap<Value> scratch;
  auto elementsOf = [&](const fagpu::KernelParam &p) -> Value {
    Value n = arith::ConstantIndexOp::create(b, loc, 1);
    for (const std::string &dim : p.shape) {
      Value size = dim == "S"   ? arith::ConstantIndexOp::create(
                                      b, loc, launch.kvSplits)
                                      .getResult()
                   : dim == "D" || dim == "Dv"
                       ? arith::ConstantIndexOp::create(b, loc,
                                                        launch.valueHeadDim)
                             .getResult()
                                : operands.size(dim);
      n = arith::MulIOp::create(b, loc, n, size);
    }
    return n;
  };
  for (const fagpu::KernelParam &p : launch.abi) {
    if (p.kind != fagpu::ParamKind::Counter &&
        p.kind != fagpu::ParamKind::Workspace)
      continue;
    if (!token)
      token =
          gpu::WaitOp::create(b, loc, tokenType, ValueRange{}).getResult(0);
    Type element = p.kind == fagpu::ParamKind::Counter
                       ? Type(b.getI32Type())
                       : Type(b.getF32Type());
    // One element without a shape (the tile counter), else the shape's.
    auto alloc =
        p.shape.empty()
            ? gpu::AllocOp::create(b, loc, MemRefType::get({1}, element),
                                   tokenType, ValueRange{token}, ValueRange{},
                                   ValueRange{})
            : gpu::AllocOp::create(
                  b, loc, MemRefType::get({ShapedType::kDynamic}, element),
                  tokenType, ValueRange{token}, ValueRange{elementsOf(p)},
                  ValueRange{});
    token = alloc.getAsyncToken();
    if (p.kind == fagpu::ParamKind::Counter)
      token = gpu::MemsetOp::create(b, loc, tokenType, ValueRange{token},
                                    alloc.getMemref(), c32(0))
                  .getResult(0);
    scratch[p.name] = alloc.getMemref();
  }
  // e4m3: V^T [B, Hkv, D, Nk_128] in a workspace of this launch, written by
  // the layout kernel on the launch's stream before the attention reads it.
  Value valueT, keysPadded, kvHeads;
  if (!launch.valueLayoutKernel.empty()) {
    auto index = [&](int64_t v) {
      return arith::ConstantIndexOp::create(b, loc, v).getResult();
    };
    auto mul = [&](Value x, Value y) {
      return arith::MulIOp::create(b, loc, x, y).getResult();
    };
    Value batches = operands.size("B");
    kvHeads = operands.size("Hkv");
    // The layout kernel's 16-key groups of a V^T row.
    Value groups =
        mul(b.createOrFold<arith::CeilDivUIOp>(
                loc, operands.size("Nk"), index(fagpu::kValueLayoutKeyAlign)),
            index(fagpu::kValueLayoutKeyAlign / 16));
    keysPadded = mul(groups, index(16));
    Value bytes = mul(mul(mul(batches, kvHeads), index(launch.valueHeadDim)),
                      keysPadded);
    if (!token)
      token =
          gpu::WaitOp::create(b, loc, tokenType, ValueRange{}).getResult(0);
    auto alloc = gpu::AllocOp::create(
        b, loc, MemRefType::get({ShapedType::kDynamic}, b.getI8Type()),
        tokenType, ValueRange{token}, ValueRange{bytes}, ValueRange{});
    valueT = alloc.getMemref();
    scratch["v_t"] = valueT;
    Value v = operands.tensor("v");
    std::array<Value, 3> vStrides = stridesOf(v);
    Value threads = index(fagpu::kValueLayoutThreads);
    Value one = index(1);
    // One thread per group of 16 keys and kValueLayoutColumnsPerThread
    // columns.
    Value blocks = b.createOrFold<arith::CeilDivUIOp>(
        loc, mul(mul(mul(batches, kvHeads), groups),
                 index(launch.valueHeadDim /
                       fagpu::kValueLayoutColumnsPerThread)),
        threads);
    auto layoutSym = SymbolRefAttr::get(
        b.getStringAttr("fa_kernels"),
        {FlatSymbolRefAttr::get(b.getStringAttr(launch.valueLayoutKernel))});
    token = gpu::LaunchFuncOp::create(
                b, loc, layoutSym, gpu::KernelDim3{blocks, one, one},
                gpu::KernelDim3{threads, one, one}, Value(),
                ValueRange{alignedPointer(b, loc, v, globalPtr),
                           alignedPointer(b, loc, valueT, globalPtr),
                           operands.i32("B"), operands.i32("Hkv"),
                           operands.i32("Nk"), vStrides[0], vStrides[1],
                           vStrides[2]},
                tokenType, ValueRange{alloc.getAsyncToken()})
                .getAsyncToken();
  }
  // V^T's map: rows D, columns Nk_128 of each (batch, head), contiguous.
  auto encodeValueT = [&](const fagpu::KernelParam &p) -> Value {
    Value slot = mapSlot();
    Value rowBytes = toI64(keysPadded);
    Value d = c64(launch.valueHeadDim);
    Value headStride = arith::MulIOp::create(b, loc, d, rowBytes);
    Value batchStride =
        arith::MulIOp::create(b, loc, toI64(kvHeads), headStride);
    LLVM::CallOp::create(
        b, loc,
        runtimeFunction("faEncodeStridedTensorMapL2", stridedEncodeType),
        ValueRange{slot, alignedPointer(b, loc, valueT, hostPtr),
                   toI64(operands.size("B")), toI64(kvHeads), d, rowBytes,
                   batchStride, headStride, rowBytes, c32(p.boxRows),
                   dtypeCode(p), c32(p.l2Promotion)});
    return LLVM::LoadOp::create(b, loc, mapType, slot);
  };
  SmallVector<Value> args =
      launchArguments(launch.abi, [&](const fagpu::KernelParam &p) -> Value {
        switch (p.kind) {
        case fagpu::ParamKind::TensorMap:
          if (p.name == "v_t")
            return encodeValueT(p);
          return encodeMap(operands.tensor(p.name), p);
        case fagpu::ParamKind::Pointer:
          return operands.pointer(p.name, globalPtr);
        case fagpu::ParamKind::Counter:
        case fagpu::ParamKind::Workspace:
          return alignedPointer(b, loc, scratch.lookup(p.name), globalPtr);
        case fagpu::ParamKind::F32:
          return operands.scaleLog2;
        case fagpu::ParamKind::I32:
          // Descales per tensor (rank 0), [B, Hkv] (rank 2, contiguous) or
          // per block (Q's and K's of rank 3); an e4m3 cache has K's and
          // V's only.
          if (p.name == "descale_layout") {
            Value descale =
                op.getQDescale() ? op.getQDescale() : op.getKDescale();
            return c32(int64_t(fagpu::descaleLayoutOf(
                           cast<MemRefType>(descale.getType()))))
                .getResult();
          }
          return p.name == "kv_splits" ? c32(launch.kvSplits).getResult()
                                       : operands.i32(p.name);
        case fagpu::ParamKind::I64: {
          std::array<Value, 3> strides = stridesOf(operands.tensor("o"));
          return p.name == "o_stride_b"   ? strides[0]
                 : p.name == "o_stride_h" ? strides[1]
                                          : strides[2];
        }
        }
        return Value();
      });
  // One CTA per (query block, head) tile, times the K/V chunks of split-KV.
  // A persistent kernel strides over the tiles by gridDim.x, so this grid
  // is correct for it too; runtimes launch min(tiles, SMs) CTAs of it.
  Value brC = arith::ConstantIndexOp::create(b, loc, launch.blockR);
  Value gridX = arith::MulIOp::create(
      b, loc, b.createOrFold<arith::CeilDivUIOp>(loc, operands.size("Nq"), brC),
      arith::MulIOp::create(b, loc, operands.size("Hq"), operands.size("B")));
  Value one = arith::ConstantIndexOp::create(b, loc, 1);
  Value gridY = launch.kvSplits
                    ? arith::ConstantIndexOp::create(b, loc, launch.kvSplits)
                          .getResult()
                    : one;
  Value threads = arith::ConstantIndexOp::create(b, loc, launch.threads);
  Value smemBytes = c32(launch.sharedBytes);
  auto kernelSym =
      SymbolRefAttr::get(b.getStringAttr("fa_kernels"),
                         {FlatSymbolRefAttr::get(kernel.getSymNameAttr())});
  if (!token) {
    gpu::LaunchFuncOp::create(b, loc, kernelSym,
                              gpu::KernelDim3{gridX, gridY, one},
                              gpu::KernelDim3{threads, one, one}, smemBytes,
                              args, /*asyncObject=*/Value());
    op.erase();
    return;
  }
  token = gpu::LaunchFuncOp::create(
              b, loc, kernelSym, gpu::KernelDim3{gridX, gridY, one},
              gpu::KernelDim3{threads, one, one}, smemBytes, args, tokenType,
              ValueRange{token})
              .getAsyncToken();
  for (const fagpu::KernelParam &p : launch.abi)
    if (Value memref = scratch.lookup(p.name))
      token = gpu::DeallocOp::create(b, loc, tokenType, ValueRange{token},
                                     memref)
                  .getResult(0);
  gpu::WaitOp::create(b, loc, Type(), ValueRange{token});
  op.erase();
}

} // namespace mlir::fa

#endif // FA_LIB_CONVERSION_COMMON_TMAKERNEL_H
