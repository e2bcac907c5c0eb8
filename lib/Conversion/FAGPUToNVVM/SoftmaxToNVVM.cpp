//===- SoftmaxToNVVM.cpp - the online softmax to NVVM ---------------------===//
//
// The online softmax on accumulator fragments (Common/OnlineSoftmax.h):
// the step, rescaling, row sums by MMA and their partials.
// One pattern per op; WarpgroupToNVVM.cpp says how values change form.
//
//===----------------------------------------------------------------------===//

#include "WarpgroupLowering.h"

using namespace mlir;
using namespace mlir::fa;
using namespace mlir::fa::warpgroup;

namespace {

//===----------------------------------------------------------------------===//
// Online softmax
//===----------------------------------------------------------------------===//

struct SoftmaxStepLowering : OpConversionPattern<fagpu::SoftmaxStepOp> {
  using OpConversionPattern::OpConversionPattern;
  LogicalResult
  matchAndRewrite(fagpu::SoftmaxStepOp op, OneToNOpAdaptor adaptor,
                  ConversionPatternRewriter &rewriter) const override {
    if (op.getS().getType().getLayout() == fagpu::FragmentLayout::Lanes)
      return rewriter.notifyMatchFailure(op, "lanes: LanesSoftmaxStepLowering");
    SoftmaxConfig config = configOf(op);
    OpEmitter e(rewriter, op.getLoc(), op.getP().getType().getElementType(),
                config);
    SmallVector<Value> s(adaptor.getS());
    ValueRange mIn = adaptor.getM(), lIn = adaptor.getL();
    // Softcap first on every row tile, then tile by tile the mask and the
    // step; the moved flag chains across the thread's row tiles.
    Value effScale = e.applySoftcap(s, adaptor.getScaleLog2().front());
    int64_t rowTiles = op.getS().getType().getRowTiles();
    int64_t perTile = s.size() / rowTiles;
    SmallVector<Value> p, mOut, lOut, alpha, newO;
    OpEmitter::SoftmaxStep step;
    for (int64_t r = 0; r < rowTiles; ++r) {
      MutableArrayRef<Value> tile =
          MutableArrayRef<Value>(s).slice(r * perTile, perTile);
      if (op.getMasked()) {
        Value row0 = adaptor.getRow0().front();
        if (r)
          row0 = e.add(row0, e.c32(16 * r));
        e.applyMask(tile, adaptor.getKeyStart().front(), row0,
                    adaptor.getNk().front(), e.position().quadLane,
                    op.getDiagonalShift() ? adaptor.getDiagonalShift().front()
                                          : Value());
      }
      std::array<Value, 2> m = {mIn[2 * r], mIn[2 * r + 1]};
      std::array<Value, 2> l = {lIn[2 * r], lIn[2 * r + 1]};
      step = e.onlineSoftmax(tile, m, l, effScale, step.moved,
                             op.getFirstRowOnly());
      if (op.getO()) {
        // Register 4 i + e of the row tile is in its row g + 8 (e / 2).
        ValueRange o = adaptor.getO();
        int64_t oPerTile = o.size() / rowTiles;
        for (int64_t i = 0; i < oPerTile; ++i)
          newO.push_back(e.fmul(o[r * oPerTile + i], step.alpha[(i % 4) / 2]));
      }
      mOut.append(m.begin(), m.end());
      lOut.append(l.begin(), l.end());
      alpha.append(step.alpha.begin(), step.alpha.end());
      p.append(config.probsScale > 0 ? e.packProbabilitiesE4M3(tile)
                                     : e.packProbabilities(tile));
    }
    SmallVector<SmallVector<Value>> results = {p, mOut, lOut, alpha};
    if (op.getMoved())
      results.push_back({step.moved});
    if (op.getNewO())
      results.push_back(newO);
    rewriter.replaceOpWithMultiple(op, std::move(results));
    return success();
  }
};

/// The thread's row (0 .. 2 R - 1, as in a rows fragment) that accumulator
/// register `i` of a fragment with `perTile` registers a row tile lies in:
/// register 4 i + e of row tile r is in its row g + 8 (e / 2).
static int64_t accumulatorRow(int64_t i, int64_t perTile) {
  return 2 * (i / perTile) + (i % 4) / 2;
}

/// The row-sum tile: each of the warpgroup's threads writes 16-byte pieces
/// (row 0 of every k-step's 8-row atom is e4m3 ones, the rest zero), then
/// the writes are fenced for the async proxy that wgmma reads through and
/// the warpgroup meets at its named barrier.
struct InitRowSumTileLowering : OpConversionPattern<fagpu::InitRowSumTileOp> {
  using OpConversionPattern::OpConversionPattern;
  LogicalResult
  matchAndRewrite(fagpu::InitRowSumTileOp op, OneToNOpAdaptor adaptor,
                  ConversionPatternRewriter &rewriter) const override {
    fagpu::SharedTileType type = op.getTile().getType();
    if (!isa<Float8E4M3FNType>(type.getElementType()))
      return rewriter.notifyMatchFailure(op, "the ones are e4m3 codes");
    Location loc = op.getLoc();
    OpEmitter e(rewriter, loc, type.getElementType());
    ValueRange tile = adaptor.getTile();
    e.smem = tile[0];
    // Column block kk (`swizzle` keys) starts block_rows * swizzle bytes
    // after block kk - 1; the tile's 8 rows are its first 8 * swizzle
    // bytes, 16-byte piece c of them in row c / (swizzle / 16). The
    // swizzle moves pieces within a row only, so row 0 is the ones row
    // whatever it XORs.
    int64_t swizzle = type.getSwizzle(), perBlock = swizzle / 2;
    int64_t pieces = type.getCols() / swizzle * perBlock;
    constexpr uint32_t kFourOnes = 0x38383838; // e4m3 1.0 = 0x38
    auto vec = VectorType::get({4}, e.i32);
    Value tid =
        e.remu(NVVM::ThreadIdXOp::create(rewriter, loc, e.i32), e.c32(128));
    for (int64_t first = 0; first < pieces; first += 128) {
      Value piece = e.add(tid, e.c32(first));
      auto inTile =
          scf::IfOp::create(rewriter, loc, e.ult(piece, e.c32(pieces)), false);
      OpBuilder::InsertionGuard guard(rewriter);
      rewriter.setInsertionPointToStart(inTile.thenBlock());
      Value chunk = e.remu(piece, e.c32(perBlock));
      Value byte = e.add(e.mul(e.divu(piece, e.c32(perBlock)),
                               e.c32(type.getBlockRows() * swizzle)),
                         e.mul(chunk, e.c32(16)));
      Value onesRow = e.ult(chunk, e.c32(swizzle / 16));
      Value word = e.select(onesRow, e.c32(kFourOnes), e.c32(0));
      Value value = LLVM::PoisonOp::create(rewriter, loc, vec);
      for (int64_t i = 0; i < 4; ++i)
        value =
            LLVM::InsertElementOp::create(rewriter, loc, value, word, e.c32(i));
      LLVM::StoreOp::create(rewriter, loc, value,
                            e.sharedAt(e.add(tile[1], byte)), 16);
    }
    publishToAsyncProxy(e, loc, adaptor.getBarrier().front());
    rewriter.eraseOp(op);
    return success();
  }
};

/// Per row, the sum of the accumulator columns the thread holds.
struct RowPartialsLowering : OpConversionPattern<fagpu::RowPartialsOp> {
  using OpConversionPattern::OpConversionPattern;
  LogicalResult
  matchAndRewrite(fagpu::RowPartialsOp op, OneToNOpAdaptor adaptor,
                  ConversionPatternRewriter &rewriter) const override {
    OpEmitter e(rewriter, op.getLoc(), rewriter.getF16Type());
    ValueRange acc = adaptor.getAcc();
    int64_t rowTiles = op.getAcc().getType().getRowTiles();
    int64_t perTile = acc.size() / rowTiles;
    SmallVector<Value> rows(2 * rowTiles);
    for (int64_t i = 0; i < int64_t(acc.size()); ++i) {
      Value &row = rows[accumulatorRow(i, perTile)];
      row = row ? e.fadd(row, acc[i]) : acc[i];
    }
    rewriter.replaceOpWithMultiple(op, {rows});
    return success();
  }
};

/// O *= alpha; with FA4's flag only if some row of the warp moved (a warp
/// vote), else O as it was.
struct RescaleLowering : OpConversionPattern<fagpu::RescaleOp> {
  using OpConversionPattern::OpConversionPattern;
  LogicalResult
  matchAndRewrite(fagpu::RescaleOp op, OneToNOpAdaptor adaptor,
                  ConversionPatternRewriter &rewriter) const override {
    if (!op.getResult())
      return rewriter.notifyMatchFailure(op, "TMEM: TmemRescaleLowering");
    Location loc = op.getLoc();
    OpEmitter e(rewriter, loc, rewriter.getF16Type());
    ValueRange o = adaptor.getO(), alpha = adaptor.getAlpha();
    size_t perTile =
        o.size() / cast<fagpu::FragmentType>(op.getO().getType()).getRowTiles();
    auto scaled = [&]() {
      SmallVector<Value> r;
      for (size_t i = 0; i < o.size(); ++i)
        r.push_back(e.fmul(o[i], alpha[accumulatorRow(i, perTile)]));
      return r;
    };
    if (!op.getMoved()) {
      rewriter.replaceOpWithMultiple(op, {scaled()});
      return success();
    }
    Value anyMoved = NVVM::VoteSyncOp::create(
        rewriter, loc, rewriter.getI1Type(), e.c32(-1),
        adaptor.getMoved().front(),
        NVVM::VoteSyncKindAttr::get(rewriter.getContext(),
                                    NVVM::VoteSyncKind::any));
    SmallVector<Type> types(o.size(), e.f32);
    auto ifOp = scf::IfOp::create(rewriter, loc, types, anyMoved, true);
    {
      OpBuilder::InsertionGuard guard(rewriter);
      rewriter.setInsertionPointToStart(ifOp.thenBlock());
      scf::YieldOp::create(rewriter, loc, scaled());
      rewriter.setInsertionPointToStart(ifOp.elseBlock());
      scf::YieldOp::create(rewriter, loc, o);
    }
    rewriter.replaceOpWithMultiple(op, {SmallVector<Value>(ifOp.getResults())});
    return success();
  }
};

} // namespace

void mlir::fa::warpgroup::populateSoftmaxPatterns(
    const TypeConverter &converter, RewritePatternSet &patterns) {
  patterns.add<SoftmaxStepLowering, RescaleLowering, InitRowSumTileLowering,
               RowPartialsLowering>(converter, patterns.getContext());
}
