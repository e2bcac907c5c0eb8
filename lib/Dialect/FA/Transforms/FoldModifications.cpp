//===- FoldModifications.cpp - regions that spell a built-in ------------===//
//
// fa-fold-modifications: a score_mod/mask_mod region that computes a
// built-in (the causal mask, a softcap, nothing at all) becomes the
// attribute, so that the attention reaches the kernels and block skipping
// of the built-in. One pattern per form, for fa.attention and for its
// backward (which takes the same regions and attributes).
//
//===----------------------------------------------------------------------===//

#include "fa/Dialect/FA/IR/FAOps.h"
#include "fa/Dialect/FA/Transforms/Passes.h"

#include "mlir/Dialect/Arith/IR/Arith.h"
#include "mlir/Dialect/Math/IR/Math.h"
#include "mlir/IR/Matchers.h"
#include "mlir/IR/PatternMatch.h"
#include "mlir/Transforms/GreedyPatternRewriteDriver.h"

#include <cmath>

namespace mlir::fa {
#define GEN_PASS_DEF_FAFOLDMODIFICATIONS
#include "fa/Dialect/FA/Transforms/Passes.h.inc"
} // namespace mlir::fa

using namespace mlir;
using namespace mlir::fa;

namespace {

/// The value `region`'s fa.yield yields (null for an empty region).
Value yieldedBy(Region &region) {
  if (region.empty())
    return Value();
  return region.front().getTerminator()->getOperand(0);
}

/// Removes `region`'s body in place of the attribute the caller sets.
void eraseRegion(PatternRewriter &rewriter, Region &region) {
  rewriter.eraseBlock(&region.front());
}

/// Whether an attention's mask may become a built-in one: none there yet,
/// and no KV cache, pages or varlen batch (whose attributes carry
/// alignments of their own).
bool takesBuiltinMask(AttentionOp op) {
  return !op.getCausal() && !op.getWindow() && !op.getBottomRight() &&
         !op.getDiagonalOffset() && !op.getKvLengths() && !op.isPaged() &&
         !op.isVarlen();
}
bool takesBuiltinMask(AttentionBackwardOp op) {
  return !op.getCausal() && !op.getWindow() && !op.getBottomRight() &&
         !op.getDiagonalOffset() && !op.getCuSeqlensQ();
}

/// Whether `v` is j <= i (or i >= j) on the mask_mod's query index `i` and
/// key index `j`.
bool isKeyAtOrBeforeQuery(Value v, Value i, Value j) {
  auto cmp = v.getDefiningOp<arith::CmpIOp>();
  if (!cmp)
    return false;
  using P = arith::CmpIPredicate;
  P p = cmp.getPredicate();
  return (cmp.getLhs() == j && cmp.getRhs() == i &&
          (p == P::sle || p == P::ule)) ||
         (cmp.getLhs() == i && cmp.getRhs() == j &&
          (p == P::sge || p == P::uge));
}

/// mask_mod { j <= i } -> causal. Block arguments (b, h, i, j, captures).
template <typename AttentionOpT>
struct FoldCausalMaskMod : OpRewritePattern<AttentionOpT> {
  using OpRewritePattern<AttentionOpT>::OpRewritePattern;
  LogicalResult matchAndRewrite(AttentionOpT op,
                                PatternRewriter &rewriter) const override {
    Value visible = yieldedBy(op.getMaskMod());
    if (!visible || !takesBuiltinMask(op))
      return failure();
    Block &body = op.getMaskMod().front();
    if (!isKeyAtOrBeforeQuery(visible, body.getArgument(2),
                              body.getArgument(3)))
      return failure();
    rewriter.modifyOpInPlace(op, [&] {
      op.setCausal(true);
      eraseRegion(rewriter, op.getMaskMod());
    });
    return success();
  }
};

/// mask_mod { j <= i and i - j <= w - 1 } (FlexAttention's sliding window:
/// `q_idx >= kv_idx & q_idx - kv_idx <= W`, or `< W`) -> causal and
/// window = w: the attribute keeps keys with |i - j| < w.
template <typename AttentionOpT>
struct FoldSlidingWindowMaskMod : OpRewritePattern<AttentionOpT> {
  using OpRewritePattern<AttentionOpT>::OpRewritePattern;
  LogicalResult matchAndRewrite(AttentionOpT op,
                                PatternRewriter &rewriter) const override {
    Value visible = yieldedBy(op.getMaskMod());
    auto both = visible ? visible.getDefiningOp<arith::AndIOp>() : nullptr;
    if (!both || !takesBuiltinMask(op))
      return failure();
    Block &body = op.getMaskMod().front();
    Value i = body.getArgument(2), j = body.getArgument(3);
    for (auto [causalSide, bandSide] :
         {std::pair(both.getLhs(), both.getRhs()),
          std::pair(both.getRhs(), both.getLhs())}) {
      auto band = bandSide.getDefiningOp<arith::CmpIOp>();
      if (!isKeyAtOrBeforeQuery(causalSide, i, j) || !band)
        continue;
      // i - j <= c (window c + 1) or i - j < c (window c), signed: past
      // the causal side's j <= i the difference is never negative.
      auto distance = band.getLhs().getDefiningOp<arith::SubIOp>();
      APInt bound;
      if (!distance || distance.getLhs() != i || distance.getRhs() != j ||
          !matchPattern(band.getRhs(), m_ConstantInt(&bound)))
        continue;
      using P = arith::CmpIPredicate;
      int64_t window = band.getPredicate() == P::sle ? bound.getSExtValue() + 1
                       : band.getPredicate() == P::slt ? bound.getSExtValue()
                                                       : 0;
      if (window < 1)
        continue;
      rewriter.modifyOpInPlace(op, [&] {
        op.setCausal(true);
        op.setWindowAttr(rewriter.getI64IntegerAttr(window));
        eraseRegion(rewriter, op.getMaskMod());
      });
      return success();
    }
    return failure();
  }
};

/// mask_mod { true } -> no mask_mod.
template <typename AttentionOpT>
struct FoldTrueMaskMod : OpRewritePattern<AttentionOpT> {
  using OpRewritePattern<AttentionOpT>::OpRewritePattern;
  LogicalResult matchAndRewrite(AttentionOpT op,
                                PatternRewriter &rewriter) const override {
    Value visible = yieldedBy(op.getMaskMod());
    if (!visible || !matchPattern(visible, m_One()))
      return failure();
    rewriter.modifyOpInPlace(op,
                             [&] { eraseRegion(rewriter, op.getMaskMod()); });
    return success();
  }
};

/// The positive finite f32 constant `v` is, if it is one.
std::optional<double> positiveConstant(Value v) {
  FloatAttr attr;
  if (!matchPattern(v, m_Constant(&attr)))
    return std::nullopt;
  double c = attr.getValueAsDouble();
  if (!(c > 0) || !std::isfinite(c))
    return std::nullopt;
  return c;
}

/// score_mod { c * tanh(s / c) } -> softcap = c. Block arguments (s, b, h,
/// i, j, captures).
template <typename AttentionOpT>
struct FoldSoftcapScoreMod : OpRewritePattern<AttentionOpT> {
  using OpRewritePattern<AttentionOpT>::OpRewritePattern;
  LogicalResult matchAndRewrite(AttentionOpT op,
                                PatternRewriter &rewriter) const override {
    Value result = yieldedBy(op.getScoreMod());
    auto outer = result ? result.getDefiningOp<arith::MulFOp>() : nullptr;
    if (!outer || op.getSoftcap())
      return failure();
    Value score = op.getScoreMod().front().getArgument(0);
    // c * tanh(..) in either order.
    for (auto [tanhSide, capSide] :
         {std::pair(outer.getLhs(), outer.getRhs()),
          std::pair(outer.getRhs(), outer.getLhs())}) {
      auto tanh = tanhSide.getDefiningOp<math::TanhOp>();
      std::optional<double> cap = positiveConstant(capSide);
      if (!tanh || !cap)
        continue;
      // s / c, or s * (1 / c).
      Operation *inner = tanh.getOperand().getDefiningOp();
      std::optional<double> innerFactor;
      if (auto div = dyn_cast_or_null<arith::DivFOp>(inner);
          div && div.getLhs() == score)
        if (std::optional<double> c = positiveConstant(div.getRhs()))
          innerFactor = 1.0 / *c;
      if (auto mul = dyn_cast_or_null<arith::MulFOp>(inner);
          mul && (mul.getLhs() == score || mul.getRhs() == score))
        innerFactor = positiveConstant(mul.getLhs() == score ? mul.getRhs()
                                                             : mul.getLhs());
      // The factor inside must be 1 / c as f32 rounds it.
      if (!innerFactor ||
          static_cast<float>(*innerFactor) != static_cast<float>(1.0 / *cap))
        continue;
      rewriter.modifyOpInPlace(op, [&] {
        op.setSoftcapAttr(rewriter.getF32FloatAttr(static_cast<float>(*cap)));
        eraseRegion(rewriter, op.getScoreMod());
      });
      return success();
    }
    return failure();
  }
};

/// score_mod { s } -> no score_mod.
template <typename AttentionOpT>
struct FoldIdentityScoreMod : OpRewritePattern<AttentionOpT> {
  using OpRewritePattern<AttentionOpT>::OpRewritePattern;
  LogicalResult matchAndRewrite(AttentionOpT op,
                                PatternRewriter &rewriter) const override {
    Value result = yieldedBy(op.getScoreMod());
    if (!result || result != op.getScoreMod().front().getArgument(0))
      return failure();
    rewriter.modifyOpInPlace(op,
                             [&] { eraseRegion(rewriter, op.getScoreMod()); });
    return success();
  }
};

/// Captures with no region left to read them.
template <typename AttentionOpT>
struct DropUnreadCaptures : OpRewritePattern<AttentionOpT> {
  using OpRewritePattern<AttentionOpT>::OpRewritePattern;
  LogicalResult matchAndRewrite(AttentionOpT op,
                                PatternRewriter &rewriter) const override {
    if (op.hasModifications() || op.getCaptures().empty())
      return failure();
    rewriter.modifyOpInPlace(op, [&] { op.getCapturesMutable().clear(); });
    return success();
  }
};

template <typename AttentionOpT> void addPatterns(RewritePatternSet &patterns) {
  patterns.add<
      FoldCausalMaskMod<AttentionOpT>, FoldSlidingWindowMaskMod<AttentionOpT>,
      FoldTrueMaskMod<AttentionOpT>, FoldSoftcapScoreMod<AttentionOpT>,
      FoldIdentityScoreMod<AttentionOpT>, DropUnreadCaptures<AttentionOpT>>(
      patterns.getContext());
}

struct FAFoldModificationsPass
    : fa::impl::FAFoldModificationsBase<FAFoldModificationsPass> {
  void runOnOperation() override {
    RewritePatternSet patterns(&getContext());
    addPatterns<AttentionOp>(patterns);
    addPatterns<AttentionBackwardOp>(patterns);
    // Only the attentions: no other op is touched (nor folded).
    GreedyRewriteConfig config;
    config.setStrictness(GreedyRewriteStrictness::ExistingOps);
    SmallVector<Operation *> attentions;
    getOperation().walk([&](Operation *op) {
      if (isa<AttentionOp, AttentionBackwardOp>(op))
        attentions.push_back(op);
    });
    if (attentions.empty())
      return;
    if (failed(
            applyOpPatternsGreedily(attentions, std::move(patterns), config)))
      return signalPassFailure();
  }
};

} // namespace
