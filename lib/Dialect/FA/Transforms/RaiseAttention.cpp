//===- RaiseAttention.cpp - linalg attention to fa.attention --------------===//
//
// Front ends (torch-mlir, StableHLO -> linalg, IREE's input dialects) spell
// attention as two contractions around a softmax. Recognising it lets an ML
// compiler hand the whole computation to flash-mlir's loop orders and
// kernels.
//
// The pass starts from every contraction whose left operand is a softmax
// (the candidate P V), walks back through what front ends put around it
// (type conversions, reshapes between [B, H, N, D] and [B*H, N, D],
// transposes, scales, masks) and checks each step for what it computes,
// not only for its op kinds. Elementwise bodies are evaluated symbolically
// (SymbolicBody): a scale is a product of positive constants, a mask
// a conjunction of linear constraints on the query index i and the key
// index j, whether it is spelled as a constant tensor, a select on
// linalg.index comparisons, torch's tril / logical_not / masked_fill chain
// or an additive 0 / -inf tensor; the visible set must be causal, a window
// or both, on the top-left or (a KV cache) the bottom-right diagonal. A
// candidate that does not match is left as it is and gets a remark naming
// the first condition that failed.
//
// This file holds the whole attention's match, the rewrite and the pass;
// RaiseAttention.h declares what the files of one theme each share:
// RaiseHelpers.cpp, RaiseSymbolic.cpp (SymbolicBody and the masks),
// RaiseOperands.cpp (operands and contractions) and RaiseSoftmax.cpp.
//
//===----------------------------------------------------------------------===//

#include "RaiseAttention.h"

#include "fa/Dialect/FA/IR/FAOps.h"
#include "fa/Dialect/FA/IR/Validation.h"
#include "fa/Dialect/FA/Transforms/Passes.h"

#include "mlir/Dialect/Linalg/IR/Linalg.h"
#include "mlir/Dialect/Math/IR/Math.h"
#include "mlir/Dialect/Tensor/IR/Tensor.h"
#include "mlir/IR/Matchers.h"
#include "mlir/Transforms/GreedyPatternRewriteDriver.h"
#include "mlir/Transforms/Passes.h"
#include "llvm/ADT/STLExtras.h"
#include "llvm/Support/FormatVariadic.h"

#include <cmath>

namespace mlir::fa {
#define GEN_PASS_DEF_FARAISEATTENTION
#include "fa/Dialect/FA/Transforms/Passes.h.inc"
} // namespace mlir::fa

using namespace mlir;
using namespace mlir::fa;
using namespace mlir::fa::raise;

namespace {

//===----------------------------------------------------------------------===//
// Small helpers
//===----------------------------------------------------------------------===//

Type eltOf(Value v) { return cast<ShapedType>(v.getType()).getElementType(); }

/// Reads a materialised broadcast's input directly: `consumer` (elementwise)
/// reads the broadcast's source through the broadcast's map composed with
/// its own, as torch-mlir spells a row statistic or a scalar operand. The
/// copy is dead once every consumer reads its source.
struct ReadBroadcastSource : OpRewritePattern<linalg::GenericOp> {
  using OpRewritePattern::OpRewritePattern;
  LogicalResult matchAndRewrite(linalg::GenericOp consumer,
                                PatternRewriter &rewriter) const override {
    if (!isElementwise(consumer))
      return failure();
    for (OpOperand *in : consumer.getDpsInputOperands()) {
      auto copy = in->get().getDefiningOp<linalg::GenericOp>();
      if (!copy || !isMaterialisedBroadcast(copy))
        continue;
      // The copy's loops are its result's dims (identity output map), so
      // the consumer's loop d reads source element broadcast(map(d)).
      AffineMap composed =
          copy.getMatchingIndexingMap(copy.getDpsInputOperand(0))
              .compose(consumer.getMatchingIndexingMap(in));
      SmallVector<AffineMap> maps = consumer.getIndexingMapsArray();
      maps[in->getOperandNumber()] = composed;
      rewriter.modifyOpInPlace(consumer, [&] {
        in->set(copy.getDpsInputOperand(0)->get());
        consumer.setIndexingMapsAttr(rewriter.getAffineMapArrayAttr(maps));
      });
      return success();
    }
    return failure();
  }
};

/// An elementwise generic converting its one input to another float type
/// (arith.extf or arith.truncf and nothing else): what `.float()` /
/// `.to(torch.float16)` become. Returns the input.
Value conversionInput(Value v) {
  auto g = v.getDefiningOp<linalg::GenericOp>();
  if (!isElementwise(g) || g.getNumDpsInputs() != 1 ||
      !g.getMatchingIndexingMap(g.getDpsInputOperand(0)).isIdentity())
    return nullptr;
  Block &body = g.getRegion().front();
  if (body.getOperations().size() != 2)
    return nullptr;
  Operation *cvt = &body.front();
  if (!isa<arith::ExtFOp, arith::TruncFOp>(cvt) ||
      cvt->getOperand(0) != body.getArgument(0) ||
      yielded(g) != cvt->getResult(0))
    return nullptr;
  return g.getDpsInputOperand(0)->get();
}

bool isIdentity(ArrayRef<int64_t> perm) {
  for (auto [k, p] : llvm::enumerate(perm))
    if (int64_t(k) != p)
      return false;
  return true;
}

//===----------------------------------------------------------------------===//
// The whole attention
//===----------------------------------------------------------------------===//

/// A tensor added to the scores: S' = S + factor * bias[map(loops)], which
/// the attention's score_mod region reads from the captured tensor.
struct Bias {
  Value tensor;        // as the elementwise op reads it
  AffineMap map;       // over the op's loops (the scores' dims)
  double factor = 1.0; // the scales between the add and the softmax
  int64_t rank = 0;    // the op's loops: the scores' rank where it adds
  /// A positive constant the same body multiplies the scores by before the
  /// add (x * c + B, x / c + B: a scale and a bias fused in one generic).
  double scoresScale = 1.0;
};

/// A boolean tensor hiding keys: select(M, x, -inf) (visible where M) or
/// masked_fill's select(M, -inf, x) (hidden where M), which the attention's
/// mask_mod region reads from the captured tensor.
struct ArgumentMask {
  Value tensor;         // i1, as the elementwise op reads it
  AffineMap map;        // over the op's loops (the scores' dims)
  bool visibleWhenTrue; // select(M, x, -inf); false: masked_fill
  int64_t rank = 0;     // the op's loops
};

struct Match {
  Operation *root = nullptr; // replaced by the attention's O
  Operand q, k, v;
  Lift lift;    // operands are 3-D [B*H, N, X] to expand to [B, H, N, X]
  Perm outPerm; // O's order in the root (rank 4)
  int64_t rank; // of the softmax: 2, 3 or 4
  double scale = 1.0;
  double softcap = 0.0; // c of c * tanh(s / c); 0: none
  MaskAttrs mask;
  std::optional<Bias> bias;
  std::optional<ArgumentMask> argumentMask;
  Type elt;
};

/// Lifting from a 3-D [B*H, Nq, X] contraction to [B, H, ..]: the (B, H)
/// its left operand was collapsed from.
Lift liftOf(Value lhs3) {
  auto c = lhs3.getDefiningOp<tensor::CollapseShapeOp>();
  SmallVector<ReassociationIndices> to3 = {{0, 1}, {2}, {3}};
  if (!c || rankOf(lhs3) != 3 || c.getReassociationIndices() != to3)
    return {};
  auto src = cast<ShapedType>(c.getSrcType());
  if (src.isDynamicDim(0) || src.isDynamicDim(1))
    return {};
  return {src.getDimSize(0), src.getDimSize(1)};
}

/// Whether `v` is computed from a contraction (Q K^T) through elementwise
/// ops (read as is) and reshapes: which input of an add carries the scores
/// when both evaluate as data (a bias from an argument does not).
bool comesFromContraction(Value v, int depth = 0) {
  Operation *def = v.getDefiningOp();
  if (!def || depth > 16)
    return false;
  if (isa<linalg::MatmulOp, linalg::BatchMatmulOp>(def))
    return true;
  if (auto ex = dyn_cast<tensor::ExpandShapeOp>(def))
    return comesFromContraction(ex.getSrc(), depth + 1);
  auto g = dyn_cast<linalg::GenericOp>(def);
  if (!g)
    return false;
  if (g.getNumReductionLoops() > 0)
    return true;
  return isElementwise(g) &&
         llvm::any_of(g.getDpsInputOperands(), [&](OpOperand *in) {
           return g.getMatchingIndexingMap(in).isIdentity() &&
                  comesFromContraction(in->get(), depth + 1);
         });
}

/// Whether `map`'s results are loops or 0 (broadcast dims): a tensor read
/// at the scores' position.
bool readsAtPosition(AffineMap map) {
  return llvm::all_of(map.getResults(), [](AffineExpr e) {
    auto c = dyn_cast<AffineConstantExpr>(e);
    return isa<AffineDimExpr>(e) || (c && c.getValue() == 0);
  });
}

/// Whether input `s` of the two-input elementwise `g` is the scores `cur`
/// (read as is, computed from Q K^T) and the other input a tensor read at
/// the scores' position that is neither a constant (constant masks are
/// classified as bands) nor computed from Q K^T: what a bias or a boolean
/// mask is added or applied with.
bool isScoresAndOperand(linalg::GenericOp g, Value cur, unsigned s) {
  OpOperand *scoresIn = g.getDpsInputOperand(s);
  OpOperand *other = g.getDpsInputOperand(1 - s);
  return scoresIn->get().getType() == cur.getType() &&
         g.getMatchingIndexingMap(scoresIn).isIdentity() &&
         comesFromContraction(scoresIn->get()) &&
         isa<RankedTensorType>(other->get().getType()) &&
         readsAtPosition(g.getMatchingIndexingMap(other)) &&
         !matchPattern(other->get(), m_Constant()) &&
         !comesFromContraction(other->get());
}

/// `g` adds a tensor to the scores `cur` (torch's `scores + attn_bias`, an
/// ALiBi or relative-position bias, a mask from a function argument):
/// out = cur + bias in either order, the bias possibly extended to the
/// scores' type, read through a map whose results are loops of `g` or 0 (a
/// broadcast dim). Sets `scores` to the scores' input.
std::optional<Bias> matchBiasAdd(linalg::GenericOp g, Value cur,
                                 Value &scores) {
  auto add = dyn_cast_or_null<arith::AddFOp>(yielded(g).getDefiningOp());
  if (g.getNumDpsInputs() != 2 || !add)
    return std::nullopt;
  Block &body = g.getRegion().front();
  // The factor the add reads the scores argument `arg` with: 1 as it is,
  // c for arg * c, 1 / c for arg / c (c a positive constant); none for
  // anything else.
  auto scaleOfScores = [](Value v, Value arg) -> std::optional<double> {
    if (v == arg)
      return 1.0;
    if (auto mul = v.getDefiningOp<arith::MulFOp>();
        mul && (mul.getLhs() == arg || mul.getRhs() == arg)) {
      std::optional<double> c =
          scalarConstant(mul.getLhs() == arg ? mul.getRhs() : mul.getLhs());
      if (c && *c > 0)
        return *c;
    }
    if (auto div = v.getDefiningOp<arith::DivFOp>(); div && div.getLhs() == arg)
      if (std::optional<double> c = scalarConstant(div.getRhs()); c && *c > 0)
        return 1.0 / *c;
    return std::nullopt;
  };
  // The ops that compute (constants, possibly converted, aside): the add,
  // the yield, and at most the bias's conversion and the scores' scale.
  unsigned computing = llvm::count_if(body.getOperations(), [](auto &op) {
    return !isa<arith::ConstantOp>(op) &&
           !(isa<arith::TruncFOp, arith::ExtFOp>(op) &&
             matchPattern(op.getOperand(0), m_Constant()));
  });
  for (unsigned s = 0; s < 2; ++s) {
    if (!isScoresAndOperand(g, cur, s))
      continue;
    OpOperand *biasIn = g.getDpsInputOperand(1 - s);
    Value scoresArg = body.getArgument(s), biasArg = body.getArgument(1 - s);
    for (auto [scoresSide, biasSide] :
         {std::pair(add.getLhs(), add.getRhs()),
          std::pair(add.getRhs(), add.getLhs())}) {
      std::optional<double> scale = scaleOfScores(scoresSide, scoresArg);
      auto ext = biasSide.getDefiningOp<arith::ExtFOp>();
      Value bias = ext ? ext.getIn() : biasSide;
      if (!scale || bias != biasArg ||
          computing != 2u + (ext ? 1u : 0u) + (scoresSide != scoresArg))
        continue;
      scores = g.getDpsInputOperand(s)->get();
      Bias b{biasIn->get(), g.getMatchingIndexingMap(biasIn), 1.0,
             g.getNumLoops()};
      b.scoresScale = *scale;
      return b;
    }
  }
  return std::nullopt;
}

/// `g` hides keys where a boolean tensor says (a padding mask, Hugging
/// Face's attention_mask, a document mask passed in): out = select(M, x,
/// -inf) or torch's masked_fill, select(M, -inf, x), M possibly negated
/// (xori with true), -inf or a value below f16's lowest; M is an i1 tensor.
/// Sets `scores` to the scores' input.
std::optional<ArgumentMask> matchArgumentMask(linalg::GenericOp g, Value cur,
                                              Value &scores) {
  auto select = dyn_cast_or_null<arith::SelectOp>(yielded(g).getDefiningOp());
  if (g.getNumDpsInputs() != 2 || !select)
    return std::nullopt;
  Block &body = g.getRegion().front();
  auto isHidden = [](Value v) {
    std::optional<double> c = scalarConstant(v);
    return c &&
           (*c == -std::numeric_limits<double>::infinity() || *c <= -65504.0);
  };
  for (unsigned s = 0; s < 2; ++s) {
    OpOperand *maskIn = g.getDpsInputOperand(1 - s);
    if (!isScoresAndOperand(g, cur, s) ||
        !cast<RankedTensorType>(maskIn->get().getType())
             .getElementType()
             .isInteger(1))
      continue;
    Value scoresArg = body.getArgument(s), maskArg = body.getArgument(1 - s);
    bool visibleWhenTrue;
    if (select.getTrueValue() == scoresArg && isHidden(select.getFalseValue()))
      visibleWhenTrue = true;
    else if (select.getFalseValue() == scoresArg &&
             isHidden(select.getTrueValue()))
      visibleWhenTrue = false;
    else
      continue;
    Value cond = select.getCondition();
    if (auto x = cond.getDefiningOp<arith::XOrIOp>()) {
      Value other = x.getLhs() == maskArg ? x.getRhs() : x.getLhs();
      IntegerAttr one;
      if (!matchPattern(other, m_Constant(&one)) || !one.getValue().isOne())
        continue;
      cond = maskArg == x.getLhs() || maskArg == x.getRhs() ? maskArg : Value();
      visibleWhenTrue = !visibleWhenTrue;
    }
    // The select, the yield, and at most a negation and a constant.
    if (cond != maskArg || body.getOperations().size() > 4)
      continue;
    scores = g.getDpsInputOperand(s)->get();
    return ArgumentMask{maskIn->get(), g.getMatchingIndexingMap(maskIn),
                        visibleWhenTrue, g.getNumLoops()};
  }
  return std::nullopt;
}

/// From the softmax's input back to Q K^T: elementwise scales and masks
/// (evaluated symbolically), conversions, and the expand_shape from a 3-D
/// batch_matmul's scores to [B, H, Nq, Nk].
LogicalResult matchScores(Value x, Domain domain, Match &m, Band &visible,
                          Lift &lift, Contraction &qk, Why &why) {
  Value cur = x;
  // Walking back from the softmax: the scales seen before a softcap's tanh
  // multiply the cap (outside the tanh), those after it the scores inside.
  double outside = 1.0, inside = 1.0;
  bool capped = false;
  auto finish = [&]() {
    if (!capped) {
      m.scale *= outside;
      return;
    }
    // c * tanh(inside * qk / c) with c = outside * the tanh's factor:
    // fa.attention's softcap c over scale inside * c.
    m.softcap = outside;
    m.scale *= inside * outside;
  };
  for (int step = 0; step < 16; ++step) {
    Operation *def = cur.getDefiningOp();
    if (!def)
      return why("the softmax's input is a function argument, not Q K^T");
    if (auto ex = dyn_cast<tensor::ExpandShapeOp>(def)) {
      SmallVector<ReassociationIndices> to4 = {{0, 1}, {2}, {3}};
      auto type = ex.getResultType();
      if (lift.on() || ex.getReassociationIndices() != to4 ||
          type.isDynamicDim(0) || type.isDynamicDim(1))
        return why("the scores are reshaped other than [B*H, N, N] -> "
                   "[B, H, N, N]");
      lift = {type.getDimSize(0), type.getDimSize(1)};
      cur = ex.getSrc();
      continue;
    }
    auto g = dyn_cast<linalg::GenericOp>(def);
    bool isContraction = isa<linalg::MatmulOp, linalg::BatchMatmulOp>(def) ||
                         (g && g.getNumReductionLoops() > 0);
    if (isContraction) {
      FailureOr<Contraction> c = matchContraction(def, true, why);
      if (failed(c))
        return failure();
      qk = *c;
      finish();
      return success();
    }
    if (!isElementwise(g))
      return why("the scores come from '" + def->getName().getStringRef() +
                 "', not from Q K^T through elementwise ops");
    // Which input carries the scores: the one read as is that evaluates to
    // the data; the others are masks.
    Sym result;
    Value next;
    for (OpOperand *input : g.getDpsInputOperands()) {
      if (!g.getMatchingIndexingMap(input).isIdentity())
        continue;
      if (auto t = dyn_cast<ShapedType>(input->get().getType());
          !t || t.getShape() != cast<ShapedType>(cur.getType()).getShape())
        continue;
      SymbolicBody body(domain);
      Sym s = body.evalGeneric(g, input->getOperandNumber(),
                               scoresEnv(g.getNumLoops()));
      if (s.kind == Sym::Data && comesFromContraction(input->get())) {
        result = s;
        next = input->get();
        break;
      }
      if (result.why.empty())
        result = s;
    }
    if (!next) {
      // Not a scale or mask: an additive bias is one, raised into the
      // attention's score_mod (which applies after the softcap, so a bias
      // inside the cap's tanh is not).
      Value scores;
      if (std::optional<Bias> bias = matchBiasAdd(g, cur, scores)) {
        if (m.bias)
          return why("two bias tensors are added to the scores");
        if (capped)
          return why("a bias tensor is added inside the softcap's tanh "
                     "(score_mod applies after the cap)");
        bias->factor = outside;
        outside *= bias->scoresScale;
        m.bias = bias;
        cur = scores;
        continue;
      }
      if (std::optional<ArgumentMask> mask =
              matchArgumentMask(g, cur, scores)) {
        if (m.argumentMask)
          return why("two boolean masks from tensors hide keys");
        if (capped)
          return why("a mask before the softcap's tanh (hidden scores would "
                     "become -c, not -inf)");
        m.argumentMask = mask;
        cur = scores;
        continue;
      }
      if (result.why.empty())
        return why("an elementwise op on the scores reads no input as is");
      if (StringRef(result.why).starts_with("the mask"))
        return why(result.why);
      return why("between Q K^T and the softmax: " + result.why);
    }
    if (capped && (result.capped || !result.band.empty()))
      return why(result.capped ? "the scores pass through two softcaps"
                               : "a mask before the softcap's tanh (hidden "
                                 "scores would become -c, not -inf)");
    if (capped) {
      inside *= result.scale;
    } else if (result.capped) {
      capped = true;
      outside *= result.scale;
      inside = result.inner;
      if (!(outside > 0.0) || !std::isfinite(outside))
        return why("the softcap's factor is not a positive finite constant");
    } else {
      outside *= result.scale;
    }
    llvm::append_range(visible, result.band);
    cur = next;
  }
  return why("too many ops between Q K^T and the softmax");
}

bool isSupportedElt(Type t) { return t.isF16() || t.isBF16() || t.isF32(); }

/// The static dims of a value as the attention reads it ([.., N, X] in the
/// operand's order).
SmallVector<int64_t> logicalShape(const Operand &o) {
  ArrayRef<int64_t> shape = cast<ShapedType>(o.value.getType()).getShape();
  SmallVector<int64_t> logical;
  for (int64_t d : o.perm)
    logical.push_back(shape[d]);
  return logical;
}

/// Matches attention ending at the contraction `op` (P V).
LogicalResult matchAttention(Operation *op, Match &m, Why &why) {
  FailureOr<Contraction> pv = matchContraction(op, false, why);
  if (failed(pv))
    return failure();
  // P, possibly collapsed from [B, H, Nq, Nk] for a 3-D batch_matmul, and
  // converted to V's type after the softmax.
  Lift pvLift;
  Value p = pv->lhs;
  if (pv->rank == 3)
    if ((pvLift = liftOf(p)).on())
      p = p.getDefiningOp<tensor::CollapseShapeOp>().getSrc();
  while (Value in = conversionInput(p))
    p = in;
  Value tested;
  if (Value softmax = safeSoftmaxInput(p, tested))
    p = softmax;
  FailureOr<Value> x = matchSoftmax(p, why);
  if (failed(x))
    return failure();
  if (tested && tested != *x)
    return why("the safe softmax tests another tensor than it normalises");
  int64_t rank = rankOf(*x);
  auto xType = cast<ShapedType>(x->getType());
  Domain domain{xType.getDimSize(rank - 2), xType.getDimSize(rank - 1)};
  Band visible;
  Lift qkLift;
  Contraction qk;
  if (failed(matchScores(*x, domain, m, visible, qkLift, qk, why)))
    return failure();
  m.rank = rank;
  // Both contractions must see the softmax's [B, H] (or its rank).
  if (rank == 4) {
    Lift want{xType.getDimSize(0), xType.getDimSize(1)};
    if ((qk.rank == 3 && !qkLift.on()) || (pv->rank == 3 && !pvLift.on()))
      return why("a 3-D contraction around a 4-D softmax is not a reshape "
                 "of it");
    if ((qkLift.on() && (qkLift.b != want.b || qkLift.h != want.h)) ||
        (pvLift.on() && (pvLift.b != want.b || pvLift.h != want.h)))
      return why("the contractions' [B*H] reshapes do not match the "
                 "softmax's [B, H]");
    if (qk.rank != 3 && qk.rank != 4)
      return why("Q K^T is not of the softmax's rank");
    if (pv->rank != 3 && pv->rank != 4)
      return why("P V is not of the softmax's rank");
  } else if (qk.rank != rank || pv->rank != rank) {
    return why("Q K^T, the softmax and P V are not of one rank");
  }
  if (qk.group != pv->group)
    return why("K and V group heads differently");

  // Operands.
  double qScale = 1.0, kScale = 1.0, vScale = 1.0;
  m.q = peelOperand(qk.lhs, qk.lhsPerm, /*allowScale=*/true, qkLift, domain,
                    qScale);
  m.k = peelOperand(qk.rhs, qk.rhsPerm, /*allowScale=*/true, qkLift, domain,
                    kScale);
  m.v = peelOperand(pv->rhs, pv->rhsPerm, /*allowScale=*/false, pvLift, domain,
                    vScale);
  m.k.group *= qk.group;
  m.v.group *= pv->group;
  // A head repeat undone on one of K and V only: keep both repeated.
  if (m.k.group != m.v.group) {
    for (Operand *o : {&m.k, &m.v})
      if (o->repeated) {
        o->value = o->repeated;
        o->perm = o->repeatedPerm;
        o->group = 1;
      }
    // The floordiv groups of the maps stay.
    m.k.group = qk.group;
    m.v.group = pv->group;
    if (m.k.group != m.v.group)
      return why("K and V group heads differently");
  }
  m.scale *= qScale * kScale;
  for (Operand *o : {&m.q, &m.k, &m.v})
    if (rankOf(o->value) == 3 && o->perm[0] != 0)
      return why("a 3-D operand is read with its batch dim moved");
  // O written in another order than [B, H, Nq, Dv] (an einsum's
  // "..->bqhd"): the attention's result is transposed back.
  m.outPerm = pv->outPerm;
  if (!isIdentity(m.outPerm) && (pv->rank != 4 || pvLift.on()))
    return why("P V writes O transposed in fewer than 4 dims");
  m.lift = (qkLift.on() || pvLift.on())
               ? Lift{xType.getDimSize(0), xType.getDimSize(1)}
               : Lift{};

  // Mask.
  FailureOr<MaskAttrs> mask = classifyBand(visible, domain, why);
  if (failed(mask))
    return failure();
  m.mask = *mask;
  if (std::optional<std::string> bad = checkScale(m.scale))
    return why("the scale " + formatDouble(m.scale) +
               " is out of range: " + *bad);
  if (m.mask.window)
    if (std::optional<std::string> bad = checkWindow(*m.mask.window))
      return why("the window " + Twine(*m.mask.window) + ": " + *bad);

  // Types: Q, K, V of one element type; accumulation may be wider.
  m.elt = eltOf(m.q.value);
  if (!isSupportedElt(m.elt))
    return why("Q's element type is not f16, bf16 or f32");
  if (eltOf(m.k.value) != m.elt || eltOf(m.v.value) != m.elt)
    return why("Q, K and V do not have one element type");
  if (eltOf(pv->lhs) != m.elt)
    return why("P is not converted to V's element type before P V (the "
               "kernel multiplies P in V's type)");
  auto isWideEnough = [&](Type t) { return t == m.elt || t.isF32(); };
  if (!isWideEnough(eltOf(qk.op->getResult(0))))
    return why("Q K^T accumulates in a type narrower than f32 that is not "
               "Q's");

  // O: the P V result, possibly expanded back to [B, H, Nq, Dv] and
  // converted from an f32 accumulator to the element type.
  Value o = op->getResult(0);
  for (int step = 0; step < 2; ++step) {
    if (!o.hasOneUse())
      break;
    Operation *user = *o.getUsers().begin();
    if (user->getNumResults() != 1)
      break;
    if (auto ex = dyn_cast<tensor::ExpandShapeOp>(user)) {
      SmallVector<ReassociationIndices> to4 = {{0, 1}, {2}, {3}};
      if (pvLift.on() && rankOf(o) == 3 &&
          ex.getReassociationIndices() == to4 &&
          ex.getResultType().getDimSize(0) == m.lift.b &&
          ex.getResultType().getDimSize(1) == m.lift.h) {
        o = ex.getResult();
        continue;
      }
      break;
    }
    if (eltOf(o) != m.elt && conversionInput(user->getResult(0)) == o &&
        eltOf(user->getResult(0)) == m.elt) {
      o = user->getResult(0);
      continue;
    }
    break;
  }
  if (eltOf(o) != m.elt)
    return why("O is kept in " + llvm::formatv("{0}", eltOf(o)).str() +
               ", not converted to the inputs' " +
               llvm::formatv("{0}", m.elt).str() +
               " (fa.attention writes O in its inputs' type)");
  m.root = o.getDefiningOp();

  // Shapes, as the attention will see them.
  auto dimsOf = [&](const Operand &operand) {
    SmallVector<int64_t> s = logicalShape(operand);
    if (rankOf(operand.value) == 4)
      return s;
    if (m.lift.on()) {
      SmallVector<int64_t> r = {m.lift.b, m.lift.h};
      r.append(s.end() - 2, s.end());
      return r;
    }
    SmallVector<int64_t> r(4 - s.size(), 1);
    llvm::append_range(r, s);
    return r;
  };
  SmallVector<int64_t> qs = dimsOf(m.q), ks = dimsOf(m.k), vs = dimsOf(m.v);
  if (ShapedType::isDynamic(qs[3]) || ShapedType::isDynamic(vs[3]))
    return why("the head dims D and Dv are not static");
  if (ks[1] != vs[1])
    return why("K and V have different head counts (" + Twine(ks[1]) + " and " +
               Twine(vs[1]) + ")");
  if (!ShapedType::isDynamic(qs[1]) && !ShapedType::isDynamic(ks[1]) &&
      ks[1] * m.k.group != qs[1])
    return why("K and V's heads, read by groups of " + Twine(m.k.group) +
               " query heads, do not cover Q's " + Twine(qs[1]));
  if (ks[3] != qs[3] || ks[2] != vs[2] || ks[0] != qs[0] || vs[0] != qs[0])
    return why("the operands' shapes do not fit [B, Hq, Nq, D], "
               "[B, Hkv, Nk, D], [B, Hkv, Nk, Dv]");
  return success();
}

/// `o.value` as the attention's [B, H, N, X] operand.
Value materialise(OpBuilder &b, Location loc, const Operand &o,
                  const Match &m) {
  Value v = o.value;
  auto type = cast<RankedTensorType>(v.getType());
  int64_t r = type.getRank();
  Perm perm = o.perm;
  if (r != 4) {
    SmallVector<int64_t> shape;
    SmallVector<ReassociationIndices> reassociation;
    if (r == 3 && m.lift.on()) {
      shape = {m.lift.b, m.lift.h};
      shape.append(type.getShape().begin() + 1, type.getShape().end());
      reassociation = {{0, 1}, {2}, {3}};
    } else if (r == 3) {
      shape = {1};
      llvm::append_range(shape, type.getShape());
      reassociation = {{0, 1}, {2}, {3}};
    } else {
      shape = {1, 1};
      llvm::append_range(shape, type.getShape());
      reassociation = {{0, 1, 2}, {3}};
    }
    v = tensor::ExpandShapeOp::create(
        b, loc, RankedTensorType::get(shape, type.getElementType()), v,
        reassociation);
    // The expanded dims lead; the others keep their order.
    perm = r == 3 ? Perm{0, 1, o.perm[1] + 1, o.perm[2] + 1}
                  : Perm{0, 1, o.perm[0] + 2, o.perm[1] + 2};
  }
  if (!isIdentity(perm)) {
    auto t = cast<RankedTensorType>(v.getType());
    SmallVector<int64_t> shape;
    for (int64_t d : perm)
      shape.push_back(t.getDimSize(d));
    Value init = tensor::EmptyOp::create(b, loc, shape, t.getElementType());
    v = linalg::TransposeOp::create(b, loc, v, init, perm)->getResult(0);
  }
  return v;
}

/// The position a tensor read through `map` from an elementwise op of
/// `rank` loops over the scores has in the attention: each index the
/// (b, h, i, j) of its loop, or 0 (broadcast). Scores of rank 3 are
/// [B * H, N, N] under a 4-D softmax (loop 0 is b * H + h) or [H, N, N]
/// (B = 1); of rank 2, [N, N].
SmallVector<Value> positionIn(OpBuilder &b, Location loc, const Match &m,
                              int64_t rank, AffineMap map, ValueRange bhij) {
  auto loopPosition = [&](unsigned d) -> Value {
    if (rank == 4)
      return bhij[d];
    if (rank == 2)
      return bhij[d + 2];
    if (d > 0)
      return bhij[d + 1];
    if (m.rank != 4)
      return bhij[1];
    Value heads = arith::ConstantIndexOp::create(b, loc, m.lift.h);
    return arith::AddIOp::create(
        b, loc, arith::MulIOp::create(b, loc, bhij[0], heads), bhij[1]);
  };
  SmallVector<Value> indices;
  for (AffineExpr e : map.getResults())
    indices.push_back(isa<AffineDimExpr>(e)
                          ? loopPosition(cast<AffineDimExpr>(e).getPosition())
                          : arith::ConstantIndexOp::create(b, loc, 0));
  return indices;
}

/// The regions of a raised bias and boolean mask, over the attention's
/// captures (the bias, then the mask, where there are both):
///   score_mod: score + factor * bias[position]
///   mask_mod:  mask[position] (negated for masked_fill's hidden-where-true)
void buildModifications(OpBuilder &b, Location loc, AttentionOp attention,
                        const Match &m) {
  Type f32 = b.getF32Type(), index = b.getIndexType();
  SmallVector<Type> captureTypes;
  for (Value captured : attention.getCaptures())
    captureTypes.push_back(captured.getType());
  auto capturedArg = [&](Block *block, Value tensor) -> Value {
    unsigned first = block->getNumArguments() - captureTypes.size();
    for (auto [n, captured] : llvm::enumerate(attention.getCaptures()))
      if (captured == tensor)
        return block->getArgument(first + n);
    return Value();
  };
  OpBuilder::InsertionGuard guard(b);
  if (const std::optional<Bias> &bias = m.bias) {
    SmallVector<Type> args = {f32, index, index, index, index};
    llvm::append_range(args, captureTypes);
    Block *block = b.createBlock(&attention.getScoreMod(), {}, args,
                                 SmallVector<Location>(args.size(), loc));
    Value value = tensor::ExtractOp::create(
        b, loc, capturedArg(block, bias->tensor),
        positionIn(b, loc, m, bias->rank, bias->map,
                   block->getArguments().slice(1, 4)));
    if (value.getType() != f32)
      value = arith::ExtFOp::create(b, loc, f32, value);
    if (bias->factor != 1.0)
      value = arith::MulFOp::create(
          b, loc, value,
          arith::ConstantOp::create(
              b, loc, b.getF32FloatAttr(static_cast<float>(bias->factor))));
    YieldOp::create(b, loc,
                    ValueRange{arith::AddFOp::create(
                        b, loc, block->getArgument(0), value)});
  }
  if (const std::optional<ArgumentMask> &mask = m.argumentMask) {
    SmallVector<Type> args = {index, index, index, index};
    llvm::append_range(args, captureTypes);
    Block *block = b.createBlock(&attention.getMaskMod(), {}, args,
                                 SmallVector<Location>(args.size(), loc));
    Value visible = tensor::ExtractOp::create(
        b, loc, capturedArg(block, mask->tensor),
        positionIn(b, loc, m, mask->rank, mask->map,
                   block->getArguments().take_front(4)));
    if (!mask->visibleWhenTrue)
      visible = arith::XOrIOp::create(
          b, loc, visible, arith::ConstantIntOp::create(b, loc, 1, 1));
    YieldOp::create(b, loc, ValueRange{visible});
  }
}

void raise(RewriterBase &rewriter, const Match &m) {
  Operation *root = m.root;
  rewriter.setInsertionPoint(root);
  Location loc = root->getLoc();
  Value q = materialise(rewriter, loc, m.q, m);
  Value k = materialise(rewriter, loc, m.k, m);
  Value v = materialise(rewriter, loc, m.v, m);
  auto qType = cast<RankedTensorType>(q.getType());
  auto vType = cast<RankedTensorType>(v.getType());
  auto oType = RankedTensorType::get({qType.getDimSize(0), qType.getDimSize(1),
                                      qType.getDimSize(2), vType.getDimSize(3)},
                                     m.elt);
  SmallVector<Value> captures;
  if (m.bias)
    captures.push_back(m.bias->tensor);
  if (m.argumentMask && !llvm::is_contained(captures, m.argumentMask->tensor))
    captures.push_back(m.argumentMask->tensor);
  auto attention = AttentionOp::create(
      rewriter, loc, TypeRange{oType}, q, k, v, ValueRange{}, ValueRange{},
      Value(), Value(), Value(), Value(), /*sinks=*/Value(), captures,
      ArrayRef<NamedAttribute>{});
  buildModifications(rewriter, loc, attention, m);
  attention.setScaleAttr(rewriter.getF32FloatAttr(static_cast<float>(m.scale)));
  if (m.mask.causal)
    attention.setCausal(true);
  if (m.mask.window)
    attention.setWindowAttr(rewriter.getI64IntegerAttr(*m.mask.window));
  if (m.mask.bottomRight)
    attention.setBottomRight(true);
  if (m.softcap > 0)
    attention.setSoftcapAttr(
        rewriter.getF32FloatAttr(static_cast<float>(m.softcap)));
  Value o = attention.getResults()[0];
  if (!isIdentity(m.outPerm)) {
    // Root dim outPerm[k] holds logical dim k.
    Perm toRoot(4);
    for (auto [k, d] : llvm::enumerate(m.outPerm))
      toRoot[d] = k;
    auto t = cast<RankedTensorType>(o.getType());
    SmallVector<int64_t> shape;
    for (int64_t d : toRoot)
      shape.push_back(t.getDimSize(d));
    Value init = tensor::EmptyOp::create(rewriter, loc, shape, m.elt);
    o = linalg::TransposeOp::create(rewriter, loc, o, init, toRoot)
            ->getResult(0);
  }
  auto rootType = cast<RankedTensorType>(root->getResult(0).getType());
  if (rootType.getRank() == 3)
    o = tensor::CollapseShapeOp::create(
        rewriter, loc, rootType, o,
        SmallVector<ReassociationIndices>{{0, 1}, {2}, {3}});
  else if (rootType.getRank() == 2)
    o = tensor::CollapseShapeOp::create(
        rewriter, loc, rootType, o,
        SmallVector<ReassociationIndices>{{0, 1, 2}, {3}});
  rewriter.replaceOp(root, o);
}

/// A contraction whose left operand is a softmax: a candidate P V.
bool isCandidate(Operation *op) {
  auto linalgOp = dyn_cast<linalg::LinalgOp>(op);
  if (!linalgOp || op->getNumResults() != 1 ||
      !isa<linalg::MatmulOp, linalg::BatchMatmulOp, linalg::GenericOp>(op) ||
      linalgOp.getNumDpsInputs() != 2 || linalgOp.getNumReductionLoops() == 0 ||
      !linalgOp.hasPureTensorSemantics())
    return false;
  return looksLikeSoftmax(linalgOp.getDpsInputOperand(0)->get());
}

struct FARaiseAttentionPass
    : fa::impl::FARaiseAttentionBase<FARaiseAttentionPass> {
  using FARaiseAttentionBase::FARaiseAttentionBase;

  SmallVector<Operation *> collectCandidates() {
    SmallVector<Operation *> candidates;
    getOperation().walk([&](Operation *op) {
      if (isCandidate(op))
        candidates.push_back(op);
    });
    return candidates;
  }

  void runOnOperation() override {
    SmallVector<Operation *> candidates = collectCandidates();
    if (candidates.empty())
      return;
    // Every candidate as written gets a remark or is raised, also one that
    // the cleanup below turns into something no longer softmax-like.
    SmallVector<Location> written;
    for (Operation *op : candidates)
      written.push_back(op->getLoc());
    llvm::SmallDenseSet<Location> answered;
    if (canonicalize) {
      // Fold what front ends wrap the pattern in (torch-mlir's alpha
      // multiplies by a converted 1, a scale computed from constants,
      // StableHLO's materialised broadcasts) before matching: the scalar
      // (arith, math) canonicalisations and folds, the broadcasts read
      // through, then CSE. Not linalg's own canonicalisations, which infer
      // static shapes from constants and would change what the remarks
      // say of a candidate. Functions without candidates are untouched.
      MLIRContext *ctx = &getContext();
      RewritePatternSet scalar(ctx);
      for (Dialect *dialect :
           {ctx->getLoadedDialect("arith"), ctx->getLoadedDialect("math")})
        if (dialect)
          dialect->getCanonicalizationPatterns(scalar);
      for (RegisteredOperationName name : ctx->getRegisteredOperations())
        if (name.getDialectNamespace() == "arith" ||
            name.getDialectNamespace() == "math")
          name.getCanonicalizationPatterns(scalar, ctx);
      // StableHLO's materialised broadcasts read as the row statistics and
      // scalars they copy.
      scalar.add<ReadBroadcastSource>(ctx);
      if (failed(applyPatternsGreedily(getOperation(), std::move(scalar))))
        return signalPassFailure();
      OpPassManager cse(func::FuncOp::getOperationName());
      cse.addPass(createCSEPass());
      if (failed(runPipeline(cse, getOperation())))
        return signalPassFailure();
      candidates = collectCandidates();
    }
    IRRewriter rewriter(&getContext());
    bool raised = false;
    for (Operation *op : candidates) {
      Match m;
      Why why;
      answered.insert(op->getLoc());
      if (failed(matchAttention(op, m, why))) {
        op->emitRemark("not raised: ") << why.text;
        continue;
      }
      raise(rewriter, m);
      raised = true;
    }
    for (Location loc : written)
      if (!answered.contains(loc))
        emitRemark(loc, "not raised: P is not a softmax over the keys "
                        "(linalg.softmax or max/sub/exp/sum/div over the "
                        "last dim) once canonicalised");
    if (!raised)
      return;
    // Erase what the attentions replaced (now dead).
    if (failed(applyPatternsGreedily(getOperation(),
                                     RewritePatternSet(&getContext()))))
      signalPassFailure();
  }
};

} // namespace
