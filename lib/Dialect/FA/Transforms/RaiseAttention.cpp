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

/// A scalar constant, possibly converted (torch-mlir materialises an f64
/// scalar and truncates it to the element type inside the body).
std::optional<double> scalarConstant(Value v) {
  while (Operation *def = v.getDefiningOp()) {
    if (!isa<arith::TruncFOp, arith::ExtFOp>(def))
      break;
    v = def->getOperand(0);
  }
  FloatAttr attr;
  if (matchPattern(v, m_Constant(&attr)))
    return attr.getValueAsDouble();
  return std::nullopt;
}

/// A linalg.generic with one result, identity maps, all-parallel, whose
/// body computes one binary arith op (besides constants and their
/// conversions) and yields it; returns that op.
Operation *elementwiseBody(linalg::GenericOp op) {
  if (op.getNumDpsInits() != 1 || op->getNumResults() != 1 ||
      op.getNumParallelLoops() != op.getNumLoops())
    return nullptr;
  for (AffineMap map : op.getIndexingMapsArray())
    if (!map.isIdentity())
      return nullptr;
  Block &body = op.getRegion().front();
  auto yield = cast<linalg::YieldOp>(body.getTerminator());
  if (yield.getNumOperands() != 1)
    return nullptr;
  Operation *inner = yield.getOperand(0).getDefiningOp();
  if (!inner || inner->getBlock() != &body)
    return nullptr;
  for (Operation &other : body.without_terminator())
    if (&other != inner && !isa<arith::ConstantOp>(other) &&
        !(isa<arith::TruncFOp, arith::ExtFOp>(other) &&
          scalarConstant(other.getResult(0))))
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
  // c * x as well as x * c.
  if (auto arg = dyn_cast<BlockArgument>(c); isa<arith::MulFOp>(inner) && arg &&
                                             arg.getOwner() == &body &&
                                             arg.getArgNumber() == 0)
    std::swap(x, c);
  auto constantOf = [&](Value v) -> std::optional<double> {
    if (std::optional<double> value = scalarConstant(v))
      return value;
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

/// The map of a mask operand: identity, or (d0, .., d{r-1}) -> (d{r-2},
/// d{r-1}) for an [N, N] mask broadcast over the batch and heads.
bool isMaskMap(AffineMap map, int64_t rank) {
  if (map.isIdentity() && map.getNumResults() == rank)
    return true;
  MLIRContext *ctx = map.getContext();
  return map == AffineMap::get(rank, 0,
                               {getAffineDimExpr(rank - 2, ctx),
                                getAffineDimExpr(rank - 1, ctx)},
                               ctx);
}

/// Whether a constant mask, over its last two dims (query i, key j), is
/// `visible(i, j) == (j <= i)` under `isVisible`, at every position.
template <typename T>
bool isCausalPattern(DenseElementsAttr mask,
                     llvm::function_ref<std::optional<bool>(T)> isVisible) {
  auto type = cast<ShapedType>(mask.getType());
  int64_t rank = type.getRank();
  if (rank < 2)
    return false;
  int64_t n = type.getDimSize(rank - 2), m = type.getDimSize(rank - 1);
  int64_t index = 0;
  for (T v : mask.getValues<T>()) {
    int64_t i = (index / m) % n, j = index % m;
    ++index;
    std::optional<bool> visible = isVisible(v);
    if (!visible || *visible != (j <= i))
      return false;
  }
  return true;
}

bool isNegInf(Value v) {
  FloatAttr attr;
  return matchPattern(v, m_Constant(&attr)) && attr.getValue().isInfinity() &&
         attr.getValue().isNegative();
}

/// All-parallel generic with one result, an identity output map and input
/// 0 (the scores) read through the identity; its rank.
std::optional<int64_t> scoresElementwise(linalg::GenericOp g) {
  if (g.getNumDpsInits() != 1 || g->getNumResults() != 1 ||
      g.getNumParallelLoops() != g.getNumLoops() || g.getNumDpsInputs() < 1)
    return std::nullopt;
  SmallVector<AffineMap> maps = g.getIndexingMapsArray();
  if (!maps[0].isIdentity() || !maps.back().isIdentity())
    return std::nullopt;
  return g.getNumLoops();
}

/// A causal mask on the scores, in any of the forms front ends write:
///  * s + M, M a constant 0 on/below the diagonal and -inf above;
///  * select(mask, s, -inf), mask a constant i1 tensor true on/below the
///    diagonal (or select(mask, -inf, s) with mask true above it);
///  * select(j <= i, s, -inf) from linalg.index comparisons (cmpi on the key
///    and query indices, either way round, either polarity).
/// M / mask may be [.., N, N] or [N, N] broadcast over batch and heads.
/// Strictly-lower (j < i) or other masks do not match.
bool matchCausalMask(linalg::GenericOp g, Value &input) {
  std::optional<int64_t> rank = scoresElementwise(g);
  if (!rank || *rank < 2)
    return false;
  Block &body = g.getRegion().front();
  auto yield = cast<linalg::YieldOp>(body.getTerminator());
  Value result = yield.getOperand(0);
  Value scores = body.getArgument(0);
  SmallVector<AffineMap> maps = g.getIndexingMapsArray();

  // s + M.
  if (auto add = result.getDefiningOp<arith::AddFOp>()) {
    DenseElementsAttr mask;
    if (body.getOperations().size() != 2 || g.getNumDpsInputs() != 2 ||
        add.getLhs() != scores || add.getRhs() != body.getArgument(1) ||
        !isMaskMap(maps[1], *rank) ||
        !matchPattern(g.getDpsInputOperand(1)->get(), m_Constant(&mask)))
      return false;
    if (!isCausalPattern<APFloat>(mask, [](APFloat v) -> std::optional<bool> {
          if (v.isZero())
            return true;
          if (v.isInfinity() && v.isNegative())
            return false;
          return std::nullopt;
        }))
      return false;
    input = g.getDpsInputOperand(0)->get();
    return true;
  }

  auto select = result.getDefiningOp<arith::SelectOp>();
  if (!select)
    return false;
  // Which operand keeps the score: the condition then means "visible" when
  // it selects the score on true.
  bool trueIsVisible;
  if (select.getTrueValue() == scores && isNegInf(select.getFalseValue()))
    trueIsVisible = true;
  else if (select.getFalseValue() == scores && isNegInf(select.getTrueValue()))
    trueIsVisible = false;
  else
    return false;
  Value cond = select.getCondition();

  // select(mask, ...) with a constant i1 mask input.
  if (auto arg = dyn_cast<BlockArgument>(cond)) {
    DenseElementsAttr mask;
    if (arg.getOwner() != &body || arg.getArgNumber() != 1 ||
        g.getNumDpsInputs() != 2 || !isMaskMap(maps[1], *rank) ||
        !matchPattern(g.getDpsInputOperand(1)->get(), m_Constant(&mask)) ||
        !mask.getElementType().isInteger(1))
      return false;
    if (!isCausalPattern<bool>(mask, [&](bool v) -> std::optional<bool> {
          return v == trueIsVisible;
        }))
      return false;
    input = g.getDpsInputOperand(0)->get();
    return true;
  }

  // select(cmpi(index, index), ...): the query index is loop r-2, the key
  // index loop r-1.
  auto cmp = cond.getDefiningOp<arith::CmpIOp>();
  if (!cmp || g.getNumDpsInputs() != 1)
    return false;
  auto indexOf = [&](Value v) -> std::optional<int64_t> {
    if (auto idx = v.getDefiningOp<linalg::IndexOp>())
      return idx.getDim();
    return std::nullopt;
  };
  std::optional<int64_t> a = indexOf(cmp.getLhs()), b = indexOf(cmp.getRhs());
  int64_t qDim = *rank - 2, kDim = *rank - 1;
  if (!a || !b)
    return false;
  using P = arith::CmpIPredicate;
  // Normalise to "key OP query": i OP j is j OP' i with the operands
  // swapped (uge <-> ule, ugt <-> ult, ...).
  auto swapped = [](P p) {
    switch (p) {
    case P::ule:
      return P::uge;
    case P::uge:
      return P::ule;
    case P::ult:
      return P::ugt;
    case P::ugt:
      return P::ult;
    case P::sle:
      return P::sge;
    case P::sge:
      return P::sle;
    case P::slt:
      return P::sgt;
    case P::sgt:
      return P::slt;
    default:
      return p;
    }
  };
  P pred = cmp.getPredicate();
  if (*a == qDim && *b == kDim)
    pred = swapped(pred);
  else if (!(*a == kDim && *b == qDim))
    return false;
  bool condIsVisible;
  switch (pred) {
  case P::ule:
  case P::sle: // j <= i
    condIsVisible = true;
    break;
  case P::ugt:
  case P::sgt: // j > i
    condIsVisible = false;
    break;
  default:
    return false;
  }
  if (condIsVisible != trueIsVisible)
    return false;
  // Nothing else in the body but the index ops, the compare and the select.
  for (Operation &op : body.without_terminator())
    if (!isa<linalg::IndexOp, arith::CmpIOp, arith::SelectOp,
             arith::ConstantOp>(op))
      return false;
  input = g.getDpsInputOperand(0)->get();
  return true;
}

/// The single arith op of a generic's body (besides the yield), if any.
template <typename OpTy> OpTy singleBodyOp(linalg::GenericOp op) {
  Block &body = op.getRegion().front();
  if (body.getOperations().size() != 2)
    return nullptr;
  return dyn_cast<OpTy>(&body.front());
}

/// Whether `init` (a contraction's or a sum's accumulator) starts at zero:
/// linalg.fill of a zero constant, or a zero constant tensor. Anything else
/// (a bias added to the scores, a "softmax plus one" denominator) is not
/// attention and must not be raised.
bool isZeroInit(Value init) {
  auto isZero = [](Attribute a) {
    if (auto f = dyn_cast_or_null<FloatAttr>(a))
      return f.getValue().isZero();
    if (auto d = dyn_cast_or_null<DenseElementsAttr>(a))
      return d.isSplat() && d.getSplatValue<APFloat>().isZero();
    return false;
  };
  if (auto fill = init.getDefiningOp<linalg::FillOp>()) {
    Attribute value;
    return matchPattern(fill.getInputs()[0], m_Constant(&value)) &&
           isZero(value);
  }
  Attribute value;
  return matchPattern(init, m_Constant(&value)) && isZero(value);
}

/// (d0, .., d{r-1}) -> (d0, .., d{r-2}): how row statistics are indexed.
AffineMap rowMap(int64_t rank, MLIRContext *ctx) {
  SmallVector<AffineExpr> rowDims;
  for (int64_t d = 0; d + 1 < rank; ++d)
    rowDims.push_back(getAffineDimExpr(d, ctx));
  return AffineMap::get(rank, 0, rowDims, ctx);
}

/// Whether `map` indexes row statistics: (d0, .., d{r-2}), or torch-mlir's
/// keep-dim form (d0, .., d{r-2}, 0) on a [.., N, 1] tensor.
bool isRowMap(AffineMap map, int64_t rank) {
  MLIRContext *ctx = map.getContext();
  if (map == rowMap(rank, ctx))
    return true;
  SmallVector<AffineExpr> keepDim(rowMap(rank, ctx).getResults());
  keepDim.push_back(getAffineConstantExpr(0, ctx));
  return map == AffineMap::get(rank, 0, keepDim, ctx);
}

/// A reduction over the last of `rank` dims: generic with that dim the only
/// reduction, or linalg.reduce over it; body combining the input with the
/// accumulator by OpTy. Returns the reduced input.
template <typename... OpTys>
Value matchRowReduction(Value v, int64_t rank, bool zeroInit = false) {
  // The body: yield (in OP acc) of the two block arguments.
  auto isCombiner = [](Block &body) {
    if (body.getOperations().size() != 2 || !isa<OpTys...>(body.front()))
      return false;
    Operation &op = body.front();
    Value a = op.getOperand(0), b = op.getOperand(1);
    Value in = body.getArgument(0), acc = body.getArgument(1);
    return ((a == in && b == acc) || (a == acc && b == in)) &&
           cast<linalg::YieldOp>(body.getTerminator()).getOperand(0) ==
               op.getResult(0);
  };
  if (auto reduce = v.getDefiningOp<linalg::ReduceOp>()) {
    if (reduce.getDimensions() != ArrayRef<int64_t>{rank - 1} ||
        reduce.getInputs().size() != 1 || reduce.getInits().size() != 1 ||
        (zeroInit && !isZeroInit(reduce.getInits()[0])) ||
        !isCombiner(reduce.getRegion().front()))
      return nullptr;
    return reduce.getInputs()[0];
  }
  auto g = v.getDefiningOp<linalg::GenericOp>();
  if (!g || g.getNumDpsInputs() != 1 || g.getNumDpsInits() != 1 ||
      g.getNumLoops() != rank || g.getNumReductionLoops() != 1 ||
      g.getIteratorTypesArray()[rank - 1] != utils::IteratorType::reduction ||
      (zeroInit && !isZeroInit(g.getDpsInitOperand(0)->get())))
    return nullptr;
  // Input read as is, result indexed by the row: (d0, .., d{r-2}).
  SmallVector<AffineMap> maps = g.getIndexingMapsArray();
  if (!maps[0].isIdentity() || !isRowMap(maps[1], rank) ||
      !isCombiner(g.getRegion().front()))
    return nullptr;
  return g.getDpsInputOperand(0)->get();
}

/// in0 OP broadcast(in1) with in1 indexed by (d0, .., d{r-2}): the row
/// vector.
template <typename OpTy>
bool matchRowBroadcast(linalg::GenericOp g, Value &full, Value &row) {
  int64_t rank = g.getNumLoops();
  if (g.getNumDpsInputs() != 2 || g.getNumDpsInits() != 1 || rank < 3 ||
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

/// What a generic's body yields.
Value yielded(linalg::GenericOp g) {
  return cast<linalg::YieldOp>(g.getRegion().front().getTerminator())
      .getOperand(0);
}

/// softmax over the last dim of a rank-3 or rank-4 tensor, as
/// linalg.softmax or decomposed: m = rowmax(x); e = exp(x - m);
/// l = rowsum(e); p = e / l. Returns x.
Value matchSoftmax(Value p) {
  auto rankOf = [](Value v) {
    return cast<RankedTensorType>(v.getType()).getRank();
  };
  if (auto softmax = p.getDefiningOp<linalg::SoftmaxOp>()) {
    int64_t rank = rankOf(softmax.getInput());
    if ((rank != 3 && rank != 4) ||
        softmax.getDimension() != uint64_t(rank - 1))
      return nullptr;
    return softmax.getInput();
  }
  auto div = p.getDefiningOp<linalg::GenericOp>();
  Value e, l;
  if (!div || div.getRegion().front().getOperations().size() != 2 ||
      !matchRowBroadcast<arith::DivFOp>(div, e, l) ||
      yielded(div) != div.getRegion().front().front().getResult(0))
    return nullptr;
  int64_t rank = rankOf(e);
  if (rank != 3 && rank != 4)
    return nullptr;
  if (matchRowReduction<arith::AddFOp>(l, rank, /*zeroInit=*/true) != e)
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
    if (!exp || exp.getOperand() != body.front().getResult(0) ||
        yielded(expGen) != exp.getResult())
      return nullptr;
  } else {
    // exp of its input, element for element, of a generic x - m.
    auto exp = singleBodyOp<math::ExpOp>(expGen);
    if (!exp || expGen.getNumDpsInputs() != 1 || expGen.getNumDpsInits() != 1 ||
        expGen.getNumParallelLoops() != expGen.getNumLoops() ||
        !llvm::all_of(expGen.getIndexingMapsArray(),
                      [](AffineMap map) { return map.isIdentity(); }) ||
        exp.getOperand() != body.getArgument(0) ||
        yielded(expGen) != exp.getResult())
      return nullptr;
    auto sub =
        expGen.getDpsInputOperand(0)->get().getDefiningOp<linalg::GenericOp>();
    if (!sub || sub.getRegion().front().getOperations().size() != 2 ||
        !matchRowBroadcast<arith::SubFOp>(sub, x, m) ||
        yielded(sub) != sub.getRegion().front().front().getResult(0))
      return nullptr;
  }
  if (matchRowReduction<arith::MaxNumFOp, arith::MaximumFOp>(m, rank) != x)
    return nullptr;
  return x;
}

/// An operand of a contraction with its grouped-query layout undone: K or
/// V of Hkv heads, each read by `group` consecutive query heads.
struct KVOperand {
  Value value;
  int64_t group = 1;
};

/// K or V [B, Hq, N, D] materialised from [B, Hkv, N, D] by repeating each
/// head `group` times (torch's repeat_interleave / expand + reshape): a
/// linalg.broadcast to [B, Hkv, G, N, D] collapsed back to 4-D, or a copy
/// generic reading (b, h floordiv G, j, d).
KVOperand undoHeadRepeat(Value v) {
  if (auto collapse = v.getDefiningOp<tensor::CollapseShapeOp>()) {
    auto bcast = collapse.getSrc().getDefiningOp<linalg::BroadcastOp>();
    SmallVector<ReassociationIndices> expected = {{0}, {1, 2}, {3}, {4}};
    if (bcast && collapse.getReassociationIndices() == expected &&
        bcast.getDimensions() == ArrayRef<int64_t>{2} &&
        !ShapedType::isDynamic(
            cast<ShapedType>(bcast.getInit().getType()).getDimSize(2)))
      return {bcast.getInput(),
              cast<ShapedType>(bcast.getInit().getType()).getDimSize(2)};
  }
  if (auto g = v.getDefiningOp<linalg::GenericOp>()) {
    SmallVector<AffineMap> maps = g.getIndexingMapsArray();
    Block &body = g.getRegion().front();
    if (g.getNumDpsInputs() == 1 && g.getNumLoops() == 4 &&
        g.getNumParallelLoops() == 4 && maps[1].isIdentity() &&
        body.getOperations().size() == 1 &&
        cast<linalg::YieldOp>(body.getTerminator()).getOperand(0) ==
            body.getArgument(0)) {
      AffineMap in = maps[0];
      MLIRContext *ctx = g.getContext();
      for (int64_t group = 2; group <= 64; ++group) {
        AffineMap want = AffineMap::get(
            4, 0,
            {getAffineDimExpr(0, ctx), getAffineDimExpr(1, ctx).floorDiv(group),
             getAffineDimExpr(2, ctx), getAffineDimExpr(3, ctx)},
            ctx);
        if (in == want)
          return {g.getDpsInputOperand(0)->get(), group};
      }
    }
  }
  return {v, 1};
}

/// A contraction over the last dim of its result's row: Q K^T ("..id,
/// ..jd -> ..ij", rhsKeysFirst) or P V ("..ij, ..jd -> ..id"), either a
/// linalg.batch_matmul (rank 3; K^T by linalg.transpose) or an einsum-like
/// linalg.generic (rank 3 or 4, body mulf + addf). The right operand may
/// read its heads as h floordiv G (grouped-query attention).
struct Contraction {
  Value lhs;
  KVOperand rhs;
  int64_t rank = 0;
};

std::optional<Contraction> matchContraction(Value result, bool isScores) {
  if (auto mm = result.getDefiningOp<linalg::BatchMatmulOp>()) {
    if (mm.hasUserDefinedMaps() || !mm.hasPureTensorSemantics() ||
        !isZeroInit(mm.getDpsInitOperand(0)->get()))
      return std::nullopt;
    Value rhs = mm.getDpsInputOperand(1)->get();
    if (isScores) {
      auto transpose = rhs.getDefiningOp<linalg::TransposeOp>();
      if (!transpose ||
          transpose.getPermutation() != ArrayRef<int64_t>{0, 2, 1})
        return std::nullopt;
      rhs = transpose.getInput();
    }
    return Contraction{mm.getDpsInputOperand(0)->get(), {rhs, 1}, 3};
  }
  auto g = result.getDefiningOp<linalg::GenericOp>();
  if (!g || g.getNumDpsInputs() != 2 || g.getNumDpsInits() != 1 ||
      g.getNumReductionLoops() != 1 || !g.hasPureTensorSemantics() ||
      !isZeroInit(g.getDpsInitOperand(0)->get()))
    return std::nullopt;
  int64_t rank = g.getNumLoops() - 1;
  if (rank != 3 && rank != 4)
    return std::nullopt;
  // Body: acc + a * b.
  Block &body = g.getRegion().front();
  if (body.getOperations().size() != 3)
    return std::nullopt;
  auto mul = dyn_cast<arith::MulFOp>(&body.front());
  auto add = dyn_cast<arith::AddFOp>(*std::next(body.begin()));
  if (!mul || !add ||
      cast<linalg::YieldOp>(body.getTerminator()).getOperand(0) != add ||
      !((mul.getLhs() == body.getArgument(0) &&
         mul.getRhs() == body.getArgument(1)) ||
        (mul.getLhs() == body.getArgument(1) &&
         mul.getRhs() == body.getArgument(0))) ||
      !((add.getLhs() == body.getArgument(2) && add.getRhs() == mul) ||
        (add.getRhs() == body.getArgument(2) && add.getLhs() == mul)))
    return std::nullopt;
  SmallVector<AffineMap> maps = g.getIndexingMapsArray();
  AffineMap lhsMap = maps[0], rhsMap = maps[1], outMap = maps[2];
  if (!outMap.isProjectedPermutation() || outMap.getNumResults() != rank ||
      !lhsMap.isProjectedPermutation() || lhsMap.getNumResults() != rank ||
      rhsMap.getNumResults() != rank)
    return std::nullopt;
  int64_t red = -1;
  for (auto [i, it] : llvm::enumerate(g.getIteratorTypesArray()))
    if (it == utils::IteratorType::reduction)
      red = i;
  auto dimOf = [](AffineExpr e) -> int64_t {
    auto d = dyn_cast<AffineDimExpr>(e);
    return d ? d.getPosition() : -1;
  };
  // lhs = (batch.., out[r-2], red) in both forms.
  for (int64_t i = 0; i + 2 < rank; ++i)
    if (lhsMap.getResult(i) != outMap.getResult(i))
      return std::nullopt;
  if (lhsMap.getResult(rank - 2) != outMap.getResult(rank - 2) ||
      dimOf(lhsMap.getResult(rank - 1)) != red)
    return std::nullopt;
  // rhs = (batch'.., out[r-1], red) for Q K^T, (batch'.., red, out[r-1])
  // for P V; batch' = batch, or the head dim floordiv G.
  AffineExpr keyOrValue = outMap.getResult(rank - 1);
  AffineExpr redExpr = getAffineDimExpr(red, g.getContext());
  if (isScores ? (rhsMap.getResult(rank - 2) != keyOrValue ||
                  rhsMap.getResult(rank - 1) != redExpr)
               : (rhsMap.getResult(rank - 2) != redExpr ||
                  rhsMap.getResult(rank - 1) != keyOrValue))
    return std::nullopt;
  int64_t group = 1;
  for (int64_t i = 0; i + 2 < rank; ++i) {
    AffineExpr want = outMap.getResult(i), got = rhsMap.getResult(i);
    if (got == want)
      continue;
    // Grouped-query heads: (h floordiv G) on the head dim of a 4-D tensor.
    auto bin = dyn_cast<AffineBinaryOpExpr>(got);
    auto cst = bin ? dyn_cast<AffineConstantExpr>(bin.getRHS()) : nullptr;
    if (rank != 4 || i != 1 || !bin ||
        bin.getKind() != AffineExprKind::FloorDiv || bin.getLHS() != want ||
        !cst || cst.getValue() < 2)
      return std::nullopt;
    group = cst.getValue();
  }
  return Contraction{g.getDpsInputOperand(0)->get(),
                     {g.getDpsInputOperand(1)->get(), group},
                     rank};
}

struct RaiseAttention : OpInterfaceRewritePattern<linalg::LinalgOp> {
  using OpInterfaceRewritePattern::OpInterfaceRewritePattern;

  LogicalResult matchAndRewrite(linalg::LinalgOp op,
                                PatternRewriter &rewriter) const override {
    if (!isa<linalg::BatchMatmulOp, linalg::GenericOp>(op.getOperation()) ||
        op->getNumResults() != 1)
      return failure();
    Value oValue = op->getResult(0);
    std::optional<Contraction> pv = matchContraction(oValue, false);
    if (!pv)
      return failure();
    Value scores = matchSoftmax(pv->lhs);
    if (!scores)
      return rewriter.notifyMatchFailure(
          op, "P is not a softmax over the keys (linalg.softmax or "
              "max/sub/exp/sum/div)");
    // Scale and causal mask, in either order.
    bool causal = false;
    double scale = 1.0;
    bool scaled = false;
    for (int step = 0; step < 2; ++step) {
      auto g = scores.getDefiningOp<linalg::GenericOp>();
      if (!g)
        break;
      Value in;
      if (!causal && matchCausalMask(g, in)) {
        causal = true;
        scores = in;
      } else if (!scaled) {
        std::optional<double> s = matchScale(g, in);
        if (!s)
          break;
        scale = *s;
        scaled = true;
        scores = in;
      }
    }
    std::optional<Contraction> qk = matchContraction(scores, true);
    if (!qk || qk->rank != pv->rank)
      return rewriter.notifyMatchFailure(op, "scores are not Q K^T");
    float scale32 = static_cast<float>(scale);
    if (!(scale32 > 0.0f) || !std::isfinite(scale32))
      return rewriter.notifyMatchFailure(op,
                                         "scale is not a positive finite f32");
    // Grouped-query layouts: K and V read with the same head grouping,
    // stated in the contraction maps or materialised by a head repeat.
    KVOperand k = qk->rhs, v = pv->rhs;
    if (k.group == 1 && v.group == 1 && qk->rank == 4) {
      KVOperand k2 = undoHeadRepeat(k.value), v2 = undoHeadRepeat(v.value);
      if (k2.group == v2.group) {
        k = k2;
        v = v2;
      }
    }
    if (k.group != v.group)
      return rewriter.notifyMatchFailure(op, "K and V group heads differently");
    Value q = qk->lhs;
    auto qType = cast<RankedTensorType>(q.getType());
    auto kType = cast<RankedTensorType>(k.value.getType());
    auto vType = cast<RankedTensorType>(v.value.getType());
    auto oType = cast<RankedTensorType>(oValue.getType());
    Type elt = qType.getElementType();
    if (!elt.isF16() && !elt.isBF16() && !elt.isF32())
      return rewriter.notifyMatchFailure(op, "unsupported element type");
    int64_t r = qk->rank;
    if (kType.getElementType() != elt || vType.getElementType() != elt ||
        oType.getElementType() != elt || qType.isDynamicDim(r - 1) ||
        vType.isDynamicDim(r - 1))
      return rewriter.notifyMatchFailure(op, "types or head dims do not fit");
    if (r == 4 && k.group > 1 &&
        (qType.isDynamicDim(1) || kType.isDynamicDim(1) ||
         kType.getDimSize(1) * k.group != qType.getDimSize(1) ||
         vType.getDimSize(1) != kType.getDimSize(1)))
      return rewriter.notifyMatchFailure(op, "head grouping does not divide");

    Location loc = op.getLoc();
    // [BH, N, D] -> [1, BH, N, D]; 4-D operands go in as they are.
    SmallVector<ReassociationIndices> reassociation = {{0, 1}, {2}, {3}};
    auto to4d = [&](Value t) -> Value {
      if (r == 4)
        return t;
      auto type = cast<RankedTensorType>(t.getType());
      SmallVector<int64_t> shape = {1};
      llvm::append_range(shape, type.getShape());
      return tensor::ExpandShapeOp::create(
          rewriter, loc, RankedTensorType::get(shape, type.getElementType()), t,
          reassociation);
    };
    SmallVector<int64_t> oShape;
    if (r == 3)
      oShape.push_back(1);
    llvm::append_range(oShape, oType.getShape());
    SmallVector<Type> resultTypes = {RankedTensorType::get(oShape, elt)};
    auto attention = AttentionOp::create(
        rewriter, loc, resultTypes, to4d(q), to4d(k.value), to4d(v.value),
        /*outs=*/ValueRange{}, rewriter.getF32FloatAttr(scale32),
        causal ? rewriter.getUnitAttr() : UnitAttr(), IntegerAttr(),
        FloatAttr(), IntegerAttr(), IntegerAttr(), /*bottom_right=*/UnitAttr());
    Value o = attention.getResults()[0];
    if (r == 3)
      o = tensor::CollapseShapeOp::create(rewriter, loc, oType, o,
                                          reassociation);
    rewriter.replaceOp(op, o);
    return success();
  }
};

struct FARaiseAttentionPass
    : fa::impl::FARaiseAttentionBase<FARaiseAttentionPass> {
  void runOnOperation() override {
    RewritePatternSet patterns(&getContext());
    patterns.add<RaiseAttention>(&getContext());
    if (failed(applyPatternsGreedily(getOperation(), std::move(patterns))))
      signalPassFailure();
  }
};

} // namespace
