//===- FAToLoops.cpp - fa tile ops to scf loops ---------------------------===//
//
// Each tile op becomes a loop nest of scalar loads, arith/math and stores.
// This is the reference host lowering: simple enough to trust, and it runs
// every algorithm variant on the CPU.
//
//===----------------------------------------------------------------------===//

#include "fa/Conversion/Passes.h"
#include "fa/Dialect/FA/IR/FAOps.h"
#include "fa/Dialect/FA/IR/PolyExp2.h"
#include "fa/Dialect/FA/IR/Validation.h"

#include "Modifications.h"
#include "ScalarBuilder.h"

#include "mlir/Dialect/MemRef/IR/MemRef.h"
#include "mlir/Dialect/SCF/IR/SCF.h"
#include "mlir/Dialect/Tensor/IR/Tensor.h"
#include "mlir/IR/PatternMatch.h"
#include "mlir/Transforms/DialectConversion.h"

#include <cmath>
#include <limits>

namespace mlir::fa {
#define GEN_PASS_DEF_CONVERTFATOLOOPS
#include "fa/Conversion/Passes.h.inc"
} // namespace mlir::fa

using namespace mlir;
using namespace mlir::fa;
using namespace mlir::fa::loops;

namespace {

struct InitStateLowering : OpRewritePattern<InitStateOp> {
  using OpRewritePattern::OpRewritePattern;
  LogicalResult matchAndRewrite(InitStateOp op,
                                PatternRewriter &rewriter) const override {
    ScalarBuilder sb{rewriter, op.getLoc()};
    Location loc = op.getLoc();
    Value max = sb.negInf(), sum = sb.f32(0.0);
    if (Value sink = op.getSink()) {
      // A seen key of score s and no value: m = log2(e) s, l = exp2(0) = 1;
      // s = -inf is no key (l = 0).
      max = arith::MulFOp::create(rewriter, loc, sink, sb.f32(kLog2E));
      Value none = arith::CmpFOp::create(
          rewriter, loc, arith::CmpFPredicate::OEQ, sink, sb.negInf());
      sum = arith::SelectOp::create(rewriter, loc, none, sb.f32(0.0),
                                    sb.f32(1.0));
    }
    linalg::FillOp::create(rewriter, loc, ValueRange{max},
                           ValueRange{op.getMax()});
    linalg::FillOp::create(rewriter, loc, ValueRange{sum},
                           ValueRange{op.getSum()});
    linalg::FillOp::create(rewriter, loc, ValueRange{sb.f32(0.0)},
                           ValueRange{op.getAcc()});
    rewriter.eraseOp(op);
    return success();
  }
};

struct ScoreTileLowering : OpRewritePattern<ScoreTileOp> {
  using OpRewritePattern::OpRewritePattern;
  LogicalResult matchAndRewrite(ScoreTileOp op,
                                PatternRewriter &rewriter) const override {
    Location loc = op.getLoc();
    ScalarBuilder sb{rewriter, loc};
    auto scoresType = cast<MemRefType>(op.getScores().getType());
    Value rows = sb.dim(op.getQuery(), 0), cols = sb.dim(op.getKey(), 0);
    Value headDim = sb.dim(op.getQuery(), 1);
    double scale = op.getScale().convertToDouble();
    std::optional<double> softcap;
    if (std::optional<APFloat> cap = op.getSoftcap())
      softcap = cap->convertToDouble();
    std::optional<int64_t> window = op.getWindow();

    sb.forLoop(sb.index(scoresType.getDimSize(0)), [&](Value r) {
      sb.forLoop(sb.index(scoresType.getDimSize(1)), [&](Value c) {
        OpBuilder &b = rewriter;
        // Visible: inside both tiles and allowed by the mask.
        Value visible = b.createOrFold<arith::AndIOp>(
            loc,
            arith::CmpIOp::create(b, loc, arith::CmpIPredicate::ult, r, rows),
            arith::CmpIOp::create(b, loc, arith::CmpIPredicate::ult, c, cols));
        Value i = arith::AddIOp::create(b, loc, op.getRowOffset(), r);
        Value j = arith::AddIOp::create(b, loc, op.getColOffset(), c);
        // The modifications' query and key indices: unshifted positions.
        ValueRange coordinates = op.getCoordinates();
        Value queryIndex, keyIndex;
        if (!coordinates.empty()) {
          queryIndex = arith::AddIOp::create(b, loc, coordinates[2], r);
          keyIndex = arith::AddIOp::create(b, loc, coordinates[3], c);
        }
        if (op.getCausal())
          visible = arith::AndIOp::create(
              b, loc, visible,
              arith::CmpIOp::create(b, loc, arith::CmpIPredicate::ule, j, i));
        if (window) {
          // |i - j| < w  <=>  i < j + w  and  j < i + w
          Value w = sb.index(*window);
          visible = arith::AndIOp::create(
              b, loc, visible,
              arith::CmpIOp::create(b, loc, arith::CmpIPredicate::ult, i,
                                    arith::AddIOp::create(b, loc, j, w)));
          visible = arith::AndIOp::create(
              b, loc, visible,
              arith::CmpIOp::create(b, loc, arith::CmpIPredicate::ult, j,
                                    arith::AddIOp::create(b, loc, i, w)));
        }
        // The score at a visible (r, c), in base 2, and with `unmodified`
        // the score before score_mod too.
        Value unmodified = op.getUnmodified();
        auto score = [&](OpBuilder &tb, Location l) -> SmallVector<Value> {
          ScalarBuilder t{tb, l};
          Value dot = t.reduce(headDim, t.f32(0.0), [&](Value d, Value acc) {
            Value qv = t.loadF32(op.getQuery(), {r, d});
            Value kv = t.loadF32(op.getKey(), {c, d});
            return math::FmaOp::create(tb, l, qv, kv, acc).getResult();
          });
          // fp8: the tile's descale (q_descale * k_descale) first.
          if (Value descale = op.getDescale())
            dot = arith::MulFOp::create(tb, l, dot, descale);
          if (!op.getScoreMod().empty()) {
            // score_mod on the natural-log score, then log2(e).
            Value x = arith::MulFOp::create(tb, l, dot, t.f32(scale));
            if (softcap)
              x = arith::MulFOp::create(
                  tb, l,
                  math::TanhOp::create(
                      tb, l,
                      arith::MulFOp::create(tb, l, x, t.f32(1.0 / *softcap))),
                  t.f32(*softcap));
            Value y = inlineModification(
                tb, op.getScoreMod(),
                {x, coordinates[0], coordinates[1], queryIndex, keyIndex},
                op.getCaptures());
            SmallVector<Value> values = {
                arith::MulFOp::create(tb, l, y, t.f32(kLog2E))};
            if (unmodified)
              values.push_back(arith::MulFOp::create(tb, l, x, t.f32(kLog2E)));
            return values;
          }
          if (softcap) {
            // log2(e) * cap * tanh(scale * qk / cap)
            Value x =
                arith::MulFOp::create(tb, l, dot, t.f32(scale / *softcap));
            Value th = math::TanhOp::create(tb, l, x);
            return {arith::MulFOp::create(tb, l, th, t.f32(*softcap * kLog2E))};
          }
          // scale and log2(e) folded into one multiply
          return {arith::MulFOp::create(tb, l, dot, t.f32(scale * kLog2E))};
        };
        // -inf for each value where the score is hidden.
        auto hidden = [&](OpBuilder &hb, Location l) {
          Value negInf = ScalarBuilder{hb, l}.negInf();
          return SmallVector<Value>(unmodified ? 2 : 1, negInf);
        };
        auto ifOp = scf::IfOp::create(
            b, loc, visible,
            [&](OpBuilder &tb, Location l) {
              if (op.getMaskMod().empty()) {
                scf::YieldOp::create(tb, l, score(tb, l));
                return;
              }
              // mask_mod, inside the sequences only (its captures are
              // indexed by positions there).
              Value keep = inlineModification(
                  tb, op.getMaskMod(),
                  {coordinates[0], coordinates[1], queryIndex, keyIndex},
                  op.getCaptures());
              auto masked = scf::IfOp::create(
                  tb, l, keep,
                  [&](OpBuilder &kb, Location kl) {
                    scf::YieldOp::create(kb, kl, score(kb, kl));
                  },
                  [&](OpBuilder &mb, Location ml) {
                    scf::YieldOp::create(mb, ml, hidden(mb, ml));
                  });
              scf::YieldOp::create(tb, l, masked.getResults());
            },
            [&](OpBuilder &eb, Location l) {
              scf::YieldOp::create(eb, l, hidden(eb, l));
            });
        sb.store(ifOp.getResult(0), op.getScores(), {r, c});
        if (unmodified)
          sb.store(ifOp.getResult(1), unmodified, {r, c});
      });
    });
    rewriter.eraseOp(op);
    return success();
  }
};

struct SoftmaxUpdateLowering : OpRewritePattern<SoftmaxUpdateOp> {
  using OpRewritePattern::OpRewritePattern;
  LogicalResult matchAndRewrite(SoftmaxUpdateOp op,
                                PatternRewriter &rewriter) const override {
    Location loc = op.getLoc();
    ScalarBuilder sb{rewriter, loc};
    auto type = cast<MemRefType>(op.getScores().getType());
    Value cols = sb.index(type.getDimSize(1));
    OpBuilder &b = rewriter;
    sb.forLoop(sb.index(type.getDimSize(0)), [&](Value r) {
      Value mOld = sb.load(op.getMax(), {r});
      // m_new = max(m, rowmax(S))
      Value mNew = sb.rowMax(op.getScores(), r, cols, mOld);
      Value base = sb.softmaxBase(mNew);
      Value rowSum =
          sb.exponentiateRow(op.getScores(), r, cols, base,
                             op.getExp2PolyDegree(), op.getExp2PolyPeriod());
      Value alpha = math::Exp2Op::create(
          b, loc, arith::SubFOp::create(b, loc, mOld, base));
      Value lNew = math::FmaOp::create(b, loc, alpha,
                                       sb.load(op.getSum(), {r}), rowSum);
      sb.store(lNew, op.getSum(), {r});
      sb.store(mNew, op.getMax(), {r});
      sb.store(alpha, op.getCorrection(), {r});
    });
    rewriter.eraseOp(op);
    return success();
  }
};

struct ConditionalSoftmaxUpdateLowering
    : OpRewritePattern<ConditionalSoftmaxUpdateOp> {
  using OpRewritePattern::OpRewritePattern;
  LogicalResult matchAndRewrite(ConditionalSoftmaxUpdateOp op,
                                PatternRewriter &rewriter) const override {
    Location loc = op.getLoc();
    ScalarBuilder sb{rewriter, loc};
    OpBuilder &b = rewriter;
    auto type = cast<MemRefType>(op.getScores().getType());
    Value cols = sb.index(type.getDimSize(1));
    double tau = op.getThreshold().convertToDouble();
    Value counters = op.getCounters();
    Value anyMoved = sb.reduce(
        sb.index(type.getDimSize(0)),
        arith::ConstantIntOp::create(b, loc, 0, 1), [&](Value r, Value acc) {
          Value base = sb.load(op.getBase(), {r});
          Value mx = sb.rowMax(op.getScores(), r, cols, sb.negInf());
          // Move when mx - base > tau; base = -inf moves on the first finite
          // max, and an all-masked row (-inf - -inf = NaN) does not move.
          Value move = arith::CmpFOp::create(
              b, loc, arith::CmpFPredicate::OGT,
              arith::SubFOp::create(b, loc, mx, base), sb.f32(tau));
          Value newBase = arith::SelectOp::create(b, loc, move, mx, base);
          Value bias = sb.softmaxBase(newBase);
          Value rowSum = sb.exponentiateRow(op.getScores(), r, cols, bias,
                                            op.getExp2PolyDegree(),
                                            op.getExp2PolyPeriod());
          Value alpha = arith::SelectOp::create(
              b, loc, move,
              math::Exp2Op::create(b, loc,
                                   arith::SubFOp::create(b, loc, base, bias)),
              sb.f32(1.0));
          Value lNew = math::FmaOp::create(b, loc, alpha,
                                           sb.load(op.getSum(), {r}), rowSum);
          sb.store(lNew, op.getSum(), {r});
          sb.store(newBase, op.getBase(), {r});
          sb.store(alpha, op.getCorrection(), {r});
          if (counters) {
            // Rows that saw a score: moved or skipped; and the largest P,
            // exp2(mx - base), bounded by 2^tau.
            Value seen = arith::CmpFOp::create(
                b, loc, arith::CmpFPredicate::OGT, mx, sb.negInf());
            Type f64 = b.getF64Type();
            auto one = [&](Value cond) {
              Value c1 = arith::ConstantOp::create(b, loc, b.getF64FloatAttr(1));
              Value c0 = arith::ConstantOp::create(b, loc, b.getF64FloatAttr(0));
              return arith::SelectOp::create(
                  b, loc, arith::AndIOp::create(b, loc, seen, cond), c1, c0);
            };
            Value notMove = arith::XOrIOp::create(
                b, loc, move, arith::ConstantIntOp::create(b, loc, 1, 1));
            for (auto [slot, inc] :
                 {std::pair<int64_t, Value>{0, one(move)},
                  std::pair<int64_t, Value>{1, one(notMove)}}) {
              Value idx = sb.index(slot);
              Value old = sb.load(counters, {idx});
              sb.store(arith::AddFOp::create(b, loc, old, inc), counters,
                       {idx});
            }
            Value pMaxF32 = math::Exp2Op::create(
                b, loc, arith::SubFOp::create(b, loc, mx, bias));
            Value pMax = arith::ExtFOp::create(b, loc, f64, pMaxF32);
            pMax = arith::SelectOp::create(
                b, loc, seen, pMax,
                arith::ConstantOp::create(b, loc, b.getF64FloatAttr(0)));
            Value two = sb.index(2);
            sb.store(arith::MaximumFOp::create(b, loc, sb.load(counters, {two}),
                                               pMax),
                     counters, {two});
          }
          return arith::OrIOp::create(b, loc, acc, move).getResult();
        });
    rewriter.replaceOp(op, anyMoved);
    return success();
  }
};

struct RescaleLowering : OpRewritePattern<RescaleOp> {
  using OpRewritePattern::OpRewritePattern;
  LogicalResult matchAndRewrite(RescaleOp op,
                                PatternRewriter &rewriter) const override {
    Location loc = op.getLoc();
    ScalarBuilder sb{rewriter, loc};
    auto type = cast<MemRefType>(op.getAcc().getType());
    sb.forLoop(sb.index(type.getDimSize(0)), [&](Value r) {
      Value f = sb.load(op.getFactor(), {r});
      sb.forLoop(sb.index(type.getDimSize(1)), [&](Value d) {
        Value o = sb.load(op.getAcc(), {r, d});
        sb.store(arith::MulFOp::create(rewriter, loc, o, f), op.getAcc(),
                 {r, d});
      });
    });
    rewriter.eraseOp(op);
    return success();
  }
};

struct PVAccumulateLowering : OpRewritePattern<PVAccumulateOp> {
  using OpRewritePattern::OpRewritePattern;
  LogicalResult matchAndRewrite(PVAccumulateOp op,
                                PatternRewriter &rewriter) const override {
    Location loc = op.getLoc();
    ScalarBuilder sb{rewriter, loc};
    auto type = cast<MemRefType>(op.getAcc().getType());
    Value keys = sb.dim(op.getValue(), 0);
    Type valueType = cast<MemRefType>(op.getValue().getType()).getElementType();
    std::optional<double> probsScale;
    if (std::optional<APFloat> s = op.getProbsScale())
      probsScale = s->convertToDouble();
    // O += factor * sum_c P'[r, c] V[c, d] with P' = e4m3(s P) and
    // factor = descale / s (both exact powers of two but the descale).
    Value factor = op.getDescale();
    if (probsScale)
      factor =
          arith::MulFOp::create(rewriter, loc, factor ? factor : sb.f32(1.0),
                                sb.f32(1.0 / *probsScale));
    sb.forLoop(sb.index(type.getDimSize(0)), [&](Value r) {
      sb.forLoop(sb.index(type.getDimSize(1)), [&](Value d) {
        Value o = sb.load(op.getAcc(), {r, d});
        Value sum =
            sb.reduce(keys, factor ? sb.f32(0.0) : o, [&](Value c, Value acc) {
              Value p = sb.load(op.getProbs(), {r, c});
              if (probsScale)
                p = arith::ExtFOp::create(
                    rewriter, loc, rewriter.getF32Type(),
                    sb.roundToE4M3(arith::MulFOp::create(rewriter, loc, p,
                                                         sb.f32(*probsScale)),
                                   valueType));
              Value v = sb.loadF32(op.getValue(), {c, d});
              return math::FmaOp::create(rewriter, loc, p, v, acc).getResult();
            });
        if (factor)
          sum = math::FmaOp::create(rewriter, loc, sum, factor, o);
        sb.store(sum, op.getAcc(), {r, d});
      });
    });
    rewriter.eraseOp(op);
    return success();
  }
};

struct NormalizeLowering : OpRewritePattern<NormalizeOp> {
  using OpRewritePattern::OpRewritePattern;
  LogicalResult matchAndRewrite(NormalizeOp op,
                                PatternRewriter &rewriter) const override {
    Location loc = op.getLoc();
    ScalarBuilder sb{rewriter, loc};
    auto type = cast<MemRefType>(op.getAcc().getType());
    OpBuilder &b = rewriter;
    sb.forLoop(sb.index(type.getDimSize(0)), [&](Value r) {
      Value l = sb.load(op.getSum(), {r});
      // l = 0 only for a row with every score masked: its output is 0.
      Value positive =
          arith::CmpFOp::create(b, loc, arith::CmpFPredicate::OGT, l,
                                sb.f32(0.0));
      Value inv = arith::SelectOp::create(
          b, loc, positive, arith::DivFOp::create(b, loc, sb.f32(1.0), l),
          sb.f32(0.0));
      sb.forLoop(sb.index(type.getDimSize(1)), [&](Value d) {
        Value o = sb.load(op.getAcc(), {r, d});
        sb.store(arith::MulFOp::create(b, loc, o, inv), op.getAcc(), {r, d});
      });
    });
    rewriter.eraseOp(op);
    return success();
  }
};

struct LogSumExpLowering : OpRewritePattern<LogSumExpOp> {
  using OpRewritePattern::OpRewritePattern;
  LogicalResult matchAndRewrite(LogSumExpOp op,
                                PatternRewriter &rewriter) const override {
    Location loc = op.getLoc();
    ScalarBuilder sb{rewriter, loc};
    OpBuilder &b = rewriter;
    sb.forLoop(sb.dim(op.getLse(), 0), [&](Value r) {
      Value m = sb.load(op.getMax(), {r});
      Value l = sb.load(op.getSum(), {r});
      Value positive =
          arith::CmpFOp::create(b, loc, arith::CmpFPredicate::OGT, l,
                                sb.f32(0.0));
      // ln(2) * (m + log2(l)): m is in log2 units.
      Value lse = arith::MulFOp::create(
          b, loc,
          arith::AddFOp::create(b, loc, m, math::Log2Op::create(b, loc, l)),
          sb.f32(kLn2));
      sb.store(arith::SelectOp::create(b, loc, positive, lse, sb.negInf()),
               op.getLse(), {r});
    });
    rewriter.eraseOp(op);
    return success();
  }
};

/// Per row: m = max_s LSE_s, w_s = exp(LSE_s - m) (0 for an empty chunk;
/// m is taken as 0 when every chunk is empty, so no -inf - -inf), then
/// O = sum_s w_s O_s / sum_s w_s and LSE = m + log(sum_s w_s), or 0 and
/// -inf for a row no chunk saw a key of.
struct MergePartialsLowering : OpRewritePattern<MergePartialsOp> {
  using OpRewritePattern::OpRewritePattern;
  LogicalResult matchAndRewrite(MergePartialsOp op,
                                PatternRewriter &rewriter) const override {
    Location loc = op.getLoc();
    ScalarBuilder sb{rewriter, loc};
    OpBuilder &b = rewriter;
    Value parts = op.getPartialOut(), lses = op.getPartialLse();
    Value out = op.getOut();
    Type outElt = cast<MemRefType>(out.getType()).getElementType();
    Value splits = sb.dim(parts, 0), cols = sb.dim(out, 1);
    sb.forLoop(sb.dim(out, 0), [&](Value r) {
      Value m = sb.reduce(splits, sb.negInf(), [&](Value s, Value acc) {
        return arith::MaximumFOp::create(b, loc, acc, sb.load(lses, {s, r}))
            .getResult();
      });
      Value empty = arith::CmpFOp::create(b, loc, arith::CmpFPredicate::OEQ,
                                          m, sb.negInf());
      Value base = arith::SelectOp::create(b, loc, empty, sb.f32(0.0), m);
      auto weight = [&](Value s) -> Value {
        return math::ExpOp::create(
            b, loc, arith::SubFOp::create(b, loc, sb.load(lses, {s, r}), base));
      };
      Value total = sb.reduce(splits, sb.f32(0.0), [&](Value s, Value acc) {
        return arith::AddFOp::create(b, loc, acc, weight(s)).getResult();
      });
      Value positive = arith::CmpFOp::create(
          b, loc, arith::CmpFPredicate::OGT, total, sb.f32(0.0));
      Value inv = arith::SelectOp::create(
          b, loc, positive, arith::DivFOp::create(b, loc, sb.f32(1.0), total),
          sb.f32(0.0));
      sb.forLoop(cols, [&](Value d) {
        Value sum = sb.reduce(splits, sb.f32(0.0), [&](Value s, Value acc) {
          Value o = sb.load(parts, {s, r, d});
          return math::FmaOp::create(b, loc, weight(s), o, acc).getResult();
        });
        Value o = arith::MulFOp::create(b, loc, sum, inv);
        if (outElt != b.getF32Type())
          o = arith::TruncFOp::create(b, loc, outElt, o);
        sb.store(o, out, {r, d});
      });
      if (Value lse = op.getLse()) {
        Value value = arith::AddFOp::create(b, loc, m,
                                            math::LogOp::create(b, loc, total));
        sb.store(arith::SelectOp::create(b, loc, positive, value, sb.negInf()),
                 lse, {r});
      }
    });
    rewriter.eraseOp(op);
    return success();
  }
};

/// Two passes over [B, H, N, D]: each group's amax, then the scaled and
/// rounded elements. A group is the tensor (rank-0 descale) or `block`
/// rows of one (batch, head).
struct QuantizeLowering : OpRewritePattern<QuantizeOp> {
  using OpRewritePattern::OpRewritePattern;
  LogicalResult matchAndRewrite(QuantizeOp op,
                                PatternRewriter &rewriter) const override {
    Location loc = op.getLoc();
    ScalarBuilder sb{rewriter, loc};
    OpBuilder &b = rewriter;
    Value in = op.getInput(), out = op.getOutput();
    Type f8 = op.getOutput().getType().getElementType();
    Value dims[4] = {sb.dim(in, 0), sb.dim(in, 1), sb.dim(in, 2),
                     sb.dim(in, 3)};
    // amax over rows [row0, row0 + rows) of head (bi, h).
    auto rowsAmax = [&](Value bi, Value h, Value row0, Value rows, Value init) {
      return sb.reduce(rows, init, [&](Value r, Value acc) {
        Value n = arith::AddIOp::create(b, loc, row0, r);
        return sb.reduce(dims[3], acc, [&](Value d, Value acc2) {
          Value x = math::AbsFOp::create(b, loc, sb.loadF32(in, {bi, h, n, d}));
          return arith::MaximumFOp::create(b, loc, acc2, x).getResult();
        });
      });
    };
    // scale = 448 / amax (1 for an all-zero group); descale = 1 / scale.
    auto scaleOf = [&](Value amax) {
      Value positive = arith::CmpFOp::create(b, loc, arith::CmpFPredicate::OGT,
                                             amax, sb.f32(0.0));
      return arith::SelectOp::create(
          b, loc, positive,
          arith::DivFOp::create(b, loc, sb.f32(kE4M3Max), amax), sb.f32(1.0));
    };
    auto quantizeRows = [&](Value bi, Value h, Value row0, Value rows,
                            Value scale) {
      sb.forLoop(rows, [&](Value r) {
        Value n = arith::AddIOp::create(b, loc, row0, r);
        sb.forLoop(dims[3], [&](Value d) {
          Value x = sb.loadF32(in, {bi, h, n, d});
          sb.store(sb.roundToE4M3(arith::MulFOp::create(b, loc, x, scale), f8),
                   out, {bi, h, n, d});
        });
      });
    };
    auto inverse = [&](Value scale) {
      return arith::DivFOp::create(b, loc, sb.f32(1.0), scale);
    };
    Value zero = sb.index(0);
    if (std::optional<int64_t> block = op.getBlock()) {
      Value blocks =
          arith::CeilDivUIOp::create(b, loc, dims[2], sb.index(*block));
      sb.forLoop(dims[0], [&](Value bi) {
        sb.forLoop(dims[1], [&](Value h) {
          sb.forLoop(blocks, [&](Value blk) {
            Value row0 = arith::MulIOp::create(b, loc, blk, sb.index(*block));
            Value rows = arith::MinUIOp::create(
                b, loc, sb.index(*block),
                arith::SubIOp::create(b, loc, dims[2], row0));
            Value scale = scaleOf(rowsAmax(bi, h, row0, rows, sb.f32(0.0)));
            sb.store(inverse(scale), op.getDescale(), {bi, h, blk});
            quantizeRows(bi, h, row0, rows, scale);
          });
        });
      });
    } else {
      Value amax = sb.reduce(dims[0], sb.f32(0.0), [&](Value bi, Value acc) {
        return sb.reduce(dims[1], acc, [&](Value h, Value acc2) {
          return rowsAmax(bi, h, zero, dims[2], acc2);
        });
      });
      Value scale = scaleOf(amax);
      sb.store(inverse(scale), op.getDescale(), {});
      sb.forLoop(dims[0], [&](Value bi) {
        sb.forLoop(dims[1],
                   [&](Value h) { quantizeRows(bi, h, zero, dims[2], scale); });
      });
    }
    rewriter.eraseOp(op);
    return success();
  }
};

/// y[j] = sum_i s_i x_i (-1)^popcount(i & j) / sqrt(D): the Hadamard matrix
/// entry from the parity of the common bits, O(D^2) per row (the reference
/// lowering; a kernel would use the log2(D)-stage butterfly).
struct HadamardLowering : OpRewritePattern<HadamardOp> {
  using OpRewritePattern::OpRewritePattern;
  LogicalResult matchAndRewrite(HadamardOp op,
                                PatternRewriter &rewriter) const override {
    Location loc = op.getLoc();
    ScalarBuilder sb{rewriter, loc};
    OpBuilder &b = rewriter;
    Value in = op.getInput(), out = op.getOutput();
    ArrayRef<bool> signs = op.getSigns();
    int64_t dim = static_cast<int64_t>(signs.size());
    // The signs, folded with 1 / sqrt(D), as a stack table.
    Value table = memref::AllocaOp::create(
        b, loc, MemRefType::get({dim}, b.getF32Type()));
    double norm = 1.0 / std::sqrt(static_cast<double>(dim));
    for (auto [i, negative] : llvm::enumerate(signs))
      sb.store(sb.f32(negative ? -norm : norm), table, {sb.index(i)});
    Type i32 = b.getI32Type();
    sb.forLoop(sb.dim(in, 0), [&](Value bi) {
      sb.forLoop(sb.dim(in, 1), [&](Value h) {
        sb.forLoop(sb.dim(in, 2), [&](Value n) {
          sb.forLoop(sb.index(dim), [&](Value j) {
            Value jBits = arith::IndexCastOp::create(b, loc, i32, j);
            Value y =
                sb.reduce(sb.index(dim), sb.f32(0.0), [&](Value i, Value acc) {
                  Value x = arith::MulFOp::create(b, loc,
                                                  sb.loadF32(in, {bi, h, n, i}),
                                                  sb.load(table, {i}));
                  Value common = arith::AndIOp::create(
                      b, loc, arith::IndexCastOp::create(b, loc, i32, i),
                      jBits);
                  Value odd = arith::TruncIOp::create(
                      b, loc, b.getI1Type(),
                      math::CtPopOp::create(b, loc, common));
                  Value term = arith::SelectOp::create(
                      b, loc, odd, arith::NegFOp::create(b, loc, x), x);
                  return arith::AddFOp::create(b, loc, acc, term).getResult();
                });
            sb.store(y, out, {bi, h, n, j});
          });
        });
      });
    });
    rewriter.eraseOp(op);
    return success();
  }
};

struct ConvertFAToLoopsPass
    : fa::impl::ConvertFAToLoopsBase<ConvertFAToLoopsPass> {
  void runOnOperation() override {
    ConversionTarget target(getContext());
    target.addLegalDialect<arith::ArithDialect, math::MathDialect,
                           memref::MemRefDialect, scf::SCFDialect,
                           linalg::LinalgDialect>();
    target.addIllegalOp<InitStateOp, ScoreTileOp, SoftmaxUpdateOp,
                        ConditionalSoftmaxUpdateOp, RescaleOp, PVAccumulateOp,
                        NormalizeOp, LogSumExpOp, MergePartialsOp, QuantizeOp,
                        HadamardOp, RowDotOp, RecomputeProbsOp, GradValuesOp,
                        GradProbsOp, GradScoresOp, ChainScoreModOp, GradKeysOp,
                        GradQueriesOp, GradSinkOp>();
    target.markUnknownOpDynamicallyLegal([](Operation *) { return true; });
    RewritePatternSet patterns(&getContext());
    populateFAToLoopsPatterns(patterns);
    populateBackwardToLoopsPatterns(patterns);
    if (failed(applyPartialConversion(getOperation(), target,
                                      std::move(patterns))))
      signalPassFailure();
  }
};

} // namespace

void mlir::fa::populateFAToLoopsPatterns(RewritePatternSet &patterns) {
  patterns.add<InitStateLowering, ScoreTileLowering, SoftmaxUpdateLowering,
               ConditionalSoftmaxUpdateLowering, RescaleLowering,
               PVAccumulateLowering, NormalizeLowering, LogSumExpLowering,
               MergePartialsLowering, QuantizeLowering, HadamardLowering>(
      patterns.getContext());
}
