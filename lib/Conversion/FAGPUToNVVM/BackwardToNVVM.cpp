//===- BackwardToNVVM.cpp - the backward kernel's ops to NVVM -------------===//
//
// One pattern per op of FAGPUBackwardOps.td. Their fragments are mma.sync's
// (and wgmma's) accumulators: register 4 t + i of row tile r holds row
// row0 + 16 r + 8 (i / 2) and column 8 t + 2 (lane % 4) + i % 2, where
// row0 is the thread's first row (the warp's first plus lane / 4).
//
//===----------------------------------------------------------------------===//

#include "WarpgroupLowering.h"

#include "llvm/ADT/MapVector.h"
#include "llvm/Support/MathExtras.h"

#include <limits>

using namespace mlir;
using namespace mlir::fa;
using namespace mlir::fa::warpgroup;

namespace {

/// Where register `index` of an accumulator with `cols` columns sits: its
/// row offset from the thread's first row, and its column offset from the
/// quad lane's first column (2 * (lane % 4)).
struct Element {
  int64_t row, col;
};
Element elementOf(int64_t index, int64_t cols) {
  int64_t perTile = cols / 2;
  int64_t r = index / perTile, inTile = index % perTile;
  int64_t t = inTile / 4, i = inTile % 4;
  return {16 * r + 8 * (i / 2), 8 * t + i % 2};
}

/// The per-column values a transposed score tile reads (the LSE, D): one
/// f32 of `values` at each of the thread's columns col0 + 8 t + 2 q + c,
/// clamped below `count`, indexed by column offset.
SmallVector<Value> columnValues(OpEmitter &e, Value values, Value col0,
                                Value count, Value quadLane, int64_t cols) {
  OpBuilder &b = e.builder();
  Location loc = e.location();
  Value first = e.add(col0, e.mul(quadLane, e.c32(2)));
  SmallVector<Value> out(cols);
  for (int64_t t = 0; t < cols / 8; ++t)
    for (int64_t c = 0; c < 2; ++c) {
      Value col = e.add(first, e.c32(8 * t + c));
      Value at = e.select(e.ult(col, count), col, e.c32(0));
      out[8 * t + c] = LLVM::LoadOp::create(
          b, loc, e.f32, e.gep(e.globalPtr, e.f32, values, e.ext64(at)), 4);
    }
  return out;
}

struct BackwardProbsLowering : OpConversionPattern<fagpu::BackwardProbsOp> {
  using OpConversionPattern::OpConversionPattern;
  LogicalResult
  matchAndRewrite(fagpu::BackwardProbsOp op, OneToNOpAdaptor adaptor,
                  ConversionPatternRewriter &rewriter) const override {
    Location loc = op.getLoc();
    OpEmitter e(rewriter, loc, rewriter.getF16Type());
    fagpu::FragmentType type = op.getScores().getType();
    int64_t cols = type.getCols();
    Value col0 = adaptor.getCol0().front(), nq = adaptor.getNq().front();
    Value row0 = adaptor.getRow0().front(), nk = adaptor.getNk().front();
    Value scaleLog2 = adaptor.getScaleLog2().front();
    Value shift = op.getShift() ? adaptor.getShift().front() : Value();
    Value farShift =
        op.getWindowShift() ? adaptor.getWindowShift().front() : Value();
    OpEmitter::ThreadPosition pos = e.position();
    // LSE log2(e) per column; a row that saw no key (LSE = -inf) takes
    // +inf, so that its P is exp2(-inf) = 0 rather than exp2(+inf - inf).
    double inf = std::numeric_limits<double>::infinity();
    SmallVector<Value> lse =
        columnValues(e, adaptor.getLse().front(), col0, nq, pos.quadLane, cols);
    for (Value &l : lse) {
      if (!l)
        continue;
      Value none = arith::CmpFOp::create(
          rewriter, loc, arith::CmpFPredicate::OEQ, l, e.cf(-inf));
      l = e.select(none, e.cf(inf), e.fmul(l, e.cf(llvm::numbers::log2e)));
    }
    Value firstCol = e.add(col0, e.mul(pos.quadLane, e.c32(2)));
    SmallVector<Value> probs;
    for (auto [index, s] : llvm::enumerate(adaptor.getScores())) {
      Element at = elementOf(index, cols);
      Value row = e.add(row0, e.c32(at.row));
      Value col = e.add(firstCol, e.c32(at.col));
      Value visible =
          arith::AndIOp::create(rewriter, loc, e.ult(row, nk), e.ult(col, nq));
      if (shift) {
        // Causal (or a window's near edge): key row is visible from query
        // col iff row <= col + shift.
        Value seen = arith::CmpIOp::create(
            rewriter, loc, arith::CmpIPredicate::sle, row, e.add(col, shift));
        visible = arith::AndIOp::create(rewriter, loc, visible, seen);
      }
      if (farShift) {
        // A window's far edge: row >= col + window_shift.
        Value seen =
            arith::CmpIOp::create(rewriter, loc, arith::CmpIPredicate::sge, row,
                                  e.add(col, farShift));
        visible = arith::AndIOp::create(rewriter, loc, visible, seen);
      }
      Value p = e.ex2(e.fma(s, scaleLog2,
                            arith::NegFOp::create(rewriter, loc, lse[at.col])));
      probs.push_back(e.select(visible, p, e.cf(0.0)));
    }
    rewriter.replaceOpWithMultiple(op, {probs});
    return success();
  }
};

struct BackwardGradScoresLowering
    : OpConversionPattern<fagpu::BackwardGradScoresOp> {
  using OpConversionPattern::OpConversionPattern;
  LogicalResult
  matchAndRewrite(fagpu::BackwardGradScoresOp op, OneToNOpAdaptor adaptor,
                  ConversionPatternRewriter &rewriter) const override {
    Location loc = op.getLoc();
    OpEmitter e(rewriter, loc, rewriter.getF16Type());
    int64_t cols = op.getProbs().getType().getCols();
    OpEmitter::ThreadPosition pos = e.position();
    SmallVector<Value> dots =
        columnValues(e, adaptor.getRowDots().front(), adaptor.getCol0().front(),
                     adaptor.getNq().front(), pos.quadLane, cols);
    SmallVector<Value> grads;
    for (auto [index, p, dp] :
         llvm::enumerate(adaptor.getProbs(), adaptor.getGradProbs())) {
      Element at = elementOf(index, cols);
      grads.push_back(
          e.fmul(p, arith::SubFOp::create(rewriter, loc, dp, dots[at.col])));
    }
    rewriter.replaceOpWithMultiple(op, {grads});
    return success();
  }
};

/// Operand A's k-step k of a row tile is n8 tiles 2k and 2k + 1 of the
/// accumulator: (row g, cols 2q, 2q + 1), (row g + 8, ...) of each.
struct ToOperandALowering : OpConversionPattern<fagpu::ToOperandAOp> {
  using OpConversionPattern::OpConversionPattern;
  LogicalResult
  matchAndRewrite(fagpu::ToOperandAOp op, OneToNOpAdaptor adaptor,
                  ConversionPatternRewriter &rewriter) const override {
    OpEmitter e(rewriter, op.getLoc(),
                op.getResult().getType().getElementType());
    ValueRange acc = adaptor.getAcc();
    SmallVector<Value> packed;
    for (size_t i = 0; i < acc.size(); i += 2)
      packed.push_back(e.packPair(acc[i], acc[i + 1]));
    rewriter.replaceOpWithMultiple(op, {packed});
    return success();
  }
};

/// Element (R, C) of the fragment goes to row C, column R of the tile:
/// byte C * rowBytes + 16 ((R / 8) ^ (C & 7)) + 2 (R % 8) of its 128-byte
/// swizzle span, one 16-bit store each (the transpose scatters a thread's
/// elements over eight rows).
struct StoreTransposedLowering : OpConversionPattern<fagpu::StoreTransposedOp> {
  using OpConversionPattern::OpConversionPattern;
  LogicalResult
  matchAndRewrite(fagpu::StoreTransposedOp op, OneToNOpAdaptor adaptor,
                  ConversionPatternRewriter &rewriter) const override {
    Location loc = op.getLoc();
    fagpu::SharedTileType tile = op.getTile().getType();
    OpEmitter e(rewriter, loc, tile.getElementType());
    fagpu::FragmentType type = op.getAcc().getType();
    int64_t cols = type.getCols(), rowBytes = tile.getCols() * 2;
    OpEmitter::ThreadPosition pos = e.position();
    Value g = e.divu(pos.lane, e.c32(4));
    Value row0 = e.add(e.mul(e.warpIndex(), e.c32(16 * type.getRowTiles())), g);
    Value col0 = e.mul(pos.quadLane, e.c32(2));
    ValueRange dst = adaptor.getTile();
    e.smem = dst[0];
    for (auto [index, v] : llvm::enumerate(adaptor.getAcc())) {
      Element at = elementOf(index, cols);
      Value row = e.add(row0, e.c32(at.row)); // the tile's column
      Value col = e.add(col0, e.c32(at.col)); // the tile's row
      Value chunk = arith::XOrIOp::create(
          rewriter, loc, e.divu(row, e.c32(8)),
          arith::AndIOp::create(rewriter, loc, col, e.c32(7)));
      Value byte =
          e.add(e.add(e.mul(col, e.c32(rowBytes)), e.mul(chunk, e.c32(16))),
                e.mul(e.remu(row, e.c32(8)), e.c32(2)));
      Value narrow = arith::TruncFOp::create(rewriter, loc, e.half, v);
      LLVM::StoreOp::create(rewriter, loc, narrow,
                            e.sharedAt(e.add(dst[1], byte)), 2);
    }
    rewriter.eraseOp(op);
    return success();
  }
};

/// Each of the thread's rows below nrows: one f32 atomic add (its value
/// unused: a reduction) per
/// element, in a branch per row.
struct AtomicAddRowsLowering : OpConversionPattern<fagpu::AtomicAddRowsOp> {
  using OpConversionPattern::OpConversionPattern;
  LogicalResult
  matchAndRewrite(fagpu::AtomicAddRowsOp op, OneToNOpAdaptor adaptor,
                  ConversionPatternRewriter &rewriter) const override {
    Location loc = op.getLoc();
    OpEmitter e(rewriter, loc, rewriter.getF16Type());
    fagpu::FragmentType type = op.getAcc().getType();
    int64_t cols = type.getCols();
    Value row0 = adaptor.getRow0().front(), rows = adaptor.getNrows().front();
    Value base = adaptor.getBase().front(), scale = adaptor.getScale().front();
    OpEmitter::ThreadPosition pos = e.position();
    Value col0 = e.mul(pos.quadLane, e.c32(2));
    ValueRange acc = adaptor.getAcc();
    // The thread's rows, each with its registers.
    llvm::MapVector<int64_t, SmallVector<std::pair<int64_t, Value>>> byRow;
    for (auto [index, v] : llvm::enumerate(acc)) {
      Element at = elementOf(index, cols);
      byRow[at.row].push_back({at.col, v});
    }
    for (auto &[rowOffset, elements] : byRow) {
      Value row = e.add(row0, e.c32(rowOffset));
      auto ifRow = scf::IfOp::create(rewriter, loc, e.ult(row, rows),
                                     /*withElseRegion=*/false);
      OpBuilder::InsertionGuard guard(rewriter);
      rewriter.setInsertionPoint(ifRow.thenBlock()->getTerminator());
      Value rowBase =
          e.gep(e.globalPtr, e.f32, base, e.mul(e.ext64(row), e.c64(cols)));
      auto at = [&](int64_t colOffset) {
        return e.gep(e.globalPtr, e.f32, rowBase,
                     e.ext64(e.add(col0, e.c32(colOffset))));
      };
      if (op.getPairs()) {
        // Columns 2q + 8t and + 1 are adjacent (8-byte aligned: even
        // columns of rows of an even count): one vector reduction.
        for (size_t i = 0; i + 1 < elements.size(); i += 2)
          LLVM::InlineAsmOp::create(
              rewriter, loc, TypeRange(),
              ValueRange{at(elements[i].first),
                         e.fmul(elements[i].second, scale),
                         e.fmul(elements[i + 1].second, scale)},
              "red.global.add.v2.f32 [$0], {$1, $2};", "l,f,f",
              /*has_side_effects=*/true, /*is_align_stack=*/false,
              LLVM::tailcallkind::TailCallKind::None, LLVM::AsmDialectAttr(),
              ArrayAttr());
        continue;
      }
      for (auto [colOffset, v] : elements)
        LLVM::AtomicRMWOp::create(rewriter, loc, LLVM::AtomicBinOp::fadd,
                                  at(colOffset), e.fmul(v, scale),
                                  LLVM::AtomicOrdering::monotonic);
    }
    rewriter.eraseOp(op);
    return success();
  }
};

/// Thread 0 spins on an acquire load (GPU scope) until the turn comes; the
/// CTA waits for it at a barrier.
struct SemaphoreWaitLowering : OpConversionPattern<fagpu::SemaphoreWaitOp> {
  using OpConversionPattern::OpConversionPattern;
  LogicalResult
  matchAndRewrite(fagpu::SemaphoreWaitOp op, OneToNOpAdaptor adaptor,
                  ConversionPatternRewriter &rewriter) const override {
    Location loc = op.getLoc();
    OpEmitter e(rewriter, loc, rewriter.getF16Type());
    Value semaphore = adaptor.getSemaphore().front();
    Value turn = adaptor.getTurn().front();
    auto ifFirst =
        scf::IfOp::create(rewriter, loc, e.eq(e.threadId(), e.c32(0)),
                          /*withElseRegion=*/false);
    {
      OpBuilder::InsertionGuard guard(rewriter);
      rewriter.setInsertionPoint(ifFirst.thenBlock()->getTerminator());
      auto spin =
          scf::WhileOp::create(rewriter, loc, TypeRange(), ValueRange());
      Block *before = rewriter.createBlock(&spin.getBefore());
      Value seen = LLVM::LoadOp::create(
          rewriter, loc, e.i32, semaphore, /*alignment=*/4,
          /*isVolatile=*/false, /*isNonTemporal=*/false,
          /*isInvariant=*/false, /*isInvariantGroup=*/false,
          LLVM::AtomicOrdering::acquire, "device");
      Value waiting = arith::CmpIOp::create(
          rewriter, loc, arith::CmpIPredicate::ne, seen, turn);
      scf::ConditionOp::create(rewriter, loc, waiting, ValueRange());
      (void)before;
      rewriter.createBlock(&spin.getAfter());
      scf::YieldOp::create(rewriter, loc);
    }
    NVVM::Barrier0Op::create(rewriter, loc);
    rewriter.eraseOp(op);
    return success();
  }
};

/// Every thread's writes are performed at GPU scope (membar.gl: the
/// atomic adds included, which a release on thread 0 alone would not
/// order), the CTA meets at a barrier, then thread 0 adds one (the
/// semaphore pattern of CUTLASS and FlashAttention-3).
struct SemaphoreSignalLowering : OpConversionPattern<fagpu::SemaphoreSignalOp> {
  using OpConversionPattern::OpConversionPattern;
  LogicalResult
  matchAndRewrite(fagpu::SemaphoreSignalOp op, OneToNOpAdaptor adaptor,
                  ConversionPatternRewriter &rewriter) const override {
    Location loc = op.getLoc();
    OpEmitter e(rewriter, loc, rewriter.getF16Type());
    NVVM::MembarOp::create(rewriter, loc, NVVM::MemScopeKind::GPU);
    NVVM::Barrier0Op::create(rewriter, loc);
    auto ifFirst =
        scf::IfOp::create(rewriter, loc, e.eq(e.threadId(), e.c32(0)),
                          /*withElseRegion=*/false);
    OpBuilder::InsertionGuard guard(rewriter);
    rewriter.setInsertionPoint(ifFirst.thenBlock()->getTerminator());
    LLVM::AtomicRMWOp::create(rewriter, loc, LLVM::AtomicBinOp::add,
                              adaptor.getSemaphore().front(), e.c32(1),
                              LLVM::AtomicOrdering::release, "device");
    rewriter.eraseOp(op);
    return success();
  }
};

} // namespace

void mlir::fa::warpgroup::populateBackwardPatterns(
    const TypeConverter &converter, RewritePatternSet &patterns) {
  patterns
      .add<BackwardProbsLowering, BackwardGradScoresLowering,
           ToOperandALowering, StoreTransposedLowering, AtomicAddRowsLowering,
           SemaphoreWaitLowering, SemaphoreSignalLowering>(
          converter, patterns.getContext());
}
