//===- BackwardToLoops.cpp - the backward's tile ops to scf loops ---------===//
//
// One pattern per tile op of FABackwardOps.td, each a loop nest of scalar
// loads, f32 arithmetic and stores: the reference host lowering of the
// backward, as FAToLoops.cpp is the forward's.
//
//===----------------------------------------------------------------------===//

#include "fa/Conversion/Passes.h"
#include "fa/Dialect/FA/IR/FAOps.h"

#include "Modifications.h"
#include "ScalarBuilder.h"

#include "mlir/IR/PatternMatch.h"

using namespace mlir;
using namespace mlir::fa;
using namespace mlir::fa::loops;

namespace {

/// Rows of a (possibly dynamic) tile or row vector.
Value rowsOf(ScalarBuilder &sb, Value v) { return sb.dim(v, 0); }
/// Static columns of a tile.
Value columnsOf(ScalarBuilder &sb, Value v) {
  return sb.index(cast<MemRefType>(v.getType()).getDimSize(1));
}

/// The gradients' products into an f32 accumulator tile `acc` [I, J]
/// (`rows` of them, the static columns):
///   acc[i, j] += sum_{k < depth} lhs(i, k) rhs(k, j)          (no scale)
///   acc[i, j] += scale sum_{k < depth} lhs(i, k) rhs(k, j)
/// Without a scale the sum runs on from acc's value; with one it is formed
/// from 0 and added once, scaled.
void accumulateProduct(ScalarBuilder &sb, Location loc, Value acc, Value rows,
                       Value depth, std::optional<double> scale,
                       function_ref<Value(Value i, Value k)> lhs,
                       function_ref<Value(Value k, Value j)> rhs) {
  OpBuilder &b = sb.b;
  sb.forLoop(rows, [&](Value i) {
    sb.forLoop(columnsOf(sb, acc), [&](Value j) {
      Value start = scale ? sb.f32(0.0) : sb.load(acc, {i, j});
      Value sum = sb.reduce(depth, start, [&](Value k, Value a) {
        return math::FmaOp::create(b, loc, lhs(i, k), rhs(k, j), a)
            .getResult();
      });
      if (scale)
        sum = math::FmaOp::create(b, loc, sum, sb.f32(*scale),
                                  sb.load(acc, {i, j}));
      sb.store(sum, acc, {i, j});
    });
  });
}

struct RowDotLowering : OpRewritePattern<RowDotOp> {
  using OpRewritePattern::OpRewritePattern;
  LogicalResult matchAndRewrite(RowDotOp op,
                                PatternRewriter &rewriter) const override {
    ScalarBuilder sb{rewriter, op.getLoc()};
    Location loc = op.getLoc();
    sb.forLoop(rowsOf(sb, op.getGradOut()), [&](Value r) {
      Value dot = sb.reduce(
          columnsOf(sb, op.getGradOut()), sb.f32(0.0), [&](Value c, Value acc) {
            return math::FmaOp::create(rewriter, loc,
                                       sb.loadF32(op.getGradOut(), {r, c}),
                                       sb.loadF32(op.getOut(), {r, c}), acc)
                .getResult();
          });
      sb.store(dot, op.getDot(), {r});
    });
    rewriter.eraseOp(op);
    return success();
  }
};

struct RecomputeProbsLowering : OpRewritePattern<RecomputeProbsOp> {
  using OpRewritePattern::OpRewritePattern;
  LogicalResult matchAndRewrite(RecomputeProbsOp op,
                                PatternRewriter &rewriter) const override {
    ScalarBuilder sb{rewriter, op.getLoc()};
    Location loc = op.getLoc();
    OpBuilder &b = rewriter;
    auto type = cast<MemRefType>(op.getScores().getType());
    Value rows = rowsOf(sb, op.getLse());
    sb.forLoop(sb.index(type.getDimSize(0)), [&](Value r) {
      // Rows past the LSE's (a ragged last query block) have no P.
      Value inRows =
          arith::CmpIOp::create(b, loc, arith::CmpIPredicate::ult, r, rows);
      Value safe = arith::SelectOp::create(b, loc, inRows, r, sb.index(0));
      Value lse = sb.load(op.getLse(), {safe});
      // P = exp2(S - log2(e) L); a row without a visible key (L = -inf)
      // has P = 0, as do masked scores (S = -inf).
      Value base = arith::MulFOp::create(b, loc, lse, sb.f32(kLog2E));
      Value empty = arith::CmpFOp::create(b, loc, arith::CmpFPredicate::OEQ,
                                          lse, sb.negInf());
      Value zeroRow = arith::OrIOp::create(
          b, loc, empty, arith::XOrIOp::create(
                             b, loc, inRows,
                             arith::ConstantIntOp::create(b, loc, 1, 1)));
      sb.forLoop(sb.index(type.getDimSize(1)), [&](Value c) {
        Value s = sb.load(op.getScores(), {r, c});
        Value p = math::Exp2Op::create(
            b, loc, arith::SubFOp::create(b, loc, s, base));
        p = arith::SelectOp::create(b, loc, zeroRow, sb.f32(0.0), p);
        sb.store(p, op.getScores(), {r, c});
      });
    });
    rewriter.eraseOp(op);
    return success();
  }
};

struct GradValuesLowering : OpRewritePattern<GradValuesOp> {
  using OpRewritePattern::OpRewritePattern;
  LogicalResult matchAndRewrite(GradValuesOp op,
                                PatternRewriter &rewriter) const override {
    ScalarBuilder sb{rewriter, op.getLoc()};
    auto acc = cast<MemRefType>(op.getAcc().getType());
    // dV[c, d] += sum_r P[r, c] dO[r, d].
    accumulateProduct(
        sb, op.getLoc(), op.getAcc(), sb.index(acc.getDimSize(0)),
        rowsOf(sb, op.getGradOut()), std::nullopt,
        [&](Value c, Value r) { return sb.load(op.getProbs(), {r, c}); },
        [&](Value r, Value d) { return sb.loadF32(op.getGradOut(), {r, d}); });
    rewriter.eraseOp(op);
    return success();
  }
};

struct GradProbsLowering : OpRewritePattern<GradProbsOp> {
  using OpRewritePattern::OpRewritePattern;
  LogicalResult matchAndRewrite(GradProbsOp op,
                                PatternRewriter &rewriter) const override {
    ScalarBuilder sb{rewriter, op.getLoc()};
    Location loc = op.getLoc();
    OpBuilder &b = rewriter;
    auto type = cast<MemRefType>(op.getGradProbs().getType());
    Value rows = rowsOf(sb, op.getGradOut());
    Value keys = rowsOf(sb, op.getValue());
    Value columns = columnsOf(sb, op.getValue());
    // dP[r, c] = sum_d dO[r, d] V[c, d] inside the tiles, 0 outside.
    sb.forLoop(sb.index(type.getDimSize(0)), [&](Value r) {
      sb.forLoop(sb.index(type.getDimSize(1)), [&](Value c) {
        Value inside = arith::AndIOp::create(
            b, loc,
            arith::CmpIOp::create(b, loc, arith::CmpIPredicate::ult, r, rows),
            arith::CmpIOp::create(b, loc, arith::CmpIPredicate::ult, c, keys));
        auto ifInside = scf::IfOp::create(b, loc, f32Type(b), inside, true);
        {
          OpBuilder::InsertionGuard guard(b);
          b.setInsertionPointToStart(ifInside.thenBlock());
          Value dot = sb.reduce(columns, sb.f32(0.0), [&](Value d, Value a) {
            return math::FmaOp::create(b, loc,
                                       sb.loadF32(op.getGradOut(), {r, d}),
                                       sb.loadF32(op.getValue(), {c, d}), a)
                .getResult();
          });
          scf::YieldOp::create(b, loc, dot);
          b.setInsertionPointToStart(ifInside.elseBlock());
          scf::YieldOp::create(b, loc, sb.f32(0.0));
        }
        sb.store(ifInside.getResult(0), op.getGradProbs(), {r, c});
      });
    });
    rewriter.eraseOp(op);
    return success();
  }
  static Type f32Type(OpBuilder &b) { return b.getF32Type(); }
};

struct GradScoresLowering : OpRewritePattern<GradScoresOp> {
  using OpRewritePattern::OpRewritePattern;
  LogicalResult matchAndRewrite(GradScoresOp op,
                                PatternRewriter &rewriter) const override {
    ScalarBuilder sb{rewriter, op.getLoc()};
    Location loc = op.getLoc();
    OpBuilder &b = rewriter;
    auto type = cast<MemRefType>(op.getGrad().getType());
    Value rows = rowsOf(sb, op.getDot());
    std::optional<double> cap;
    if (std::optional<APFloat> c = op.getSoftcap())
      cap = c->convertToDouble();
    sb.forLoop(sb.index(type.getDimSize(0)), [&](Value r) {
      Value inRows =
          arith::CmpIOp::create(b, loc, arith::CmpIPredicate::ult, r, rows);
      Value safe = arith::SelectOp::create(b, loc, inRows, r, sb.index(0));
      Value dot = sb.load(op.getDot(), {safe});
      sb.forLoop(sb.index(type.getDimSize(1)), [&](Value c) {
        Value p = sb.load(op.getProbs(), {r, c});
        Value ds = arith::MulFOp::create(
            b, loc, p,
            arith::SubFOp::create(b, loc, sb.load(op.getGrad(), {r, c}), dot));
        if (cap) {
          // cap'(x) = 1 - tanh^2(x / c), with tanh(x / c) = ln(2) S / c
          // read off the capped base-2 score S.
          Value t = arith::MulFOp::create(b, loc,
                                          sb.load(op.getScores(), {r, c}),
                                          sb.f32(kLn2 / *cap));
          Value slope = arith::SubFOp::create(
              b, loc, sb.f32(1.0), arith::MulFOp::create(b, loc, t, t));
          ds = arith::MulFOp::create(b, loc, ds, slope);
        }
        // P = 0 (masked: S = -inf, or past the tails) has no gradient,
        // whatever the other factors are (0 * inf is NaN otherwise).
        Value hidden = arith::OrIOp::create(
            b, loc,
            arith::CmpFOp::create(b, loc, arith::CmpFPredicate::OEQ, p,
                                  sb.f32(0.0)),
            arith::XOrIOp::create(b, loc, inRows,
                                  arith::ConstantIntOp::create(b, loc, 1, 1)));
        ds = arith::SelectOp::create(b, loc, hidden, sb.f32(0.0), ds);
        sb.store(ds, op.getGrad(), {r, c});
      });
    });
    rewriter.eraseOp(op);
    return success();
  }
};

struct ChainScoreModLowering : OpRewritePattern<ChainScoreModOp> {
  using OpRewritePattern::OpRewritePattern;
  LogicalResult matchAndRewrite(ChainScoreModOp op,
                                PatternRewriter &rewriter) const override {
    ScalarBuilder sb{rewriter, op.getLoc()};
    Location loc = op.getLoc();
    OpBuilder &b = rewriter;
    auto type = cast<MemRefType>(op.getGrad().getType());
    ValueRange coordinates = op.getCoordinates();
    sb.forLoop(sb.index(type.getDimSize(0)), [&](Value r) {
      sb.forLoop(sb.index(type.getDimSize(1)), [&](Value c) {
        // Hidden scores (-inf) keep their dS (0: P is 0 there).
        Value x = sb.load(op.getUnmodified(), {r, c});
        Value visible = arith::CmpFOp::create(b, loc, arith::CmpFPredicate::OGT,
                                              x, sb.negInf());
        auto ifVisible = scf::IfOp::create(b, loc, visible,
                                           /*withElseRegion=*/false);
        OpBuilder::InsertionGuard guard(b);
        b.setInsertionPoint(ifVisible.thenBlock()->getTerminator());
        // score_mod' at the natural-log score ln(2) X.
        Value slope = inlineScoreModSlope(
            b, op.getScoreMod(),
            {arith::MulFOp::create(b, loc, x, sb.f32(kLn2)), coordinates[0],
             coordinates[1], arith::AddIOp::create(b, loc, coordinates[2], r),
             arith::AddIOp::create(b, loc, coordinates[3], c)},
            op.getCaptures());
        sb.store(
            arith::MulFOp::create(b, loc, sb.load(op.getGrad(), {r, c}), slope),
            op.getGrad(), {r, c});
      });
    });
    rewriter.eraseOp(op);
    return success();
  }
};

struct GradKeysLowering : OpRewritePattern<GradKeysOp> {
  using OpRewritePattern::OpRewritePattern;
  LogicalResult matchAndRewrite(GradKeysOp op,
                                PatternRewriter &rewriter) const override {
    ScalarBuilder sb{rewriter, op.getLoc()};
    auto acc = cast<MemRefType>(op.getAcc().getType());
    // dK[c, d] += scale sum_r dS[r, c] Q[r, d].
    accumulateProduct(
        sb, op.getLoc(), op.getAcc(), sb.index(acc.getDimSize(0)),
        rowsOf(sb, op.getQuery()), op.getScale().convertToDouble(),
        [&](Value c, Value r) { return sb.load(op.getGradScores(), {r, c}); },
        [&](Value r, Value d) { return sb.loadF32(op.getQuery(), {r, d}); });
    rewriter.eraseOp(op);
    return success();
  }
};

struct GradQueriesLowering : OpRewritePattern<GradQueriesOp> {
  using OpRewritePattern::OpRewritePattern;
  LogicalResult matchAndRewrite(GradQueriesOp op,
                                PatternRewriter &rewriter) const override {
    ScalarBuilder sb{rewriter, op.getLoc()};
    // dQ[r, d] += scale sum_c dS[r, c] K[c, d].
    accumulateProduct(
        sb, op.getLoc(), op.getAcc(), rowsOf(sb, op.getAcc()),
        rowsOf(sb, op.getKey()), op.getScale().convertToDouble(),
        [&](Value r, Value c) { return sb.load(op.getGradScores(), {r, c}); },
        [&](Value c, Value d) { return sb.loadF32(op.getKey(), {c, d}); });
    rewriter.eraseOp(op);
    return success();
  }
};

struct GradSinkLowering : OpRewritePattern<GradSinkOp> {
  using OpRewritePattern::OpRewritePattern;
  LogicalResult matchAndRewrite(GradSinkOp op,
                                PatternRewriter &rewriter) const override {
    ScalarBuilder sb{rewriter, op.getLoc()};
    Location loc = op.getLoc();
    OpBuilder &b = rewriter;
    // -sum_r exp(s - L_r) D_r; a sink of -inf (none) has no probability.
    Value none = arith::CmpFOp::create(b, loc, arith::CmpFPredicate::OEQ,
                                       op.getSink(), sb.negInf());
    Value sum = sb.reduce(
        rowsOf(sb, op.getLse()), sb.f32(0.0), [&](Value r, Value acc) {
          Value prob = math::ExpOp::create(
              b, loc,
              arith::SubFOp::create(b, loc, op.getSink(),
                                    sb.load(op.getLse(), {r})));
          return math::FmaOp::create(b, loc, prob, sb.load(op.getDot(), {r}),
                                     acc)
              .getResult();
        });
    Value partial = arith::SelectOp::create(b, loc, none, sb.f32(0.0),
                                            arith::NegFOp::create(b, loc, sum));
    rewriter.replaceOp(op, partial);
    return success();
  }
};

} // namespace

void mlir::fa::populateBackwardToLoopsPatterns(RewritePatternSet &patterns) {
  patterns.add<RowDotLowering, RecomputeProbsLowering, GradValuesLowering,
               GradProbsLowering, GradScoresLowering, ChainScoreModLowering,
               GradKeysLowering, GradQueriesLowering, GradSinkLowering>(
      patterns.getContext());
}
