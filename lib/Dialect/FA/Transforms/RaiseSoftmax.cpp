//===- RaiseSoftmax.cpp - fa-raise-attention's softmax matching -----------===//
//
// fa-raise-attention's softmaxes: linalg.softmax or its decomposition
// (row max, exp of the difference, row sum, division) over the keys,
// torch's _safe_softmax around one, and the softmax-like values that make
// a contraction a candidate P V.
//
//===----------------------------------------------------------------------===//

#include "RaiseAttention.h"

#include "mlir/Dialect/Math/IR/Math.h"
#include "mlir/Dialect/Tensor/IR/Tensor.h"
#include "mlir/IR/Matchers.h"
#include "llvm/ADT/STLExtras.h"

#include <limits>

namespace mlir::fa::raise {

/// [.., N] reshaped to [.., N, 1] (a row statistic given back its reduced
/// dim, as jnp's keepdims=True does): returns the [.., N] tensor, or
/// nullptr.
static Value throughTrailingUnitExpand(Value v) {
  auto expand = v.getDefiningOp<tensor::ExpandShapeOp>();
  if (!expand)
    return nullptr;
  ArrayRef<int64_t> shape = expand.getResultType().getShape();
  int64_t rank = shape.size();
  if (rank < 2 || shape.back() != 1 ||
      expand.getSrcType().getRank() != rank - 1)
    return nullptr;
  SmallVector<ReassociationIndices> groups = expand.getReassociationIndices();
  return groups.back() == ReassociationIndices{rank - 2, rank - 1}
             ? expand.getSrc()
             : nullptr;
}

/// (d0, .., d{r-1}) -> (d0, .., d{r-2}): how row statistics are indexed.
static AffineMap rowMap(int64_t rank, MLIRContext *ctx) {
  SmallVector<AffineExpr> rowDims;
  for (int64_t d = 0; d + 1 < rank; ++d)
    rowDims.push_back(getAffineDimExpr(d, ctx));
  return AffineMap::get(rank, 0, rowDims, ctx);
}

/// Whether `map` indexes row statistics: (d0, .., d{r-2}), or torch-mlir's
/// keep-dim form (d0, .., d{r-2}, 0) on a [.., N, 1] tensor.
static bool isRowMap(AffineMap map, int64_t rank) {
  MLIRContext *ctx = map.getContext();
  if (map == rowMap(rank, ctx))
    return true;
  SmallVector<AffineExpr> keepDim(rowMap(rank, ctx).getResults());
  keepDim.push_back(getAffineConstantExpr(0, ctx));
  return map == AffineMap::get(rank, 0, keepDim, ctx);
}

/// A reduction over the last of `rank` dims: generic with that dim the only
/// reduction, or linalg.reduce over it; body combining the input with the
/// accumulator by one of OpTys. Returns the reduced input. A generic may
/// yield more results (torch-mlir's aten.max.dim also yields the argmax):
/// `v`'s own yielded value must combine only the input and its own
/// accumulator, so the others cannot change it.
template <typename... OpTys>
static Value matchRowReduction(Value v, int64_t rank, bool zeroInit = false) {
  if (Value reduced = throughTrailingUnitExpand(v))
    v = reduced;
  auto isCombiner = [](Block &body, unsigned result) {
    Value y = cast<linalg::YieldOp>(body.getTerminator()).getOperand(result);
    Operation *op = y.getDefiningOp();
    if (!op || op->getBlock() != &body || !isa<OpTys...>(op) ||
        (body.getNumArguments() == 2 && body.getOperations().size() != 2))
      return false;
    Value a = body.getArgument(0), acc = body.getArgument(1 + result);
    return (op->getOperand(0) == a && op->getOperand(1) == acc) ||
           (op->getOperand(0) == acc && op->getOperand(1) == a);
  };
  if (auto reduce = v.getDefiningOp<linalg::ReduceOp>()) {
    if (reduce.getInputs().size() != 1 ||
        reduce.getDimensions() != ArrayRef<int64_t>{rank - 1} ||
        (zeroInit && !isZeroInit(reduce.getInits()[0])) ||
        !isCombiner(reduce.getCombiner().front(), 0))
      return nullptr;
    return reduce.getInputs()[0];
  }
  auto g = v.getDefiningOp<linalg::GenericOp>();
  if (!g || g.getNumDpsInputs() != 1 || g.getNumLoops() != rank ||
      g.getNumReductionLoops() != 1 ||
      g.getIteratorTypesArray().back() != utils::IteratorType::reduction)
    return nullptr;
  unsigned result = cast<OpResult>(v).getResultNumber();
  if (zeroInit && !isZeroInit(g.getDpsInitOperand(result)->get()))
    return nullptr;
  // Input read as is, results indexed by the row: (d0, .., d{r-2}).
  SmallVector<AffineMap> maps = g.getIndexingMapsArray();
  if (!maps[0].isIdentity() ||
      !llvm::all_of(ArrayRef(maps).drop_front(),
                    [&](AffineMap m) { return isRowMap(m, rank); }) ||
      !isCombiner(g.getRegion().front(), result))
    return nullptr;
  return g.getDpsInputOperand(0)->get();
}

/// in0 OP broadcast(in1) with in1 indexed by the row: returns in0, in1.
template <typename OpTy>
static bool matchRowBroadcast(linalg::GenericOp g, Value &full, Value &row) {
  if (!g)
    return false;
  int64_t rank = g.getNumLoops();
  if (g.getNumDpsInputs() != 2 || g.getNumDpsInits() != 1 || rank < 2 ||
      g.getNumParallelLoops() != rank)
    return false;
  SmallVector<AffineMap> maps = g.getIndexingMapsArray();
  if (!maps[0].isIdentity() || !isRowMap(maps[1], rank) ||
      !maps[2].isIdentity())
    return false;
  Block &body = g.getRegion().front();
  auto op = dyn_cast<OpTy>(&body.front());
  if (!op || op->getOperand(0) != body.getArgument(0) ||
      op->getOperand(1) != body.getArgument(1))
    return false;
  full = g.getDpsInputOperand(0)->get();
  row = g.getDpsInputOperand(1)->get();
  return true;
}

/// softmax over the last dim, as linalg.softmax or decomposed:
/// m = rowmax(x); e = exp(x - m); l = rowsum(e); p = e / l. Returns x.
FailureOr<Value> matchSoftmax(Value p, Why &why) {
  if (auto softmax = p.getDefiningOp<linalg::SoftmaxOp>()) {
    int64_t rank = rankOf(softmax.getInput());
    if (softmax.getDimension() != uint64_t(rank - 1))
      return why("the softmax is over dim " + Twine(softmax.getDimension()) +
                 ", not the keys (the last dim)");
    return softmax.getInput();
  }
  auto div = p.getDefiningOp<linalg::GenericOp>();
  Value e, l;
  if (!div || div.getRegion().front().getOperations().size() != 2 ||
      !matchRowBroadcast<arith::DivFOp>(div, e, l) ||
      yielded(div) != div.getRegion().front().front().getResult(0))
    return why("P is not a softmax over the keys (linalg.softmax or "
               "max/sub/exp/sum/div over the last dim)");
  int64_t rank = rankOf(e);
  if (matchRowReduction<arith::AddFOp>(l, rank, /*zeroInit=*/true) != e)
    return why("the softmax's denominator is not the row sum of its "
               "numerator over the keys, from zero");
  // e = exp(x - m): one generic (subf then exp) or exp of a sub generic.
  auto expGen = e.getDefiningOp<linalg::GenericOp>();
  if (!expGen)
    return why("the softmax's numerator is not exp(x - rowmax(x))");
  Value x, m;
  Block &body = expGen.getRegion().front();
  if (body.getOperations().size() == 3 &&
      matchRowBroadcast<arith::SubFOp>(expGen, x, m)) {
    auto exp = dyn_cast<math::ExpOp>(*std::next(body.begin()));
    if (!exp || exp.getOperand() != body.front().getResult(0) ||
        yielded(expGen) != exp.getResult())
      return why("the softmax's numerator is not exp(x - rowmax(x))");
  } else {
    // exp of its input, element for element, of a generic x - m.
    auto exp = body.getOperations().size() == 2
                   ? dyn_cast<math::ExpOp>(&body.front())
                   : nullptr;
    if (!exp || expGen.getNumDpsInputs() != 1 || !isElementwise(expGen) ||
        !expGen.getMatchingIndexingMap(expGen.getDpsInputOperand(0))
             .isIdentity() ||
        exp.getOperand() != body.getArgument(0) ||
        yielded(expGen) != exp.getResult())
      return why("the softmax's numerator is not exp(x - rowmax(x))");
    auto sub =
        expGen.getDpsInputOperand(0)->get().getDefiningOp<linalg::GenericOp>();
    if (!sub || sub.getRegion().front().getOperations().size() != 2 ||
        !matchRowBroadcast<arith::SubFOp>(sub, x, m) ||
        yielded(sub) != sub.getRegion().front().front().getResult(0))
      return why("the softmax's numerator is not exp(x - rowmax(x))");
  }
  if (matchRowReduction<arith::MaxNumFOp, arith::MaximumFOp>(m, rank) != x)
    return why("the softmax subtracts something other than the row max");
  return x;
}

/// torch's _safe_softmax (PyTorch >= 2.5's math SDPA, as torch-mlir
/// decomposes it): where(all(x == -inf, keys, keepdim), 0, softmax(x)).
/// Returns the softmax and sets `tested` to x. A row whose keys are all
/// masked gets P = 0, hence O = 0: what fa.attention computes for it.
Value safeSoftmaxInput(Value p, Value &tested) {
  auto g = p.getDefiningOp<linalg::GenericOp>();
  if (!isElementwise(g) || g.getNumLoops() < 2)
    return nullptr;
  int64_t rank = g.getNumLoops();
  Block &body = g.getRegion().front();
  auto sel = yielded(g).getDefiningOp<arith::SelectOp>();
  if (!sel || sel->getBlock() != &body)
    return nullptr;
  auto argOf = [&](Value v) -> OpOperand * {
    auto arg = dyn_cast<BlockArgument>(v);
    if (!arg || arg.getOwner() != &body ||
        arg.getArgNumber() >= g.getNumDpsInputs())
      return nullptr;
    return g.getDpsInputOperand(arg.getArgNumber());
  };
  OpOperand *flag = argOf(sel.getCondition());
  OpOperand *softmax = argOf(sel.getFalseValue());
  if (!flag || !softmax || !isRowMap(g.getMatchingIndexingMap(flag), rank) ||
      !g.getMatchingIndexingMap(softmax).isIdentity())
    return nullptr;
  // The true value: 0, a constant or a 0-d / splat constant tensor.
  Value zero = sel.getTrueValue();
  std::optional<double> z = scalarConstant(zero);
  if (OpOperand *in = argOf(zero)) {
    DenseElementsAttr dense;
    if (matchPattern(in->get(), m_Constant(&dense)) && dense.isSplat() &&
        isa<FloatType>(dense.getElementType()))
      z = dense.getSplatValue<APFloat>().convertToDouble();
  }
  if (!z || *z != 0.0)
    return nullptr;
  // The flag: a row reduction by andi of x == -inf.
  auto all = flag->get().getDefiningOp<linalg::GenericOp>();
  if (!all || all.getNumDpsInputs() != 1 || all.getNumLoops() != rank ||
      all.getNumReductionLoops() != 1 ||
      all.getIteratorTypesArray().back() != utils::IteratorType::reduction ||
      !all.getMatchingIndexingMap(all.getDpsInputOperand(0)).isIdentity() ||
      !isRowMap(all.getMatchingIndexingMap(all.getDpsInitOperand(0)), rank))
    return nullptr;
  Block &allBody = all.getRegion().front();
  auto andOp = yielded(all).getDefiningOp<arith::AndIOp>();
  if (!andOp || allBody.getOperations().size() != 2 ||
      !((andOp.getLhs() == allBody.getArgument(0) &&
         andOp.getRhs() == allBody.getArgument(1)) ||
        (andOp.getRhs() == allBody.getArgument(0) &&
         andOp.getLhs() == allBody.getArgument(1))))
    return nullptr;
  Attribute init;
  Value initValue = all.getDpsInitOperand(0)->get();
  if (auto fill = initValue.getDefiningOp<linalg::FillOp>())
    initValue = fill.getInputs()[0];
  if (!matchPattern(initValue, m_Constant(&init)))
    return nullptr;
  auto isTrue = [](Attribute a) {
    if (auto i = dyn_cast<IntegerAttr>(a))
      return i.getValue().isAllOnes();
    auto d = dyn_cast<DenseElementsAttr>(a);
    return d && d.isSplat() && d.getElementType().isInteger(1) &&
           d.getSplatValue<bool>();
  };
  if (!isTrue(init))
    return nullptr;
  auto eq = all.getDpsInputOperand(0)->get().getDefiningOp<linalg::GenericOp>();
  if (!isElementwise(eq) || eq.getNumDpsInputs() != 1 ||
      !eq.getMatchingIndexingMap(eq.getDpsInputOperand(0)).isIdentity())
    return nullptr;
  Block &eqBody = eq.getRegion().front();
  auto cmp = yielded(eq).getDefiningOp<arith::CmpFOp>();
  if (!cmp || cmp->getBlock() != &eqBody ||
      cmp.getPredicate() != arith::CmpFPredicate::OEQ)
    return nullptr;
  Value other =
      cmp.getLhs() == eqBody.getArgument(0) ? cmp.getRhs() : cmp.getLhs();
  std::optional<double> ninf = scalarConstant(other);
  if ((cmp.getLhs() != eqBody.getArgument(0) &&
       cmp.getRhs() != eqBody.getArgument(0)) ||
      !ninf || *ninf != -std::numeric_limits<double>::infinity())
    return nullptr;
  for (Operation &op : eqBody.without_terminator())
    if (&op != cmp.getOperation() && !isa<arith::ConstantOp>(op) &&
        !(isa<arith::TruncFOp, arith::ExtFOp>(op) &&
          scalarConstant(op.getResult(0))))
      return nullptr;
  tested = eq.getDpsInputOperand(0)->get();
  return softmax->get();
}

/// Whether `p`, through conversions and reshapes, is a softmax-like value
/// (linalg.softmax, or a division by a row reduction): what makes a
/// contraction a candidate P V, which gets a remark when not raised.
bool looksLikeSoftmax(Value p) {
  for (int step = 0; step < 8 && p; ++step) {
    Operation *def = p.getDefiningOp();
    if (!def)
      return false;
    if (isa<linalg::SoftmaxOp>(def))
      return true;
    Value tested;
    if (Value softmax = safeSoftmaxInput(p, tested)) {
      p = softmax;
      continue;
    }
    if (auto g = dyn_cast<linalg::GenericOp>(def)) {
      if (g.getNumReductionLoops() != 0)
        return false;
      bool divides = llvm::any_of(g.getRegion().front(), [](Operation &op) {
        return isa<arith::DivFOp>(op);
      });
      bool byReduction =
          llvm::any_of(g.getDpsInputOperands(), [](OpOperand *in) {
            // Possibly broadcast by a copy of a keep-dim reshape first.
            Value row = in->get();
            auto copy = row.getDefiningOp<linalg::GenericOp>();
            if (copy && isMaterialisedBroadcast(copy))
              row = copy.getDpsInputOperand(0)->get();
            if (Value reduced = throughTrailingUnitExpand(row))
              row = reduced;
            Operation *d = row.getDefiningOp();
            if (isa_and_nonnull<linalg::ReduceOp>(d))
              return true;
            auto rg = dyn_cast_or_null<linalg::GenericOp>(d);
            return rg && rg.getNumReductionLoops() > 0;
          });
      if (divides && byReduction)
        return true;
      p = g.getNumDpsInputs() ? g.getDpsInputOperand(0)->get() : nullptr;
      continue;
    }
    if (isa<tensor::CollapseShapeOp, tensor::ExpandShapeOp, tensor::CastOp>(
            def)) {
      p = def->getOperand(0);
      continue;
    }
    return false;
  }
  return false;
}

} // namespace mlir::fa::raise
