//===- EpilogueToNVVM.cpp - the epilogue to NVVM --------------------------===//
//
// The epilogue: O normalised and stored (TMA or rows), the LSE, the
// split-KV merge of the last chunk.
// One pattern per op; WarpgroupToNVVM.cpp says how values change form.
//
//===----------------------------------------------------------------------===//

#include "WarpgroupLowering.h"

using namespace mlir;
using namespace mlir::fa;
using namespace mlir::fa::warpgroup;

namespace {

//===----------------------------------------------------------------------===//
// Epilogue
//===----------------------------------------------------------------------===//

/// Where the rows of one (batch, head) matrix of O start: element `first`
/// of its row 0 and `stride` elements between rows (i64). Contiguous
/// [B * H, N, D] without `heads`; with them, the strided [B, H, N, D] O of
/// fagpu.output_rows, fagpu.copy_staged_rows and fagpu.merge_splits, the
/// matrix being batch * heads + head.
struct OutputRows {
  Value first, stride;
};
/// `heads` and `strides` are the op's own i32/i64 operands (scalars the
/// conversion leaves as they are).
static OutputRows outputRows(OpEmitter &e, Value heads, ValueRange strides,
                             Value matrix, Value nq, int64_t headDim) {
  if (!heads)
    return {e.mul(e.ext64(matrix), e.mul(e.ext64(nq), e.c64(headDim))),
            e.c64(headDim)};
  Value batch = e.ext64(e.divu(matrix, heads));
  Value head = e.ext64(e.remu(matrix, heads));
  return {e.add(e.mul(batch, strides[0]), e.mul(head, strides[1])), strides[2]};
}

/// The config of an epilogue op's emitter, which applies no mask or FA4
/// trick (the emitter keeps a reference to it).
static const SoftmaxConfig kNoSoftmax{};

/// The converted values of row tile `tile` of a fragment whose 1:N values
/// are its row tiles' in order.
static ValueRange rowTileValues(ValueRange values, int64_t rowTiles,
                                int64_t tile) {
  int64_t perTile = values.size() / rowTiles;
  return values.slice(tile * perTile, perTile);
}

/// A 64-row tile of a fragment: a slice of its values.
struct RowTileLowering : OpConversionPattern<fagpu::RowTileOp> {
  using OpConversionPattern::OpConversionPattern;
  LogicalResult
  matchAndRewrite(fagpu::RowTileOp op, OneToNOpAdaptor adaptor,
                  ConversionPatternRewriter &rewriter) const override {
    ValueRange tile =
        rowTileValues(adaptor.getSource(),
                      op.getSource().getType().getRowTiles(), op.getIndex());
    rewriter.replaceOpWithMultiple(op, {SmallVector<Value>(tile)});
    return success();
  }
};

/// Each row's l (summed over the quad for a rows fragment) and the factor
/// descale / l, 0 where l = 0.
struct RowTotalsLowering : OpConversionPattern<fagpu::RowTotalsOp> {
  using OpConversionPattern::OpConversionPattern;
  LogicalResult
  matchAndRewrite(fagpu::RowTotalsOp op, OneToNOpAdaptor adaptor,
                  ConversionPatternRewriter &rewriter) const override {
    Location loc = op.getLoc();
    OpEmitter e(rewriter, loc, rewriter.getF16Type(), kNoSoftmax);
    SmallVector<Value> totals, factors;
    if (op.getL().getType().getLayout() == fagpu::FragmentLayout::Lanes) {
      // One thread per row: l is whole.
      Value l = adaptor.getL().front();
      Value positive = arith::CmpFOp::create(
          rewriter, loc, arith::CmpFPredicate::OGT, l, e.cf(0.0));
      totals.push_back(l);
      factors.push_back(
          e.select(positive, arith::DivFOp::create(rewriter, loc, e.cf(1.0), l),
                   e.cf(0.0)));
    } else {
      if (op.getDescale())
        e.outputScale = adaptor.getDescale().front();
      for (Value l : adaptor.getL()) {
        OpEmitter::RowTotal total = e.rowTotal(l);
        totals.push_back(total.sum);
        factors.push_back(total.inverse);
      }
    }
    rewriter.replaceOpWithMultiple(op, {totals, factors});
    return success();
  }
};

/// Row 0 of a matrix's LSE: a pointer `matrix * nq` floats past the base.
struct LseRowsLowering : OpConversionPattern<fagpu::LseRowsOp> {
  using OpConversionPattern::OpConversionPattern;
  LogicalResult
  matchAndRewrite(fagpu::LseRowsOp op, OneToNOpAdaptor adaptor,
                  ConversionPatternRewriter &rewriter) const override {
    OpEmitter e(rewriter, op.getLoc(), rewriter.getF16Type(), kNoSoftmax);
    Value rows = e.gep(e.globalPtr, e.f32, adaptor.getLse().front(),
                       e.mul(e.ext64(adaptor.getMatrix().front()),
                             e.ext64(adaptor.getNq().front())));
    rewriter.replaceOpWithMultiple(op, {{rows}});
    return success();
  }
};

/// LSE = (m + log2 l - log2 s) ln 2 of each of the thread's rows below Nq.
struct StoreLseLowering : OpConversionPattern<fagpu::StoreLseOp> {
  using OpConversionPattern::OpConversionPattern;
  LogicalResult
  matchAndRewrite(fagpu::StoreLseOp op, OneToNOpAdaptor adaptor,
                  ConversionPatternRewriter &rewriter) const override {
    Location loc = op.getLoc();
    SoftmaxConfig config;
    config.writesLse = true;
    if (std::optional<APFloat> s = op.getProbsScale())
      config.probsScale = s->convertToDouble();
    OpEmitter e(rewriter, loc, rewriter.getF16Type(), config);
    Value row0 = adaptor.getRow0().front();
    Value nq = adaptor.getNq().front();
    Value lseRows = adaptor.getLseRows().front();
    ValueRange m = adaptor.getM(), total = adaptor.getTotal();
    if (op.getM().getType().getLayout() == fagpu::FragmentLayout::Lanes) {
      // The thread's own row.
      Value positive = arith::CmpFOp::create(
          rewriter, loc, arith::CmpFPredicate::OGT, total[0], e.cf(0.0));
      auto ifRow = scf::IfOp::create(rewriter, loc, e.ult(row0, nq), false);
      OpBuilder::InsertionGuard guard(rewriter);
      rewriter.setInsertionPoint(ifRow.thenBlock()->getTerminator());
      Value lse =
          e.select(positive, e.fmul(e.fadd(m[0], e.lg2(total[0])), e.cf(kLn2)),
                   e.cf(-std::numeric_limits<double>::infinity()));
      LLVM::StoreOp::create(rewriter, loc, lse,
                            e.gep(e.globalPtr, e.f32, lseRows, e.ext64(row0)),
                            4);
      rewriter.eraseOp(op);
      return success();
    }
    OpEmitter::ThreadPosition pos = e.position();
    // Rows row0 + 16 t and row0 + 16 t + 8 of row tile t, back to back, so
    // that L1 can merge a warp's two 8-row stores where they share a sector
    // (fagpu::lseStoreBytes counts 16 rows a store).
    for (size_t i = 0; i < m.size(); ++i) {
      int64_t tile = i / 2, half = i % 2;
      Value tileRow0 = tile ? e.add(row0, e.c32(16 * tile)) : row0;
      OpEmitter::RowTotal rowTotal;
      rowTotal.sum = total[i];
      rowTotal.positive = arith::CmpFOp::create(
          rewriter, loc, arith::CmpFPredicate::OGT, total[i], e.cf(0.0));
      e.storeLse(rowTotal, m[i], e.add(tileRow0, e.c32(8 * half)), nq, lseRows,
                 pos.quadLane);
    }
    rewriter.eraseOp(op);
    return success();
  }
};

/// Row 0 of a matrix of O and the elements between rows.
struct OutputRowsLowering : OpConversionPattern<fagpu::OutputRowsOp> {
  using OpConversionPattern::OpConversionPattern;
  LogicalResult
  matchAndRewrite(fagpu::OutputRowsOp op, OneToNOpAdaptor adaptor,
                  ConversionPatternRewriter &rewriter) const override {
    Type element = op.getOutElement();
    OpEmitter e(rewriter, op.getLoc(), element, kNoSoftmax);
    OutputRows rows = outputRows(e, op.getHeads(), op.getStrides(),
                                 adaptor.getMatrix().front(),
                                 adaptor.getNq().front(), op.getColumns());
    Value base = e.gep(e.globalPtr, element.isF32() ? e.f32 : e.half,
                       adaptor.getOut().front(), rows.first);
    rewriter.replaceOpWithMultiple(op, {{base}, {rows.stride}});
    return success();
  }
};

/// O times its rows' factors from registers: each quad writes 64
/// contiguous bytes of a row per 32 columns (32 bytes per 8 for f32
/// partials), of O's `columns` where the fragment has padding columns past
/// them.
struct StoreRowsLowering : OpConversionPattern<fagpu::StoreRowsOp> {
  using OpConversionPattern::OpConversionPattern;
  LogicalResult
  matchAndRewrite(fagpu::StoreRowsOp op, OneToNOpAdaptor adaptor,
                  ConversionPatternRewriter &rewriter) const override {
    fagpu::FragmentType oType = op.getO().getType();
    int64_t headDim = oType.getShape()[1];
    Type element = op.getOutElement();
    OpEmitter e(rewriter, op.getLoc(), element, kNoSoftmax, headDim);
    ValueRange o = adaptor.getO(), factor = adaptor.getFactor();
    Value row0 = adaptor.getRow0().front();
    Value nq = adaptor.getNq().front();
    OpEmitter::ThreadPosition pos = e.position();
    // Row tile r holds rows row0 + 16 r (+ 8).
    int64_t rowTiles = oType.getRowTiles();
    for (int64_t r = 0; r < rowTiles; ++r)
      e.storeRows(SmallVector<Value>(rowTileValues(o, rowTiles, r)),
                  {factor[2 * r], factor[2 * r + 1]},
                  r ? e.add(row0, e.c32(16 * r)) : row0, nq,
                  adaptor.getBase().front(), adaptor.getStride().front(),
                  op.getColumns().value_or(headDim), pos.quadLane,
                  element.isF32());
    rewriter.eraseOp(op);
    return success();
  }
};

/// The staging tile of an epilogue op: its shared-memory base
/// and the tile's offset (the 1:N values of a !fagpu.smem_tile), the byte
/// stride between its 64-column blocks.
struct StagingTile {
  Value smem, offset;
  int64_t headDim, blockStride;
};
static StagingTile stagingTile(Value tile, ValueRange converted) {
  auto type = cast<fagpu::SharedTileType>(tile.getType());
  return {converted[0], converted[1], type.getCols(),
          type.getBlockRows() * kSwizzleBytes};
}

/// The emitter of an op on staging tile `tile`: its element type and
/// columns, its shared memory.
static OpEmitter stagingEmitter(OpBuilder &b, Location loc, Value tile,
                                const StagingTile &staging) {
  OpEmitter e(b, loc,
              cast<fagpu::SharedTileType>(tile.getType()).getElementType(),
              kNoSoftmax, staging.headDim);
  e.smem = staging.smem;
  return e;
}

/// The warpgroup's four warps meet at named barrier `barrier`.
static void syncWarpgroup(OpEmitter &e, Value barrier) {
  NVVM::BarrierOp::create(e.builder(), e.location(), Type(), barrier,
                          e.c32(128), NVVM::BarrierReductionAttr(), Value());
}

/// The staged tile's generic-proxy writes made visible to the TMA (async
/// proxy), then the warpgroup meets.
static void fenceForTmaAndSync(OpEmitter &e, Value barrier) {
  MLIRContext *ctx = e.builder().getContext();
  NVVM::FenceProxyOp::create(
      e.builder(), e.location(), NVVM::ProxyKind::async_shared,
      NVVM::SharedSpaceAttr::get(ctx, NVVM::SharedSpace::shared_cta));
  syncWarpgroup(e, barrier);
}

/// The warpgroup's first row, from a thread's `row0`: row 16 w + lane / 4
/// of the warpgroup's 64 (w the thread's warp in it).
static Value warpgroupFirstRow(OpEmitter &e, OpEmitter::ThreadPosition pos,
                               Value row0) {
  return e.sub(row0, e.add(e.mul(pos.warpInGroup, e.c32(16)),
                           e.divu(pos.lane, e.c32(4))));
}

/// The first thread (warp 0, lane 0: its row0 is the block's first row)
/// stores the 64 staged rows through `e.oMap` and commits the store.
static void storeStagedBlock(OpEmitter &e, OpEmitter::ThreadPosition pos,
                             const StagingTile &staging, Value row0,
                             Value matrix, Value heads) {
  e.onFirstThread(pos, [&] {
    SmallVector<Value> coords = {matrix};
    if (heads)
      coords = {e.remu(matrix, heads), e.divu(matrix, heads)};
    e.storeRowBlock(staging.offset, staging.blockStride, row0, coords);
    NVVM::CpAsyncBulkCommitGroupOp::create(e.builder(), e.location());
  });
}

/// The warpgroup's 64 staged rows to O, 16-byte pieces of `columns` per
/// row, piece p of the tile (row p / pieces, its piece p % pieces) by
/// thread p mod 128: the pieces of a row, and of the rows after it, go to
/// adjacent lanes, so a warp's store writes whole 32-byte sectors. A piece
/// of row r, column block c, chunk k of its 128-byte line lies at chunk k
/// XOR (r mod 8) (the 128-B swizzle stmatrix wrote). Rows at or past Nq
/// are skipped.
static void copyStagedRows(OpEmitter &e, OpEmitter::ThreadPosition pos,
                           const StagingTile &staging, int64_t columns,
                           Value row0, Value matrix, Value nq, Value out,
                           Value heads, ValueRange strides) {
  OpBuilder &b = e.builder();
  Location loc = e.location();
  constexpr int64_t kPieceBytes = 16, kPiecesPerLine = kSwizzleBytes / 16;
  int64_t pieces = columns * 2 / kPieceBytes; // per row, 16-bit O
  OutputRows rows = outputRows(e, heads, strides, matrix, nq, columns);
  Value oBase = e.gep(e.globalPtr, e.half, out, rows.first);
  Value thread = e.add(e.mul(pos.warpInGroup, e.c32(32)), pos.lane);
  Value firstRow = warpgroupFirstRow(e, pos, row0);
  Type pieceType = VectorType::get({4}, e.i32);
  for (int64_t first = 0; first < fagpu::kRowsPerConsumer * pieces;
       first += 128) {
    Value linear = e.add(thread, e.c32(first));
    Value row = e.divu(linear, e.c32(pieces));
    Value piece = e.remu(linear, e.c32(pieces));
    Value chunk = arith::XOrIOp::create(
        b, loc, e.remu(piece, e.c32(kPiecesPerLine)), e.remu(row, e.c32(8)));
    Value offset =
        e.add(e.add(staging.offset, e.mul(e.divu(piece, e.c32(kPiecesPerLine)),
                                          e.c32(staging.blockStride))),
              e.add(e.mul(row, e.c32(kSwizzleBytes)),
                    e.mul(chunk, e.c32(kPieceBytes))));
    Value outRow = e.add(firstRow, row);
    auto ifRow = scf::IfOp::create(b, loc, e.ult(outRow, nq), false);
    OpBuilder::InsertionGuard guard(b);
    b.setInsertionPointToStart(ifRow.thenBlock());
    Value values = LLVM::LoadOp::create(b, loc, pieceType, e.sharedAt(offset),
                                        kPieceBytes);
    Value element = e.add(e.mul(e.ext64(outRow), rows.stride),
                          e.ext64(e.mul(piece, e.c32(8))));
    LLVM::StoreOp::create(b, loc, values,
                          e.gep(e.globalPtr, e.half, oBase, element),
                          kPieceBytes);
  }
}

/// After the warpgroup meets, O times its rows' factors into the staging
/// tile by stmatrix.
struct StageOutputLowering : OpConversionPattern<fagpu::StageOutputOp> {
  using OpConversionPattern::OpConversionPattern;
  LogicalResult
  matchAndRewrite(fagpu::StageOutputOp op, OneToNOpAdaptor adaptor,
                  ConversionPatternRewriter &rewriter) const override {
    Location loc = op.getLoc();
    MLIRContext *ctx = rewriter.getContext();
    StagingTile staging = stagingTile(op.getStaging(), adaptor.getStaging());
    OpEmitter e = stagingEmitter(rewriter, loc, op.getStaging(), staging);
    ValueRange o = adaptor.getO(), factor = adaptor.getFactor();
    OpEmitter::ThreadPosition pos = e.position();
    syncWarpgroup(e, adaptor.getSyncBarrier().front());
    // stmatrix.x4 writes four 8 x 8 blocks of f16 pairs, laid out as the
    // accumulator (thread t: row t / 4, columns 2 (t % 4) ..): column
    // groups i and i + 1 of rows g and g + 8. Lane L gives the address of
    // row L % 8 of block L / 8: warp row 8 ((L / 8) % 2) + L % 8, column
    // group i + L / 16, its 16-B chunk XORed with the row mod 8 (128-B
    // swizzle).
    Value blockOf = e.divu(pos.lane, e.c32(8));
    Value rowInBlock = e.remu(pos.lane, e.c32(8));
    Value row = e.add(e.add(e.mul(pos.warpInGroup, e.c32(16)),
                            e.mul(e.remu(blockOf, e.c32(2)), e.c32(8))),
                      rowInBlock);
    Value rowAddress = e.add(staging.offset, e.mul(row, e.c32(kSwizzleBytes)));
    Value secondGroup = e.divu(pos.lane, e.c32(16));
    for (int64_t i = 0; i < staging.headDim / 8; i += 2) {
      SmallVector<Value> pairs;
      for (int64_t group : {i, i + 1})
        for (int64_t h = 0; h < 2; ++h)
          pairs.push_back(
              e.packPair(e.fmul(o[4 * group + 2 * h], factor[h]),
                         e.fmul(o[4 * group + 2 * h + 1], factor[h])));
      Value chunk = arith::XOrIOp::create(
          rewriter, loc, e.add(e.c32(i % 8), secondGroup), rowInBlock);
      Value offset =
          e.add(e.add(rowAddress, e.c32((i / 8) * staging.blockStride)),
                e.mul(chunk, e.c32(16)));
      NVVM::StMatrixOp::create(
          rewriter, loc, e.sharedAt(offset), pairs,
          NVVM::MMALayoutAttr::get(ctx, NVVM::MMALayout::row),
          NVVM::LdStMatrixShapeAttr::get(ctx, 8, 8),
          NVVM::LdStMatrixEltTypeAttr::get(ctx, NVVM::LdStMatrixEltType::B16));
    }
    rewriter.eraseOp(op);
    return success();
  }
};

/// Fence, meet, and one TMA store of the staged rows by the first thread.
struct TmaStoreStagedLowering : OpConversionPattern<fagpu::TmaStoreStagedOp> {
  using OpConversionPattern::OpConversionPattern;
  LogicalResult
  matchAndRewrite(fagpu::TmaStoreStagedOp op, OneToNOpAdaptor adaptor,
                  ConversionPatternRewriter &rewriter) const override {
    StagingTile staging = stagingTile(op.getStaging(), adaptor.getStaging());
    OpEmitter e =
        stagingEmitter(rewriter, op.getLoc(), op.getStaging(), staging);
    e.oMap = adaptor.getMap().front();
    OpEmitter::ThreadPosition pos = e.position();
    fenceForTmaAndSync(e, adaptor.getSyncBarrier().front());
    storeStagedBlock(e, pos, staging, adaptor.getRow0().front(),
                     adaptor.getMatrix().front(), op.getHeads());
    rewriter.eraseOp(op);
    return success();
  }
};

/// Meet, then copy the staged rows below Nq; with tma_blocks, a whole block
/// by TMA instead.
struct CopyStagedRowsLowering : OpConversionPattern<fagpu::CopyStagedRowsOp> {
  using OpConversionPattern::OpConversionPattern;
  LogicalResult
  matchAndRewrite(fagpu::CopyStagedRowsOp op, OneToNOpAdaptor adaptor,
                  ConversionPatternRewriter &rewriter) const override {
    Location loc = op.getLoc();
    StagingTile staging = stagingTile(op.getStaging(), adaptor.getStaging());
    OpEmitter e = stagingEmitter(rewriter, loc, op.getStaging(), staging);
    OpEmitter::ThreadPosition pos = e.position();
    Value barrier = adaptor.getSyncBarrier().front();
    Value row0 = adaptor.getRow0().front();
    Value matrix = adaptor.getMatrix().front();
    Value nq = adaptor.getNq().front();
    int64_t columns = op.getColumns().value_or(staging.headDim);
    auto copy = [&] {
      copyStagedRows(e, pos, staging, columns, row0, matrix, nq,
                     adaptor.getOut().front(), op.getHeads(), op.getStrides());
    };
    if (!op.getBlockMap()) {
      // The copy reads what other warps' stmatrix wrote (both generic
      // proxy): the barrier orders them.
      syncWarpgroup(e, barrier);
      copy();
      rewriter.eraseOp(op);
      return success();
    }
    // A box of 64 rows that reach past Nq would write the next sequence's
    // rows: only whole blocks leave by TMA.
    fenceForTmaAndSync(e, barrier);
    Value firstRow = warpgroupFirstRow(e, pos, row0);
    Value whole = arith::CmpIOp::create(
        rewriter, loc, arith::CmpIPredicate::ule,
        e.add(firstRow, e.c32(fagpu::kRowsPerConsumer)), nq);
    auto ifWhole = scf::IfOp::create(rewriter, loc, whole, /*withElse=*/true);
    OpBuilder::InsertionGuard guard(rewriter);
    rewriter.setInsertionPointToStart(ifWhole.thenBlock());
    e.oMap = adaptor.getBlockMap().front();
    storeStagedBlock(e, pos, staging, row0, matrix, op.getHeads());
    rewriter.setInsertionPointToStart(ifWhole.elseBlock());
    copy();
    rewriter.eraseOp(op);
    return success();
  }
};

/// Each warp counts itself in for its 16 rows; the last chunk's warp merges
/// them, a lane head_dim / 32 adjacent columns.
struct MergeSplitsLowering : OpConversionPattern<fagpu::MergeSplitsOp> {
  using OpConversionPattern::OpConversionPattern;
  LogicalResult
  matchAndRewrite(fagpu::MergeSplitsOp op, OneToNOpAdaptor adaptor,
                  ConversionPatternRewriter &rewriter) const override {
    Location loc = op.getLoc();
    int64_t headDim = op.getHeadDim();
    int64_t columns = headDim / 32; // per lane
    OpEmitter e(rewriter, loc, op.getOutElement());
    OpBuilder &b = e.builder();
    auto one = [&](ValueRange values) { return values.front(); };
    Value matrix = one(adaptor.getMatrix()), nq = one(adaptor.getNq()),
          splits = one(adaptor.getSplits()),
          matrices = one(adaptor.getMatrices());
    Value oPartial = one(adaptor.getOPartial()),
          lsePartial = one(adaptor.getLsePartial()),
          out = one(adaptor.getOut());
    Value lse = op.getLse() ? one(adaptor.getLse()) : Value();
    OpEmitter::ThreadPosition pos = e.position();
    Value warpRow0 =
        e.add(one(adaptor.getRowsStart()), e.mul(pos.warpInGroup, e.c32(16)));
    auto ifRows = scf::IfOp::create(b, loc, e.ult(warpRow0, nq), false);
    OpBuilder::InsertionGuard guard(b);
    b.setInsertionPointToStart(ifRows.thenBlock());

    // Count in, once every lane's partial stores are visible GPU-wide: each
    // lane fences its own stores, and the warp barrier orders all the
    // fences before lane 0's atomic (lanes of a warp are scheduled
    // independently since Volta).
    NVVM::MembarOp::create(b, loc, NVVM::MemScopeKind::GPU);
    NVVM::SyncWarpOp::create(b, loc, e.c32(-1));
    Value counter =
        e.gep(e.globalPtr, e.i32, one(adaptor.getArrivals()),
              e.add(e.mul(e.ext64(matrix), e.ext64(nq)), e.ext64(warpRow0)));
    auto ifLead =
        scf::IfOp::create(b, loc, TypeRange{e.i32}, e.eq(pos.lane, e.c32(0)),
                          /*withElseRegion=*/true);
    {
      OpBuilder::InsertionGuard inner(b);
      b.setInsertionPointToStart(ifLead.thenBlock());
      Value before = LLVM::AtomicRMWOp::create(
          b, loc, LLVM::AtomicBinOp::add, counter, e.c32(1),
          LLVM::AtomicOrdering::acq_rel, StringRef("device"));
      scf::YieldOp::create(b, loc, before);
      b.setInsertionPointToStart(ifLead.elseBlock());
      scf::YieldOp::create(b, loc, e.c32(0));
    }
    Value before = e.warpUniform(ifLead.getResult(0));
    auto ifLast =
        scf::IfOp::create(b, loc, e.eq(before, e.sub(splits, e.c32(1))), false);
    b.setInsertionPointToStart(ifLast.thenBlock());
    e.onLaneZero([&] { LLVM::StoreOp::create(b, loc, e.c32(0), counter, 4); });
    // The other chunks' partials were written by other SMs, after the
    // acquire above. The LSE are read past this SM's L1 (volatile): a
    // 128-byte line holds 32 rows' LSE, and another warp of this SM may
    // have read the line before these rows' chunks were written.
    NVVM::MembarOp::create(b, loc, NVVM::MemScopeKind::GPU);
    Value rowEnd =
        arith::MinUIOp::create(b, loc, e.add(warpRow0, e.c32(16)), nq);
    // kMergeRows rows at once (fewer at wide head dims, whose lanes hold
    // more columns): their loads are in flight together. A group past the
    // warp's last row merges that row again, writing the same values.
    const int64_t mergeRows = std::max<int64_t>(1, std::min<int64_t>(
                                                       4, 16 / columns));
    auto rows = scf::ForOp::create(b, loc, warpRow0, rowEnd,
                                   e.c32(mergeRows));
    b.setInsertionPointToStart(rows.getBody());
    Value lastRow = e.sub(rowEnd, e.c32(1));
    SmallVector<Value> rowOf, rowIndex;
    for (int64_t r = 0; r < mergeRows; ++r) {
      rowOf.push_back(arith::MinUIOp::create(
          b, loc, e.add(rows.getInductionVar(), e.c32(r)), lastRow));
      rowIndex.push_back(
          e.add(e.mul(e.ext64(matrix), e.ext64(nq)), e.ext64(rowOf[r])));
    }
    Value rowsPerChunk = e.mul(e.ext64(matrices), e.ext64(nq));
    auto partialRow = [&](int64_t r, Value chunk) {
      return e.add(e.mul(e.ext64(chunk), rowsPerChunk), rowIndex[r]);
    };
    auto loadLse = [&](int64_t r, Value chunk) -> Value {
      return LLVM::LoadOp::create(
          b, loc, e.f32,
          e.gep(e.globalPtr, e.f32, lsePartial, partialRow(r, chunk)),
          /*alignment=*/4, /*isVolatile=*/true);
    };
    Value negInf = e.cf(-std::numeric_limits<double>::infinity());
    // m = max_s LSE_s: the lanes read 32 chunks' LSE at once (one round
    // trip for up to 32 chunks, not one per chunk), then a butterfly.
    auto maxLoop =
        scf::ForOp::create(b, loc, pos.lane, splits, e.c32(32),
                           SmallVector<Value>(mergeRows, negInf));
    {
      OpBuilder::InsertionGuard inner(b);
      b.setInsertionPointToStart(maxLoop.getBody());
      SmallVector<Value> lses, maxes;
      for (int64_t r = 0; r < mergeRows; ++r)
        lses.push_back(loadLse(r, maxLoop.getInductionVar()));
      for (int64_t r = 0; r < mergeRows; ++r)
        maxes.push_back(arith::MaximumFOp::create(
            b, loc, maxLoop.getRegionIterArgs()[r], lses[r]));
      scf::YieldOp::create(b, loc, maxes);
    }
    SmallVector<Value> m(maxLoop.getResults());
    for (int64_t mask = 16; mask >= 1; mask /= 2)
      for (Value &x : m)
        x = arith::MaximumFOp::create(b, loc, x, e.shflXor(x, mask));
    // sum_s w_s and sum_s w_s O_s over the chunks that saw a key, kMergeAhead
    // chunks a step: every load of a step is issued before the first is
    // used, so a step costs one round trip to L2, not one per chunk. A step
    // past the last chunk re-reads it with weight 0; a chunk without keys
    // (LSE -inf) weighs 0 and its O (0 / 0) is not read into the sums.
    constexpr int64_t kMergeAhead = 4;
    // The lane's columns as vectors of four (two, one where its columns are
    // not a multiple: D = 96 gives a lane three, 12 bytes apart), so that
    // the warp's loads cover whole 32-byte sectors. Not volatile (NVPTX
    // would split a volatile vector into scalar loads, each moving a sector
    // for 4 bytes): a partial O row fills whole 128-byte lines of its own,
    // read once per launch by this warp alone, so this SM's L1 holds no
    // stale copy of them (L1 starts each launch empty).
    int64_t width = columns % 4 == 0 ? 4 : columns % 2 == 0 ? 2 : 1;
    auto loadORow = [&](int64_t r, Value chunk) {
      Value oRow = e.gep(e.globalPtr, e.f32, oPartial,
                         e.add(e.mul(partialRow(r, chunk), e.c64(headDim)),
                               e.ext64(e.mul(pos.lane, e.c32(columns)))));
      SmallVector<Value> vectors;
      for (int64_t c = 0; c < columns; c += width)
        vectors.push_back(LLVM::LoadOp::create(
            b, loc, VectorType::get({width}, e.f32),
            e.gep(e.globalPtr, e.f32, oRow, e.c64(c)),
            /*alignment=*/4 * width));
      return vectors;
    };
    // Row r's sums at [r (columns + 1)]: its weight total, then its columns.
    const int64_t stride = columns + 1;
    SmallVector<Value> init(mergeRows * stride, e.cf(0.0));
    auto sumLoop = scf::ForOp::create(b, loc, e.c32(0), splits,
                                      e.c32(kMergeAhead), init);
    {
      OpBuilder::InsertionGuard inner(b);
      b.setInsertionPointToStart(sumLoop.getBody());
      Value first = sumLoop.getInductionVar();
      SmallVector<Value> acc(sumLoop.getRegionIterArgs());
      Value lastChunk = e.sub(splits, e.c32(1));
      SmallVector<Value> valid, lses;
      SmallVector<SmallVector<Value>> rowsO;
      for (int64_t i = 0; i < kMergeAhead; ++i) {
        Value chunk = e.add(first, e.c32(i));
        valid.push_back(e.ult(chunk, splits));
        Value clamped = arith::MinUIOp::create(b, loc, chunk, lastChunk);
        for (int64_t r = 0; r < mergeRows; ++r) {
          lses.push_back(loadLse(r, clamped));
          rowsO.push_back(loadORow(r, clamped));
        }
      }
      for (int64_t i = 0; i < kMergeAhead; ++i)
        for (int64_t r = 0; r < mergeRows; ++r) {
          Value lseChunk = lses[i * mergeRows + r];
          Value seen = e.andi(valid[i], arith::CmpFOp::create(
                                            b, loc, arith::CmpFPredicate::OGT,
                                            lseChunk, negInf));
          Value w = arith::SelectOp::create(
              b, loc, seen,
              e.ex2(e.fmul(arith::SubFOp::create(b, loc, lseChunk, m[r]),
                           e.cf(llvm::numbers::log2e))),
              e.cf(0.0));
          Value *sums = &acc[r * stride];
          sums[0] = arith::AddFOp::create(b, loc, sums[0], w);
          for (auto [v, vector] : llvm::enumerate(rowsO[i * mergeRows + r]))
            for (int64_t j = 0; j < width; ++j) {
              Value x = LLVM::ExtractElementOp::create(b, loc, vector,
                                                       e.c32(j));
              x = arith::SelectOp::create(b, loc, seen, x, e.cf(0.0));
              int64_t column = int64_t(v) * width + j;
              sums[1 + column] =
                  math::FmaOp::create(b, loc, w, x, sums[1 + column]);
            }
        }
      scf::YieldOp::create(b, loc, acc);
    }
    OutputRows outRows =
        outputRows(e, op.getHeads(), op.getStrides(), matrix, nq, headDim);
    for (int64_t r = 0; r < mergeRows; ++r) {
      Value total = sumLoop.getResult(r * stride);
      auto column = [&](int64_t c) { return sumLoop.getResult(r * stride + 1 + c); };
      Value positive = arith::CmpFOp::create(
          b, loc, arith::CmpFPredicate::OGT, total, e.cf(0.0));
      Value inverse = arith::SelectOp::create(
          b, loc, positive, arith::DivFOp::create(b, loc, e.cf(1.0), total),
          e.cf(0.0));
      Value oRow = e.gep(
          e.globalPtr, e.half, out,
          e.add(e.add(outRows.first, e.mul(e.ext64(rowOf[r]), outRows.stride)),
                e.ext64(e.mul(pos.lane, e.c32(columns)))));
      // Pairs of 16-bit columns, or single ones where a lane's columns are
      // odd (and so its pairs would not be 4-byte aligned).
      for (int64_t c = 0; c < columns; c += columns % 2 == 0 ? 2 : 1) {
        Value first = e.fmul(column(c), inverse);
        Value ptr = e.gep(e.globalPtr, e.half, oRow, e.c64(c));
        if (columns % 2 != 0) {
          LLVM::StoreOp::create(
              b, loc, arith::TruncFOp::create(b, loc, e.half, first), ptr,
              /*alignment=*/2);
          continue;
        }
        Value packed = e.packPair(first, e.fmul(column(c + 1), inverse));
        LLVM::StoreOp::create(b, loc, packed, ptr, /*alignment=*/4);
      }
      if (lse) {
        OpBuilder::InsertionGuard inner(b);
        auto ifLane0 =
            scf::IfOp::create(b, loc, e.eq(pos.lane, e.c32(0)), false);
        b.setInsertionPointToStart(ifLane0.thenBlock());
        Value merged = arith::SelectOp::create(
            b, loc, positive,
            arith::AddFOp::create(
                b, loc, m[r], e.fmul(e.lg2(total), e.cf(llvm::numbers::ln2))),
            negInf);
        LLVM::StoreOp::create(b, loc, merged,
                              e.gep(e.globalPtr, e.f32, lse, rowIndex[r]),
                              /*alignment=*/4);
      }
    }
    rewriter.eraseOp(op);
    return success();
  }
};

struct StoreWaitLowering : OpConversionPattern<fagpu::StoreWaitOp> {
  using OpConversionPattern::OpConversionPattern;
  LogicalResult
  matchAndRewrite(fagpu::StoreWaitOp op, OneToNOpAdaptor,
                  ConversionPatternRewriter &rewriter) const override {
    OpEmitter e(rewriter, op.getLoc(), rewriter.getF16Type());
    // `.read`: the shared memory is free once the stores have read it; their
    // global writes complete on their own.
    e.onFirstThread(e.position(), [&] {
      NVVM::CpAsyncBulkWaitGroupOp::create(rewriter, op.getLoc(), 0,
                                           rewriter.getUnitAttr());
    });
    rewriter.eraseOp(op);
    return success();
  }
};

} // namespace

void mlir::fa::warpgroup::populateEpiloguePatterns(
    const TypeConverter &converter, RewritePatternSet &patterns) {
  patterns.add<RowTileLowering, RowTotalsLowering, LseRowsLowering,
               StoreLseLowering, OutputRowsLowering, StoreRowsLowering,
               StageOutputLowering, TmaStoreStagedLowering,
               CopyStagedRowsLowering, MergeSplitsLowering, StoreWaitLowering>(
      converter, patterns.getContext());
}
