//===- PipelineToNVVM.cpp - pipelines and tiles to NVVM -------------------===//
//
// TMA pipelines (mbarrier full/empty rings, stages, phases), TMA loads
// (paged ones too) and shared-memory tiles.
// One pattern per op; WarpgroupToNVVM.cpp says how values change form.
//
//===----------------------------------------------------------------------===//

#include "WarpgroupLowering.h"

using namespace mlir;
using namespace mlir::fa;
using namespace mlir::fa::warpgroup;

namespace {

//===----------------------------------------------------------------------===//
// Pipelines and shared-memory tiles
//===----------------------------------------------------------------------===//

struct CreatePipelineLowering : OpConversionPattern<fagpu::CreatePipelineOp> {
  using OpConversionPattern::OpConversionPattern;
  LogicalResult
  matchAndRewrite(fagpu::CreatePipelineOp op, OneToNOpAdaptor adaptor,
                  ConversionPatternRewriter &rewriter) const override {
    OpEmitter e(rewriter, op.getLoc(), elementOf(op.getType()));
    if (!hasSharedMemory(op))
      return rewriter.notifyMatchFailure(op, "no fa_smem in the module");
    SmallVector<Value> values = {sharedBase(e, op, op.getType().isCpAsync()),
                                 e.c32(op.getBarrierOffset()),
                                 e.c32(op.getTileOffset())};
    rewriter.replaceOpWithMultiple(op, {values});
    return success();
  }
};

/// One thread initialises the barriers (stage by stage: the full barriers
/// of its buffers, then their empty ones), fences them for the async
/// proxy (TMA), and the CTA waits for it.
struct InitPipelinesLowering : OpConversionPattern<fagpu::InitPipelinesOp> {
  using OpConversionPattern::OpConversionPattern;
  LogicalResult
  matchAndRewrite(fagpu::InitPipelinesOp op, OneToNOpAdaptor adaptor,
                  ConversionPatternRewriter &rewriter) const override {
    Location loc = op.getLoc();
    OpEmitter e(rewriter, loc, rewriter.getF16Type());
    Value tid = NVVM::ThreadIdXOp::create(rewriter, loc, e.i32);
    auto ifInit = scf::IfOp::create(rewriter, loc, e.eq(tid, e.c32(0)), false);
    {
      OpBuilder::InsertionGuard guard(rewriter);
      rewriter.setInsertionPointToStart(ifInit.thenBlock());
      Value producerArrivals = e.c32(1);
      Value consumerArrivals = e.c32(op.getConsumerArrivals());
      for (auto [pipeline, lowered] :
           llvm::zip(op.getPipelines(), adaptor.getPipelines())) {
        PipelineValues p(pipeline, lowered);
        for (int64_t s = 0; s < p.type.getStages(); ++s) {
          for (int64_t buf = 0; buf < p.type.getBuffers(); ++buf)
            NVVM::MBarrierInitOp::create(rewriter, loc,
                                         p.full(e, e.c32(s), buf),
                                         producerArrivals, Value());
          for (int64_t buf = 0; buf < p.type.getBuffers(); ++buf)
            NVVM::MBarrierInitOp::create(rewriter, loc,
                                         p.empty(e, e.c32(s), buf),
                                         consumerArrivals, Value());
        }
      }
      NVVM::FenceMbarrierInitOp::create(rewriter, loc);
    }
    NVVM::Barrier0Op::create(rewriter, loc);
    rewriter.eraseOp(op);
    return success();
  }
};

struct PipelineAcquireLowering : OpConversionPattern<fagpu::PipelineAcquireOp> {
  using OpConversionPattern::OpConversionPattern;
  LogicalResult
  matchAndRewrite(fagpu::PipelineAcquireOp op, OneToNOpAdaptor adaptor,
                  ConversionPatternRewriter &rewriter) const override {
    PipelineValues p(op.getPipeline(), adaptor.getPipeline());
    OpEmitter e(rewriter, op.getLoc(), elementOf(p.type));
    e.waitBarrier(p.empty(e, adaptor.getStage().front(), op.getBuffer()),
                  adaptor.getParity().front());
    rewriter.eraseOp(op);
    return success();
  }
};

/// stage = use mod S; parity = (use / S) mod 2, flipped by the stage's
/// phase bit and, for a producer, once more (the empty barrier's previous
/// round). A result nobody reads is not computed: a stage costs no
/// division and a parity no remainder unless the phase bits need it.
struct PipelinePositionLowering
    : OpConversionPattern<fagpu::PipelinePositionOp> {
  using OpConversionPattern::OpConversionPattern;
  LogicalResult
  matchAndRewrite(fagpu::PipelinePositionOp op, OneToNOpAdaptor adaptor,
                  ConversionPatternRewriter &rewriter) const override {
    Location loc = op.getLoc();
    OpEmitter e(rewriter, loc, rewriter.getF16Type());
    int64_t stages =
        cast<fagpu::PipelineType>(op.getPipeline().getType()).getStages();
    Value use = adaptor.getUse().front();
    Value stage;
    auto stageOfUse = [&] {
      if (!stage)
        stage = e.remu(use, e.c32(stages));
      return stage;
    };
    if (!op.getStage().use_empty())
      stageOfUse();
    Value parity;
    if (!op.getParity().use_empty()) {
      parity = e.andi(e.divu(use, e.c32(stages)), e.c32(1));
      if (op.getPhases()) {
        Value carried = e.andi(
            arith::ShRUIOp::create(rewriter, loc, adaptor.getPhases().front(),
                                   stageOfUse()),
            e.c32(1));
        parity = arith::XOrIOp::create(rewriter, loc, parity, carried);
      }
      if (op.getProducer())
        parity = arith::XOrIOp::create(rewriter, loc, parity, e.c32(1));
    }
    // An unread result is replaced by a value of the right type that no one
    // uses.
    rewriter.replaceOp(op, {stage ? stage : use, parity ? parity : use});
    return success();
  }
};

/// Bit s flips when stage s was used an odd number of times,
/// ceil((uses - s) / S).
struct PipelineAdvancePhasesLowering
    : OpConversionPattern<fagpu::PipelineAdvancePhasesOp> {
  using OpConversionPattern::OpConversionPattern;
  LogicalResult
  matchAndRewrite(fagpu::PipelineAdvancePhasesOp op, OneToNOpAdaptor adaptor,
                  ConversionPatternRewriter &rewriter) const override {
    Location loc = op.getLoc();
    OpEmitter e(rewriter, loc, rewriter.getF16Type());
    int64_t stages =
        cast<fagpu::PipelineType>(op.getPipeline().getType()).getStages();
    Value bits = adaptor.getPhases().front();
    Value uses = adaptor.getUses().front();
    for (int64_t s = 0; s < stages; ++s) {
      Value stageUses =
          e.divu(e.add(uses, e.c32(stages - 1 - s)), e.c32(stages));
      Value flip = arith::ShLIOp::create(rewriter, loc,
                                         e.andi(stageUses, e.c32(1)), e.c32(s));
      bits = arith::XOrIOp::create(rewriter, loc, bits, flip);
    }
    rewriter.replaceOp(op, bits);
    return success();
  }
};

/// What every TMA load into a pipeline stage does around its boxes: one
/// arrival on the stage's full barrier announcing the whole tile's bytes,
/// then `issue(emitter, tileOffset, barrier, tile)` writes the boxes into
/// the stage's buffer.
template <typename Op, typename Adaptor>
static LogicalResult lowerStageLoad(
    Op op, Adaptor adaptor, ConversionPatternRewriter &rewriter,
    llvm::function_ref<void(OpEmitter &, Value, Value, fagpu::SharedTileType)>
        issue) {
  PipelineValues p(op.getPipeline(), adaptor.getPipeline());
  fagpu::SharedTileType tile = p.type.getBufferTile(op.getBuffer());
  OpEmitter e(rewriter, op.getLoc(), elementOf(p.type), SoftmaxConfig(),
              tile.getCols());
  Value stage = adaptor.getStage().front();
  Value full = p.full(e, stage, op.getBuffer());
  e.expectBytes(full, tile.getBytes());
  issue(e, p.tile(e, stage, op.getBuffer()), full, tile);
  rewriter.eraseOp(op);
  return success();
}

struct TmaLoadLowering : OpConversionPattern<fagpu::TmaLoadOp> {
  using OpConversionPattern::OpConversionPattern;
  LogicalResult
  matchAndRewrite(fagpu::TmaLoadOp op, OneToNOpAdaptor adaptor,
                  ConversionPatternRewriter &rewriter) const override {
    return lowerStageLoad(
        op, adaptor, rewriter,
        [&](OpEmitter &e, Value tileOffset, Value full,
            fagpu::SharedTileType tile) {
          e.loadTile(adaptor.getMap().front(), tileOffset, tile.getRows(),
                     adaptor.getRow().front(),
                     llvm::to_vector(llvm::map_range(
                         adaptor.getMatrixCoords(),
                         [](ValueRange v) { return v.front(); })),
                     full, /*firstRow=*/0, /*tileRows=*/0,
                     op.getColumn() ? adaptor.getColumn().front() : Value(),
                     tile.getSwizzle());
        });
  }
};

/// One box of `page_rows` rows per page and column block, page i's at
/// tile row i * page_rows.
struct TmaLoadPagesLowering : OpConversionPattern<fagpu::TmaLoadPagesOp> {
  using OpConversionPattern::OpConversionPattern;
  LogicalResult
  matchAndRewrite(fagpu::TmaLoadPagesOp op, OneToNOpAdaptor adaptor,
                  ConversionPatternRewriter &rewriter) const override {
    int64_t pageRows = op.getPageRows();
    return lowerStageLoad(
        op, adaptor, rewriter,
        [&](OpEmitter &e, Value tileOffset, Value full,
            fagpu::SharedTileType tile) {
          for (auto [i, page] : llvm::enumerate(adaptor.getPages()))
            e.loadTile(
                adaptor.getMap().front(), tileOffset, pageRows,
                adaptor.getRow().front(),
                SmallVector<Value>{adaptor.getHead().front(), page.front()},
                full, /*firstRow=*/int64_t(i) * pageRows,
                /*tileRows=*/tile.getRows());
        });
  }
};

struct PipelineCommitLowering : OpConversionPattern<fagpu::PipelineCommitOp> {
  using OpConversionPattern::OpConversionPattern;
  LogicalResult
  matchAndRewrite(fagpu::PipelineCommitOp op, OneToNOpAdaptor adaptor,
                  ConversionPatternRewriter &rewriter) const override {
    PipelineValues p(op.getPipeline(), adaptor.getPipeline());
    OpEmitter e(rewriter, op.getLoc(), elementOf(p.type));
    NVVM::MBarrierArriveOp::create(
        rewriter, op.getLoc(), Type(),
        p.full(e, adaptor.getStage().front(), op.getBuffer()), Value());
    rewriter.eraseOp(op);
    return success();
  }
};

struct PipelineWaitLowering : OpConversionPattern<fagpu::PipelineWaitOp> {
  using OpConversionPattern::OpConversionPattern;
  LogicalResult
  matchAndRewrite(fagpu::PipelineWaitOp op, OneToNOpAdaptor adaptor,
                  ConversionPatternRewriter &rewriter) const override {
    PipelineValues p(op.getPipeline(), adaptor.getPipeline());
    OpEmitter e(rewriter, op.getLoc(), elementOf(p.type));
    e.waitBarrier(p.full(e, adaptor.getStage().front(), op.getBuffer()),
                  adaptor.getParity().front());
    rewriter.eraseOp(op);
    return success();
  }
};

/// One arrival per consumer warp (lane 0).
struct PipelineReleaseLowering : OpConversionPattern<fagpu::PipelineReleaseOp> {
  using OpConversionPattern::OpConversionPattern;
  LogicalResult
  matchAndRewrite(fagpu::PipelineReleaseOp op, OneToNOpAdaptor adaptor,
                  ConversionPatternRewriter &rewriter) const override {
    PipelineValues p(op.getPipeline(), adaptor.getPipeline());
    OpEmitter e(rewriter, op.getLoc(), elementOf(p.type));
    Value empty = p.empty(e, adaptor.getStage().front(), op.getBuffer());
    if (op.getCommit()) {
      // The issuing thread's tcgen05.mma done: the stage is free.
      NVVM::Tcgen05CommitOp::create(rewriter, op.getLoc(), empty, Value());
      rewriter.eraseOp(op);
      return success();
    }
    e.onLaneZero([&] {
      NVVM::MBarrierArriveOp::create(rewriter, op.getLoc(), Type(), empty,
                                     Value());
    });
    rewriter.eraseOp(op);
    return success();
  }
};

struct PipelineTileLowering : OpConversionPattern<fagpu::PipelineTileOp> {
  using OpConversionPattern::OpConversionPattern;
  LogicalResult
  matchAndRewrite(fagpu::PipelineTileOp op, OneToNOpAdaptor adaptor,
                  ConversionPatternRewriter &rewriter) const override {
    PipelineValues p(op.getPipeline(), adaptor.getPipeline());
    OpEmitter e(rewriter, op.getLoc(), elementOf(p.type));
    SmallVector<Value> tile = {
        p.base, p.tile(e, adaptor.getStage().front(), op.getBuffer())};
    rewriter.replaceOpWithMultiple(op, {tile});
    return success();
  }
};

struct SharedTileLowering : OpConversionPattern<fagpu::SharedTileOp> {
  using OpConversionPattern::OpConversionPattern;
  LogicalResult
  matchAndRewrite(fagpu::SharedTileOp op, OneToNOpAdaptor adaptor,
                  ConversionPatternRewriter &rewriter) const override {
    if (!hasSharedMemory(op))
      return rewriter.notifyMatchFailure(op, "no fa_smem in the module");
    OpEmitter e(rewriter, op.getLoc(), op.getType().getElementType());
    SmallVector<Value> tile = {sharedBase(e, op, op.getType().isRowMajor()),
                               e.c32(op.getOffset())};
    rewriter.replaceOpWithMultiple(op, {tile});
    return success();
  }
};

/// Rows index * R ..: R 128-byte rows further in each column block.
struct TileRowsLowering : OpConversionPattern<fagpu::TileRowsOp> {
  using OpConversionPattern::OpConversionPattern;
  LogicalResult
  matchAndRewrite(fagpu::TileRowsOp op, OneToNOpAdaptor adaptor,
                  ConversionPatternRewriter &rewriter) const override {
    OpEmitter e(rewriter, op.getLoc(), op.getType().getElementType());
    ValueRange tile = adaptor.getTile();
    int64_t rowBytes = op.getType().getRows() * op.getType().getSwizzle();
    // The rows' offset depends on the index alone (a consumer's): computed
    // once, where the index is defined, not per tile.
    Value index = adaptor.getIndex().front();
    Value rowOffset;
    {
      OpBuilder::InsertionGuard guard(rewriter);
      rewriter.setInsertionPointAfterValue(index);
      rowOffset = e.mul(index, e.c32(rowBytes));
    }
    SmallVector<Value> rows = {tile[0], e.add(tile[1], rowOffset)};
    rewriter.replaceOpWithMultiple(op, {rows});
    return success();
  }
};

/// Piece p of the tile (8 columns: 8 e4m3 bytes in, 16 bytes out) is row
/// p / (C / 8), columns 8 (p mod C / 8) ..; thread t of the warpgroup takes
/// pieces t, t + 128, ... In a column_blocks tile, byte x of row r's line
/// in column block cb lies at cb * rows * 128 + r * 128 + ((x / 16) XOR
/// (r mod 8)) * 16 + x mod 16 (the 128-byte swizzle). Where a thread's
/// next piece is 8k rows further (C / 8 divides 128 / 8: D = 128), the XOR
/// is the same for all its pieces and their addresses step by a constant.
/// A pair of codes is one cvt.rn.f16x2.e4m3x2 (measured faster than
/// moving the codes' bits into an f16 by a byte permute, a shift and a
/// logic op: bench/results/2026-12-06-fp8-kv-cache-h100.md).
struct WidenTileLowering : OpConversionPattern<fagpu::WidenTileOp> {
  using OpConversionPattern::OpConversionPattern;
  LogicalResult
  matchAndRewrite(fagpu::WidenTileOp op, OneToNOpAdaptor adaptor,
                  ConversionPatternRewriter &rewriter) const override {
    Location loc = op.getLoc();
    MLIRContext *ctx = rewriter.getContext();
    fagpu::SharedTileType dstType = op.getDst().getType();
    bool bf16 = dstType.getElementType().isBF16();
    OpEmitter e(rewriter, loc, dstType.getElementType());
    ValueRange src = adaptor.getSrc(), dst = adaptor.getDst();
    int64_t rows = dstType.getRows(), cols = dstType.getCols();
    int64_t piecesPerRow = cols / 8, pieces = rows * piecesPerRow;
    int64_t lineBytes = fagpu::kMaxSwizzleBytes;
    // Bytes between column blocks: a block of `rows` 128-byte lines.
    int64_t blockBytes = rows * lineBytes;
    // Where byte `x` (a multiple of 8) of row `row`'s columns lies.
    auto swizzled = [&](Value row, Value x) {
      Value block = e.divu(x, e.c32(lineBytes));
      Value inLine = e.remu(x, e.c32(lineBytes));
      Value chunk = arith::XOrIOp::create(
          rewriter, loc, e.divu(inLine, e.c32(16)), e.remu(row, e.c32(8)));
      return e.add(
          e.add(e.mul(block, e.c32(blockBytes)), e.mul(row, e.c32(lineBytes))),
          e.add(e.mul(chunk, e.c32(16)), e.remu(inLine, e.c32(16))));
    };
    auto i32x4 = VectorType::get({4}, e.i32);
    auto f16x2 = VectorType::get({2}, rewriter.getF16Type());
    auto i16x4 = VectorType::get({4}, rewriter.getI16Type());
    auto i8x2 = VectorType::get({2}, rewriter.getI8Type());
    Type e4m3 = Float8E4M3FNType::get(ctx);
    // Two codes -> their values, as two f16 or bf16 in a word (no e4m3 ->
    // bf16 cvt before sm_100: through f32, exactly).
    auto widen = [&](Value pair) -> Value {
      Value halves = NVVM::ConvertF8x2ToF16x2Op::create(
          rewriter, loc, f16x2,
          LLVM::BitcastOp::create(rewriter, loc, i8x2, pair),
          /*relu=*/false, e4m3);
      if (bf16) {
        auto f32x2 = VectorType::get({2}, e.f32);
        halves = LLVM::FPTruncOp::create(
            rewriter, loc, VectorType::get({2}, rewriter.getBF16Type()),
            LLVM::FPExtOp::create(rewriter, loc, f32x2, halves));
      }
      return LLVM::BitcastOp::create(rewriter, loc, e.i32, halves);
    };
    Value thread =
        e.remu(NVVM::ThreadIdXOp::create(rewriter, loc, e.i32), e.c32(128));
    // A thread's pieces 128 apart are 128 / (C / 8) rows apart; a multiple
    // of 8 rows keeps the swizzle's XOR, so one address and a step serve.
    bool steps = 128 % piecesPerRow == 0 && (128 / piecesPerRow) % 8 == 0;
    Value srcFirst, dstFirst;
    if (steps) {
      Value row = e.divu(thread, e.c32(piecesPerRow));
      Value column = e.mul(e.remu(thread, e.c32(piecesPerRow)), e.c32(8));
      srcFirst = e.add(src[1], swizzled(row, column));
      dstFirst = e.add(dst[1], swizzled(row, e.mul(column, e.c32(2))));
    }
    for (int64_t first = 0; first < pieces; first += 128) {
      Value piece = e.add(thread, e.c32(first));
      std::optional<scf::IfOp> inTile;
      OpBuilder::InsertionGuard guard(rewriter);
      if (first + 128 > pieces) {
        inTile = scf::IfOp::create(rewriter, loc, e.ult(piece, e.c32(pieces)),
                                   false);
        rewriter.setInsertionPointToStart(inTile->thenBlock());
      }
      Value srcAt, dstAt;
      if (steps) {
        int64_t step = first / piecesPerRow * lineBytes;
        srcAt = e.add(srcFirst, e.c32(step));
        dstAt = e.add(dstFirst, e.c32(step));
      } else {
        Value row = e.divu(piece, e.c32(piecesPerRow));
        Value column = e.mul(e.remu(piece, e.c32(piecesPerRow)), e.c32(8));
        srcAt = e.add(src[1], swizzled(row, column));
        dstAt = e.add(dst[1], swizzled(row, e.mul(column, e.c32(2))));
      }
      e.smem = src[0];
      Value codes =
          LLVM::LoadOp::create(rewriter, loc, i16x4, e.sharedAt(srcAt), 8);
      Value words = LLVM::PoisonOp::create(rewriter, loc, i32x4);
      for (int64_t i = 0; i < 4; ++i) {
        Value pair =
            LLVM::ExtractElementOp::create(rewriter, loc, codes, e.c32(i));
        words = LLVM::InsertElementOp::create(rewriter, loc, words, widen(pair),
                                              e.c32(i));
      }
      e.smem = dst[0];
      LLVM::StoreOp::create(rewriter, loc, words, e.sharedAt(dstAt), 16);
    }
    publishToAsyncProxy(e, loc, adaptor.getBarrier().front());
    rewriter.eraseOp(op);
    return success();
  }
};

} // namespace

void mlir::fa::warpgroup::populatePipelinePatterns(
    const TypeConverter &converter, RewritePatternSet &patterns) {
  patterns.add<CreatePipelineLowering, InitPipelinesLowering,
               PipelineAcquireLowering, TmaLoadLowering, TmaLoadPagesLowering,
               PipelineCommitLowering, PipelineWaitLowering,
               PipelineReleaseLowering, PipelineTileLowering,
               PipelinePositionLowering, PipelineAdvancePhasesLowering,
               SharedTileLowering, TileRowsLowering, WidenTileLowering>(
      converter, patterns.getContext());
}
