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
/// fagpu.store_output and fagpu.merge_splits, the matrix being
/// batch * heads + head.
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

struct StoreOutputLowering : OpConversionPattern<fagpu::StoreOutputOp> {
  using OpConversionPattern::OpConversionPattern;
  LogicalResult
  matchAndRewrite(fagpu::StoreOutputOp op, OneToNOpAdaptor adaptor,
                  ConversionPatternRewriter &rewriter) const override {
    auto oType = dyn_cast<fagpu::FragmentType>(op.getO().getType());
    if (!oType)
      return rewriter.notifyMatchFailure(op, "TMEM: TmemStoreOutputLowering");
    int64_t headDim = oType.getShape()[1];
    Type element = op.getOutElement();
    SoftmaxConfig config;
    config.writesLse = bool(op.getLse());
    if (std::optional<APFloat> s = op.getProbsScale())
      config.probsScale = s->convertToDouble();
    OpEmitter e(rewriter, op.getLoc(), element, config, headDim);
    if (op.getDescale())
      e.outputScale = adaptor.getDescale().front();
    ValueRange o = adaptor.getO();
    ValueRange mIn = adaptor.getM(), lIn = adaptor.getL();
    std::array<Value, 2> m = {mIn[0], mIn[1]};
    std::array<Value, 2> l = {lIn[0], lIn[1]};
    Value row0 = adaptor.getRow0().front();
    Value matrix = adaptor.getMatrix().front();
    Value nq = adaptor.getNq().front();
    Value lseBase;
    if (op.getLse())
      lseBase = e.gep(e.globalPtr, e.f32, adaptor.getLse().front(),
                      e.mul(e.ext64(matrix), e.ext64(nq)));
    OpEmitter::ThreadPosition pos = e.position();
    if (!op.getStaging()) {
      // O / l and LSE straight from registers: each quad writes 16 B of a
      // row per 8 columns (32 B for f32 partials), of O's `columns` where
      // the fragment has padding columns past them.
      bool f32Out = element.isF32();
      int64_t columns = op.getColumns().value_or(headDim);
      OutputRows rows =
          outputRows(e, op.getHeads(), op.getStrides(), matrix, nq, columns);
      Value oBase = e.gep(e.globalPtr, f32Out ? e.f32 : e.half,
                          adaptor.getOut().front(), rows.first);
      // Row tile r holds rows row0 + 16 r (+ 8).
      int64_t rowTiles = oType.getRowTiles();
      int64_t perTile = o.size() / rowTiles;
      for (int64_t r = 0; r < rowTiles; ++r)
        e.storeRows(SmallVector<Value>(o.slice(r * perTile, perTile)),
                    {mIn[2 * r], mIn[2 * r + 1]}, {lIn[2 * r], lIn[2 * r + 1]},
                    r ? e.add(row0, e.c32(16 * r)) : row0, nq, oBase, lseBase,
                    rows.stride, columns, pos.quadLane, f32Out);
      rewriter.eraseOp(op);
      return success();
    }
    storeThroughStaging(e, op, adaptor, o, m, l, lseBase, pos);
    rewriter.eraseOp(op);
    return success();
  }

  static void storeThroughStaging(OpEmitter &e, fagpu::StoreOutputOp op,
                                  OneToNOpAdaptor adaptor, ValueRange o,
                                  std::array<Value, 2> m,
                                  std::array<Value, 2> l, Value lseBase,
                                  OpEmitter::ThreadPosition pos) {
    OpBuilder &b = e.builder();
    Location loc = op.getLoc();
    MLIRContext *ctx = b.getContext();
    auto stagingType = cast<fagpu::SharedTileType>(op.getStaging().getType());
    int64_t headDim = stagingType.getCols();
    int64_t blockStride = stagingType.getBlockRows() * kSwizzleBytes;
    ValueRange staging = adaptor.getStaging();
    e.smem = staging[0];
    Value stage = staging[1];
    Value barrier = adaptor.getSyncBarrier().front();
    Value row0 = adaptor.getRow0().front();
    e.oMap = adaptor.getOut().front();
    auto syncWarps = [&] {
      NVVM::BarrierOp::create(b, loc, Type(), barrier, e.c32(128),
                              NVVM::BarrierReductionAttr(), Value());
    };
    std::array<OpEmitter::RowTotal, 2> total = {e.rowTotal(l[0]),
                                                e.rowTotal(l[1])};
    // The staging tile is free once the previous TMA store (or every
    // thread's copy) has read it.
    bool copyRows = op.getCopyRows();
    Value blockMap = op.getBlockMap() ? adaptor.getBlockMap().front() : Value();
    if (!copyRows || blockMap)
      e.onFirstThread(pos, [&] {
        NVVM::CpAsyncBulkWaitGroupOp::create(b, loc, 0, b.getUnitAttr());
      });
    syncWarps();
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
    Value rowAddress = e.add(stage, e.mul(row, e.c32(kSwizzleBytes)));
    Value secondGroup = e.divu(pos.lane, e.c32(16));
    for (int64_t i = 0; i < headDim / 8; i += 2) {
      SmallVector<Value> pairs;
      for (int64_t group : {i, i + 1})
        for (int64_t h = 0; h < 2; ++h)
          pairs.push_back(
              e.packPair(e.fmul(o[4 * group + 2 * h], total[h].inverse),
                         e.fmul(o[4 * group + 2 * h + 1], total[h].inverse)));
      Value chunk = arith::XOrIOp::create(
          b, loc, e.add(e.c32(i % 8), secondGroup), rowInBlock);
      Value offset = e.add(e.add(rowAddress, e.c32((i / 8) * blockStride)),
                           e.mul(chunk, e.c32(16)));
      NVVM::StMatrixOp::create(
          b, loc, e.sharedAt(offset), pairs,
          NVVM::MMALayoutAttr::get(ctx, NVVM::MMALayout::row),
          NVVM::LdStMatrixShapeAttr::get(ctx, 8, 8),
          NVVM::LdStMatrixEltTypeAttr::get(ctx, NVVM::LdStMatrixEltType::B16));
    }
    if (copyRows && !blockMap) {
      // The copy reads what other warps' stmatrix wrote (both generic
      // proxy): the barrier orders them.
      syncWarps();
      copyStagedRows(e, op, adaptor, stage, blockStride, pos);
    } else {
      // The generic-proxy writes become visible to the TMA (async proxy),
      // then one thread stores the 64 rows.
      NVVM::FenceProxyOp::create(
          b, loc, NVVM::ProxyKind::async_shared,
          NVVM::SharedSpaceAttr::get(ctx, NVVM::SharedSpace::shared_cta));
      syncWarps();
      auto storeBlock = [&] {
        e.onFirstThread(pos, [&] {
          // The issuer is warp 0, lane 0: its row0 is the block's first
          // row.
          Value matrix = adaptor.getMatrix().front();
          SmallVector<Value> coords = {matrix};
          if (Value heads = op.getHeads())
            coords = {e.remu(matrix, heads), e.divu(matrix, heads)};
          e.storeRowBlock(stage, blockStride, row0, coords);
          NVVM::CpAsyncBulkCommitGroupOp::create(b, loc);
        });
      };
      if (!blockMap) {
        storeBlock();
      } else {
        // A box of 64 rows that reach past Nq would write the next
        // sequence's rows: only whole blocks leave by TMA. The warpgroup's
        // first row is row0 - (16 w + lane / 4) of the thread's.
        Value firstRow = e.sub(row0, e.add(e.mul(pos.warpInGroup, e.c32(16)),
                                           e.divu(pos.lane, e.c32(4))));
        Value whole = arith::CmpIOp::create(
            b, loc, arith::CmpIPredicate::ule,
            e.add(firstRow, e.c32(fagpu::kRowsPerConsumer)),
            adaptor.getNq().front());
        auto ifWhole = scf::IfOp::create(b, loc, whole, /*withElse=*/true);
        OpBuilder::InsertionGuard guard(b);
        b.setInsertionPointToStart(ifWhole.thenBlock());
        e.oMap = blockMap;
        storeBlock();
        b.setInsertionPointToStart(ifWhole.elseBlock());
        copyStagedRows(e, op, adaptor, stage, blockStride, pos);
      }
    }
    for (int64_t h = 0; h < 2; ++h)
      e.storeLse(total[h], m[h], e.add(row0, e.c32(8 * h)),
                 adaptor.getNq().front(), lseBase, pos.quadLane);
  }

  /// copy_rows: the warpgroup's 64 staged rows to O, 16-byte pieces of
  /// `columns` per row, piece p of the tile (row p / pieces, its piece
  /// p % pieces) by thread p mod 128: the pieces of a row, and of the
  /// rows after it, go to adjacent lanes, so a warp's store writes whole
  /// 32-byte sectors. A piece of row r, column block c, chunk k of its
  /// 128-byte line lies at chunk k XOR (r mod 8) (the 128-B swizzle
  /// stmatrix wrote). Rows at or past Nq are skipped.
  static void copyStagedRows(OpEmitter &e, fagpu::StoreOutputOp op,
                             OneToNOpAdaptor adaptor, Value stage,
                             int64_t blockStride,
                             OpEmitter::ThreadPosition pos) {
    OpBuilder &b = e.builder();
    Location loc = op.getLoc();
    auto stagingType = cast<fagpu::SharedTileType>(op.getStaging().getType());
    int64_t columns = op.getColumns().value_or(stagingType.getCols());
    constexpr int64_t kPieceBytes = 16, kPiecesPerLine = kSwizzleBytes / 16;
    int64_t pieces = columns * 2 / kPieceBytes; // per row, 16-bit O
    Value matrix = adaptor.getMatrix().front();
    Value nq = adaptor.getNq().front();
    OutputRows rows =
        outputRows(e, op.getHeads(), op.getStrides(), matrix, nq, columns);
    Value oBase =
        e.gep(e.globalPtr, e.half, adaptor.getOut().front(), rows.first);
    // The warpgroup's first row: the thread's row0 is row 16 w + lane / 4
    // of it (w its warp).
    Value thread = e.add(e.mul(pos.warpInGroup, e.c32(32)), pos.lane);
    Value firstRow = e.sub(
        adaptor.getRow0().front(),
        e.add(e.mul(pos.warpInGroup, e.c32(16)), e.divu(pos.lane, e.c32(4))));
    Type pieceType = VectorType::get({4}, e.i32);
    for (int64_t first = 0; first < fagpu::kRowsPerConsumer * pieces;
         first += 128) {
      Value linear = e.add(thread, e.c32(first));
      Value row = e.divu(linear, e.c32(pieces));
      Value piece = e.remu(linear, e.c32(pieces));
      Value chunk = arith::XOrIOp::create(
          b, loc, e.remu(piece, e.c32(kPiecesPerLine)), e.remu(row, e.c32(8)));
      Value offset =
          e.add(e.add(stage, e.mul(e.divu(piece, e.c32(kPiecesPerLine)),
                                   e.c32(blockStride))),
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
  patterns.add<StoreOutputLowering, MergeSplitsLowering, StoreWaitLowering>(
      converter, patterns.getContext());
}
