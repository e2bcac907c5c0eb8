//===- RaiseAttention.cpp - linalg attention to fa.attention --------------===//
//
// Front ends (torch-mlir, StableHLO -> linalg) spell attention as two batch
// matmuls around a softmax. Recognising it lets an ML compiler hand the whole
// computation to flash-mlir's loop orders and kernels.
//
//===----------------------------------------------------------------------===//

#include "fa/Dialect/FA/Transforms/Passes.h"

#include "mlir/Dialect/Linalg/IR/Linalg.h"
#include "mlir/Dialect/Math/IR/Math.h"
#include "mlir/Dialect/Tensor/IR/Tensor.h"
#include "mlir/IR/Matchers.h"
#include "mlir/Transforms/GreedyPatternRewriteDriver.h"

#include <cmath>

namespace mlir::fa {
#define GEN_PASS_DEF_FARAISEATTENTION
#include "fa/Dialect/FA/Transforms/Passes.h.inc"
} // namespace mlir::fa

using namespace mlir;
using namespace mlir::fa;

namespace {

/// A linalg.generic with one result, identity maps, all-parallel, whose body
/// is one binary arith op on (input 0, something); returns that op.
Operation *elementwiseBody(linalg::GenericOp op) {
  if (op.getNumDpsInits() != 1 || op->getNumResults() != 1 ||
      op.getNumParallelLoops() != op.getNumLoops())
    return nullptr;
  for (AffineMap map : op.getIndexingMapsArray())
    if (!map.isIdentity())
      return nullptr;
  Block &body = op.getRegion().front();
  if (body.getOperations().size() != 2)
    return nullptr;
  Operation *inner = &body.front();
  auto yield = cast<linalg::YieldOp>(body.getTerminator());
  if (yield.getNumOperands() != 1 || yield.getOperand(0) != inner->getResult(0))
    return nullptr;
  return inner;
}

/// x * c or x / c with c a scalar constant (captured or a splat input).
std::optional<double> matchScale(linalg::GenericOp op, Value &input) {
  Operation *inner = elementwiseBody(op);
  if (!inner || !isa<arith::MulFOp, arith::DivFOp>(inner))
    return std::nullopt;
  Block &body = op.getRegion().front();
  Value x = inner->getOperand(0), c = inner->getOperand(1);
  auto constantOf = [&](Value v) -> std::optional<double> {
    FloatAttr attr;
    if (matchPattern(v, m_Constant(&attr)))
      return attr.getValueAsDouble();
    // A second input that is a splat constant tensor.
    if (auto arg = dyn_cast<BlockArgument>(v); arg && arg.getOwner() == &body &&
                                               arg.getArgNumber() == 1 &&
                                               op.getNumDpsInputs() == 2) {
      DenseElementsAttr dense;
      if (matchPattern(op.getDpsInputOperand(1)->get(), m_Constant(&dense)) &&
          dense.isSplat())
        return dense.getSplatValue<APFloat>().convertToDouble();
    }
    return std::nullopt;
  };
  auto xArg = dyn_cast<BlockArgument>(x);
  if (!xArg || xArg.getOwner() != &body || xArg.getArgNumber() != 0)
    return std::nullopt;
  std::optional<double> cst = constantOf(c);
  if (!cst || *cst == 0.0)
    return std::nullopt;
  input = op.getDpsInputOperand(0)->get();
  return isa<arith::MulFOp>(inner) ? *cst : 1.0 / *cst;
}

/// x + M with M a constant [.., N, N] tensor that is 0 where j <= i and
/// -inf where j > i (the causal mask of torch's is_causal).
bool matchCausalMask(linalg::GenericOp op, Value &input) {
  Operation *inner = elementwiseBody(op);
  if (!inner || !isa<arith::AddFOp>(inner) || op.getNumDpsInputs() != 2)
    return false;
  DenseElementsAttr mask;
  if (!matchPattern(op.getDpsInputOperand(1)->get(), m_Constant(&mask)))
    return false;
  auto type = cast<ShapedType>(mask.getType());
  int64_t rank = type.getRank();
  int64_t n = type.getDimSize(rank - 2), m = type.getDimSize(rank - 1);
  auto values = mask.getValues<APFloat>();
  int64_t index = 0;
  for (APFloat v : values) {
    int64_t i = (index / m) % n, j = index % m;
    ++index;
    bool visible = j <= i;
    if (visible ? !v.isZero() : !(v.isInfinity() && v.isNegative()))
      return false;
  }
  input = op.getDpsInputOperand(0)->get();
  return true;
}


/// The single arith op of a generic's body (besides the yield), if any.
template <typename OpTy>
OpTy singleBodyOp(linalg::GenericOp op) {
  Block &body = op.getRegion().front();
  if (body.getOperations().size() != 2)
    return nullptr;
  return dyn_cast<OpTy>(&body.front());
}

/// A reduction over the last of three dims: generic with iterators
/// [parallel, parallel, reduction], or linalg.reduce over dim 2; body
/// combining the input with the accumulator by OpTy. Returns the reduced
/// input.
template <typename... OpTys>
Value matchRowReduction(Value v) {
  if (auto reduce = v.getDefiningOp<linalg::ReduceOp>()) {
    if (reduce.getDimensions() != ArrayRef<int64_t>{2} ||
        reduce.getInputs().size() != 1)
      return nullptr;
    Block &body = reduce.getRegion().front();
    if (body.getOperations().size() != 2 || !isa<OpTys...>(body.front()))
      return nullptr;
    return reduce.getInputs()[0];
  }
  auto g = v.getDefiningOp<linalg::GenericOp>();
  if (!g || g.getNumDpsInputs() != 1 || g.getNumLoops() != 3 ||
      g.getNumReductionLoops() != 1 ||
      g.getIteratorTypesArray()[2] != utils::IteratorType::reduction)
    return nullptr;
  Block &body = g.getRegion().front();
  if (body.getOperations().size() != 2 || !isa<OpTys...>(body.front()))
    return nullptr;
  return g.getDpsInputOperand(0)->get();
}

/// in0 OP broadcast(in1) with in1 indexed by (d0, d1): the row vector.
template <typename OpTy>
bool matchRowBroadcast(linalg::GenericOp g, Value &full, Value &row) {
  if (g.getNumDpsInputs() != 2 || g.getNumLoops() != 3 ||
      g.getNumParallelLoops() != 3)
    return false;
  SmallVector<AffineMap> maps = g.getIndexingMapsArray();
  MLIRContext *ctx = g.getContext();
  AffineMap rowMap = AffineMap::get(
      3, 0, {getAffineDimExpr(0, ctx), getAffineDimExpr(1, ctx)}, ctx);
  if (!maps[0].isIdentity() || maps[1] != rowMap)
    return false;
  Block &body = g.getRegion().front();
  Operation *first = &body.front();
  auto op = dyn_cast<OpTy>(first);
  if (!op || op->getOperand(0) != body.getArgument(0) ||
      op->getOperand(1) != body.getArgument(1))
    return false;
  full = g.getDpsInputOperand(0)->get();
  row = g.getDpsInputOperand(1)->get();
  return true;
}

/// softmax over the last dim, as linalg.softmax or decomposed:
///   m = rowmax(x); e = exp(x - m); l = rowsum(e); p = e / l.
/// Returns x.
Value matchSoftmax(Value p) {
  if (auto softmax = p.getDefiningOp<linalg::SoftmaxOp>()) {
    auto type = cast<RankedTensorType>(softmax.getInput().getType());
    if (type.getRank() != 3 || softmax.getDimension() != 2)
      return nullptr;
    return softmax.getInput();
  }
  auto div = p.getDefiningOp<linalg::GenericOp>();
  Value e, l;
  if (!div || div.getRegion().front().getOperations().size() != 2 ||
      !matchRowBroadcast<arith::DivFOp>(div, e, l))
    return nullptr;
  if (matchRowReduction<arith::AddFOp>(l) != e)
    return nullptr;
  // e = exp(x - m): one generic (subf then exp) or exp of a sub generic.
  auto expGen = e.getDefiningOp<linalg::GenericOp>();
  if (!expGen)
    return nullptr;
  Value x, m;
  Block &body = expGen.getRegion().front();
  if (body.getOperations().size() == 3 &&
      matchRowBroadcast<arith::SubFOp>(expGen, x, m)) {
    auto exp = dyn_cast<math::ExpOp>(*std::next(body.begin()));
    if (!exp || exp.getOperand() != body.front().getResult(0))
      return nullptr;
  } else {
    auto exp = singleBodyOp<math::ExpOp>(expGen);
    if (!exp || expGen.getNumDpsInputs() != 1)
      return nullptr;
    auto sub = expGen.getDpsInputOperand(0)->get().getDefiningOp<linalg::GenericOp>();
    if (!sub || sub.getRegion().front().getOperations().size() != 2 ||
        !matchRowBroadcast<arith::SubFOp>(sub, x, m))
      return nullptr;
  }
  if (matchRowReduction<arith::MaxNumFOp, arith::MaximumFOp>(m) != x)
    return nullptr;
  if (cast<RankedTensorType>(x.getType()).getRank() != 3)
    return nullptr;
  return x;
}

struct RaiseBatchMatmulAttention : OpRewritePattern<linalg::BatchMatmulOp> {
  using OpRewritePattern::OpRewritePattern;

  LogicalResult matchAndRewrite(linalg::BatchMatmulOp pv,
                                PatternRewriter &rewriter) const override {
    if (!pv.hasPureTensorSemantics() || pv.hasUserDefinedMaps())
      return failure();
    Value scores = matchSoftmax(pv.getDpsInputOperand(0)->get());
    if (!scores)
      return rewriter.notifyMatchFailure(
          pv, "P is not a softmax over the keys (linalg.softmax or "
              "max/sub/exp/sum/div)");
    bool causal = false;
    double scale = 1.0;
    if (auto g = scores.getDefiningOp<linalg::GenericOp>()) {
      Value in;
      if (matchCausalMask(g, in)) {
        causal = true;
        scores = in;
      }
    }
    if (auto g = scores.getDefiningOp<linalg::GenericOp>()) {
      Value in;
      if (std::optional<double> s = matchScale(g, in)) {
        scale = *s;
        scores = in;
      }
    }
    auto qk = scores.getDefiningOp<linalg::BatchMatmulOp>();
    if (!qk || qk.hasUserDefinedMaps())
      return rewriter.notifyMatchFailure(pv, "scores are not Q K^T");
    auto transpose =
        qk.getDpsInputOperand(1)->get().getDefiningOp<linalg::TransposeOp>();
    if (!transpose ||
        transpose.getPermutation() != ArrayRef<int64_t>{0, 2, 1})
      return rewriter.notifyMatchFailure(pv, "K is not transposed");
    if (!(scale > 0.0) || !std::isfinite(scale))
      return rewriter.notifyMatchFailure(pv, "scale is not positive");
    Value q = qk.getDpsInputOperand(0)->get();
    Value k = transpose.getInput();
    Value v = pv.getDpsInputOperand(1)->get();
    auto qType = cast<RankedTensorType>(q.getType());
    auto kType = cast<RankedTensorType>(k.getType());
    auto vType = cast<RankedTensorType>(v.getType());
    auto oType = cast<RankedTensorType>(pv->getResult(0).getType());
    Type elt = qType.getElementType();
    if (!elt.isF16() && !elt.isBF16() && !elt.isF32())
      return rewriter.notifyMatchFailure(pv, "unsupported element type");
    if (kType.getElementType() != elt || vType.getElementType() != elt ||
        oType.getElementType() != elt || qType.isDynamicDim(2) ||
        vType.isDynamicDim(2))
      return rewriter.notifyMatchFailure(pv, "types or head dims do not fit");

    // [BH, N, D] -> [1, BH, N, D]
    Location loc = pv.getLoc();
    SmallVector<ReassociationIndices> reassociation = {{0, 1}, {2}, {3}};
    auto expand = [&](Value t) -> Value {
      auto type = cast<RankedTensorType>(t.getType());
      SmallVector<int64_t> shape = {1};
      llvm::append_range(shape, type.getShape());
      return tensor::ExpandShapeOp::create(
          rewriter, loc, RankedTensorType::get(shape, type.getElementType()),
          t, reassociation);
    };
    Value q4 = expand(q), k4 = expand(k), v4 = expand(v);
    SmallVector<int64_t> oShape = {1};
    llvm::append_range(oShape, oType.getShape());
    auto o4Type = RankedTensorType::get(oShape, elt);
    SmallVector<Type> resultTypes = {o4Type};
    auto attention = AttentionOp::create(
        rewriter, loc, resultTypes, q4, k4, v4, /*outs=*/ValueRange{},
        rewriter.getF32FloatAttr(static_cast<float>(scale)),
        causal ? rewriter.getUnitAttr() : UnitAttr(), IntegerAttr(),
        FloatAttr(), IntegerAttr(), IntegerAttr());
    Value o = tensor::CollapseShapeOp::create(
        rewriter, loc, oType, attention.getResults()[0], reassociation);
    rewriter.replaceOp(pv, o);
    return success();
  }
};

struct FARaiseAttentionPass
    : fa::impl::FARaiseAttentionBase<FARaiseAttentionPass> {
  void runOnOperation() override {
    RewritePatternSet patterns(&getContext());
    patterns.add<RaiseBatchMatmulAttention>(&getContext());
    if (failed(applyPatternsGreedily(getOperation(), std::move(patterns))))
      signalPassFailure();
  }
};

} // namespace
