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
// (SymbolicBody below): a scale is a product of positive constants, a mask
// a conjunction of linear constraints on the query index i and the key
// index j, whether it is spelled as a constant tensor, a select on
// linalg.index comparisons, torch's tril / logical_not / masked_fill chain
// or an additive 0 / -inf tensor; the visible set must be causal, a window
// or both, on the top-left or (a KV cache) the bottom-right diagonal. A
// candidate that does not match is left as it is and gets a remark naming
// the first condition that failed.
//
//===----------------------------------------------------------------------===//

#include "fa/Dialect/FA/IR/FAOps.h"
#include "fa/Dialect/FA/IR/Validation.h"
#include "fa/Dialect/FA/Transforms/Passes.h"

#include "mlir/Transforms/Passes.h"
#include "mlir/Dialect/Linalg/IR/Linalg.h"
#include "mlir/Dialect/Math/IR/Math.h"
#include "mlir/Dialect/Tensor/IR/Tensor.h"
#include "mlir/IR/Matchers.h"
#include "mlir/Transforms/GreedyPatternRewriteDriver.h"
#include "llvm/ADT/STLExtras.h"
#include "llvm/Support/FormatVariadic.h"

#include <cmath>
#include <numeric>

namespace mlir::fa {
#define GEN_PASS_DEF_FARAISEATTENTION
#include "fa/Dialect/FA/Transforms/Passes.h.inc"
} // namespace mlir::fa

using namespace mlir;
using namespace mlir::fa;

namespace {

//===----------------------------------------------------------------------===//
// Small helpers
//===----------------------------------------------------------------------===//

/// Why a candidate was not raised: the first condition that failed.
struct Why {
  std::string text;
  LogicalResult operator()(const Twine &reason) {
    if (text.empty())
      text = reason.str();
    return failure();
  }
};

int64_t rankOf(Value v) { return cast<ShapedType>(v.getType()).getRank(); }
Type eltOf(Value v) { return cast<ShapedType>(v.getType()).getElementType(); }

/// What a generic's body yields (its first yielded value).
Value yielded(linalg::GenericOp g) {
  return cast<linalg::YieldOp>(g.getRegion().front().getTerminator())
      .getOperand(0);
}

/// A scalar constant, possibly converted (torch-mlir materialises an f64
/// scalar and truncates it to the element type inside the body). The value
/// is the source constant's: the scale the front end meant.
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

/// Whether `init` (a contraction's or a sum's accumulator) starts at zero:
/// linalg.fill of a zero constant, or a zero constant tensor. Anything else
/// (a bias added to the scores, a "softmax plus one" denominator) is not
/// attention and must not be raised.
bool isZeroInit(Value init) {
  auto isZero = [](Attribute a) {
    if (auto f = dyn_cast_or_null<FloatAttr>(a))
      return f.getValue().isZero();
    if (auto d = dyn_cast_or_null<DenseElementsAttr>(a))
      return d.isSplat() && isa<FloatType>(d.getElementType()) &&
             d.getSplatValue<APFloat>().isZero();
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

/// An all-parallel linalg.generic with one input-or-more, one init, one
/// result and an identity output map: an elementwise op over its result.
bool isElementwise(linalg::GenericOp g) {
  return g && g.getNumDpsInits() == 1 && g->getNumResults() == 1 &&
         g.getNumParallelLoops() == g.getNumLoops() &&
         g.getMatchingIndexingMap(g.getDpsInitOperand(0)).isIdentity() &&
         g.hasPureTensorSemantics();
}

/// A broadcast materialised as a copy (StableHLO's broadcast_in_dim after
/// stablehlo-legalize-to-linalg): one input read through a map that drops
/// dims or pins them to 0, written through an identity map, the body
/// yielding the input as it is.
bool isMaterialisedBroadcast(linalg::GenericOp g) {
  if (!isElementwise(g) || g.getNumDpsInputs() != 1)
    return false;
  Block &body = g.getRegion().front();
  AffineMap in = g.getMatchingIndexingMap(g.getDpsInputOperand(0));
  return body.getOperations().size() == 1 && yielded(g) == body.getArgument(0) &&
         in.isProjectedPermutation(/*allowZeroInResults=*/true) &&
         !in.isPermutation();
}

/// [.., N] reshaped to [.., N, 1] (a row statistic given back its reduced
/// dim, as jnp's keepdims=True does): returns the [.., N] tensor, or
/// nullptr.
Value throughTrailingUnitExpand(Value v) {
  auto expand = v.getDefiningOp<tensor::ExpandShapeOp>();
  if (!expand)
    return nullptr;
  ArrayRef<int64_t> shape = expand.getResultType().getShape();
  int64_t rank = shape.size();
  if (rank < 2 || shape.back() != 1 || expand.getSrcType().getRank() != rank - 1)
    return nullptr;
  SmallVector<ReassociationIndices> groups =
      expand.getReassociationIndices();
  return groups.back() == ReassociationIndices{rank - 2, rank - 1}
             ? expand.getSrc()
             : nullptr;
}

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

//===----------------------------------------------------------------------===//
// Symbolic evaluation of elementwise bodies
//===----------------------------------------------------------------------===//

/// ci * i + cj * j + c over the query index i and the key index j (the last
/// two dims of the scores). As a constraint it means `ci*i + cj*j + c <= 0`.
struct Lin {
  int64_t ci = 0, cj = 0, c = 0;
  Lin operator+(const Lin &o) const { return {ci + o.ci, cj + o.cj, c + o.c}; }
  Lin operator-(const Lin &o) const { return {ci - o.ci, cj - o.cj, c - o.c}; }
  Lin scaled(int64_t k) const { return {ci * k, cj * k, c * k}; }
  bool isConstant() const { return ci == 0 && cj == 0; }
  bool operator==(const Lin &o) const {
    return ci == o.ci && cj == o.cj && c == o.c;
  }
};

/// A conjunction of `lin <= 0`: where a boolean mask holds. Empty: true.
using Band = SmallVector<Lin, 2>;

Band falseBand() { return Band{Lin{0, 0, 1}}; }

/// not(lin <= 0) is lin >= 1, i.e. -lin + 1 <= 0; only a single constraint
/// has a band as its complement.
std::optional<Band> negate(const Band &band) {
  if (band.empty())
    return falseBand();
  if (band.size() != 1)
    return std::nullopt;
  Lin l = band[0].scaled(-1);
  l.c += 1;
  return Band{l};
}

/// Values below f16's lowest finite value act as -inf in a softmax: the
/// masks front ends build from `torch.finfo(dtype).min` (-65504 in f16,
/// -3.4e38 in f32) give exp(s - m) = 0 exactly, as -inf does, for any
/// score below 6e4 in magnitude.
bool isMaskedValue(double v) {
  return v == -std::numeric_limits<double>::infinity() || v <= -65504.0;
}

/// What a scalar in an elementwise body is, as a function of (i, j) and of
/// the data it is applied to.
struct Sym {
  enum Kind { Unknown, Float, Int, Pred, Select, Data } kind = Unknown;
  double value = 0, other = 0; // Float: value; Select: pred ? value : other
  Lin lin;                     // Int: an integer linear in i and j
  Band band;                   // Pred, Select: where it holds; Data: visible
  double scale = 1;            // Data: scale * data
  // Data through a softcap's tanh: scale * tanh(inner * data) (`scale` is
  // then the cap c and inner * c the attention's scale).
  bool capped = false;
  double inner = 1;
  std::string why;             // Unknown: why

  static Sym unknown(const Twine &why) {
    Sym s;
    s.why = why.str();
    return s;
  }
  static Sym floating(double v) {
    Sym s;
    s.kind = Float;
    s.value = v;
    return s;
  }
  static Sym integer(Lin l) {
    Sym s;
    s.kind = Int;
    s.lin = l;
    return s;
  }
  static Sym pred(Band b) {
    Sym s;
    s.kind = Pred;
    s.band = std::move(b);
    return s;
  }
  static Sym select(Band b, double a, double o) {
    if (std::isnan(a) || std::isnan(o))
      return unknown("a mask value is NaN");
    Sym s;
    s.kind = Select;
    s.band = std::move(b);
    s.value = a;
    s.other = o;
    return s;
  }
  static Sym data() {
    Sym s;
    s.kind = Data;
    return s;
  }
  bool isTrue() const { return kind == Pred && band.empty(); }
  bool isFalse() const {
    return kind == Pred && band.size() == 1 && band[0].isConstant() &&
           band[0].c > 0;
  }
};

/// The index each loop dim of a generic stands for: a linear function of
/// (i, j), or std::nullopt for the batch and head dims.
using Env = SmallVector<std::optional<Lin>>;

/// The extent of the scores' last two dims, over which masks are compared.
struct Domain {
  int64_t ni = ShapedType::kDynamic, nj = ShapedType::kDynamic;
  bool isStatic() const {
    return !ShapedType::isDynamic(ni) && !ShapedType::isDynamic(nj);
  }
};

/// Evaluates elementwise bodies and the tensors they read (masks) at a
/// symbolic position (i, j).
class SymbolicBody {
public:
  explicit SymbolicBody(Domain domain) : domain(domain) {}

  /// `g`'s yielded value, with input `dataInput` standing for the data (the
  /// scores, Q or K) and every other input evaluated as a mask tensor.
  Sym evalGeneric(linalg::GenericOp g, std::optional<unsigned> dataInput,
                  const Env &loops, int depth = 0);

  /// Tensor `t` at the position whose dims are `dims`.
  Sym evalTensor(Value t, const Env &dims, int depth);

  /// `band` without the constraints that hold on the whole domain.
  Band simplified(const Band &band) const;
  /// Where `band` does not hold, if that is a band.
  std::optional<Band> negated(const Band &band) const {
    return negate(simplified(band));
  }

private:
  Sym outsideValue(Value v, const Env &loops);
  Sym evalOp(Operation *op, ArrayRef<Sym> in, const Env &loops);
  Sym classifyDense(DenseElementsAttr dense, const Env &dims);
  Domain domain;
};

/// The position of a tensor read through `map` from a generic at `loops`.
std::optional<Env> compose(AffineMap map, const Env &loops) {
  Env dims;
  for (AffineExpr e : map.getResults()) {
    if (auto d = dyn_cast<AffineDimExpr>(e)) {
      dims.push_back(loops[d.getPosition()]);
      continue;
    }
    if (auto c = dyn_cast<AffineConstantExpr>(e)) {
      dims.push_back(Lin{0, 0, c.getValue()});
      continue;
    }
    // d + c (a shifted read).
    auto bin = dyn_cast<AffineBinaryOpExpr>(e);
    if (bin && bin.getKind() == AffineExprKind::Add) {
      auto d = dyn_cast<AffineDimExpr>(bin.getLHS());
      auto c = dyn_cast<AffineConstantExpr>(bin.getRHS());
      if (d && c) {
        std::optional<Lin> l = loops[d.getPosition()];
        if (l)
          l->c += c.getValue();
        dims.push_back(l);
        continue;
      }
    }
    return std::nullopt;
  }
  return dims;
}

/// Whether `l <= 0` holds on the whole domain (its maximum over the
/// corners is at most 0).
bool holdsEverywhere(const Lin &l, Domain domain) {
  if (!domain.isStatic())
    return l.isConstant() && l.c <= 0;
  int64_t maxV = l.c + std::max<int64_t>(0, l.ci * (domain.ni - 1)) +
                 std::max<int64_t>(0, l.cj * (domain.nj - 1));
  return maxV <= 0;
}

Band SymbolicBody::simplified(const Band &band) const {
  Band kept;
  for (const Lin &l : band)
    if (!holdsEverywhere(l, domain))
      kept.push_back(l);
  return kept;
}

Sym SymbolicBody::evalGeneric(linalg::GenericOp g,
                              std::optional<unsigned> dataInput,
                              const Env &loops, int depth) {
  Block &body = g.getRegion().front();
  DenseMap<Value, Sym> values;
  for (OpOperand *input : g.getDpsInputOperands()) {
    unsigned n = input->getOperandNumber();
    BlockArgument arg = body.getArgument(n);
    if (dataInput && n == *dataInput) {
      values[arg] = Sym::data();
      continue;
    }
    std::optional<Env> dims =
        compose(g.getMatchingIndexingMap(input), loops);
    values[arg] =
        dims ? evalTensor(input->get(), *dims, depth + 1)
             : Sym::unknown("a mask is read through a map that is not a "
                            "permutation, a broadcast or a shift");
  }
  for (BlockArgument arg : body.getArguments().drop_front(g.getNumDpsInputs()))
    values[arg] = Sym::unknown("the body reads its output");
  for (Operation &op : body.without_terminator()) {
    SmallVector<Sym> in;
    for (Value operand : op.getOperands()) {
      auto it = values.find(operand);
      // A value from outside the body: a captured constant.
      if (it == values.end()) {
        in.push_back(outsideValue(operand, loops));
      } else {
        in.push_back(it->second);
      }
    }
    if (op.getNumResults() != 1)
      return Sym::unknown("'" + op.getName().getStringRef() +
                          "' in an elementwise body");
    values[op.getResult(0)] = evalOp(&op, in, loops);
  }
  auto it = values.find(yielded(g));
  if (it == values.end())
    return outsideValue(yielded(g), loops);
  return it->second;
}

Sym SymbolicBody::outsideValue(Value v, const Env &loops) {
  if (std::optional<double> f = scalarConstant(v))
    return Sym::floating(*f);
  if (v.getDefiningOp() && matchPattern(v, m_Constant()))
    return evalOp(v.getDefiningOp(), {}, loops);
  return Sym::unknown("the body reads a value defined outside it that is "
                      "not a constant");
}

/// Normalises `lhs <= rhs`-style comparisons of two integers to a band.
std::optional<Band> compare(arith::CmpIPredicate p, const Lin &a,
                            const Lin &b) {
  using P = arith::CmpIPredicate;
  // Unsigned compares agree with signed ones on non-negative values: the
  // indices, and sums of them with non-negative constants.
  auto nonNegative = [](const Lin &l) {
    return l.ci >= 0 && l.cj >= 0 && l.c >= 0;
  };
  switch (p) {
  case P::ult:
  case P::ule:
  case P::ugt:
  case P::uge:
    if (!nonNegative(a) || !nonNegative(b))
      return std::nullopt;
    break;
  default:
    break;
  }
  switch (p) {
  case P::slt:
  case P::ult: { // a - b + 1 <= 0
    Lin l = a - b;
    l.c += 1;
    return Band{l};
  }
  case P::sle:
  case P::ule:
    return Band{a - b};
  case P::sgt:
  case P::ugt: {
    Lin l = b - a;
    l.c += 1;
    return Band{l};
  }
  case P::sge:
  case P::uge:
    return Band{b - a};
  default:
    return std::nullopt;
  }
}

Sym SymbolicBody::evalOp(Operation *op, ArrayRef<Sym> in, const Env &loops) {
  for (const Sym &s : in)
    if (s.kind == Sym::Unknown)
      return s;
  auto opName = [&]() { return op->getName().getStringRef(); };
  // Constants.
  if (auto cst = dyn_cast<arith::ConstantOp>(op)) {
    if (auto f = dyn_cast<FloatAttr>(cst.getValue()))
      return Sym::floating(f.getValueAsDouble());
    if (auto i = dyn_cast<IntegerAttr>(cst.getValue())) {
      if (i.getType().isInteger(1))
        return i.getValue().isZero() ? Sym::pred(falseBand()) : Sym::pred({});
      return Sym::integer(Lin{0, 0, i.getValue().getSExtValue()});
    }
    return Sym::unknown("a constant that is not a scalar");
  }
  if (auto index = dyn_cast<linalg::IndexOp>(op)) {
    if (index.getDim() >= loops.size() || !loops[index.getDim()])
      return Sym::unknown("the mask depends on the batch or head index");
    return Sym::integer(*loops[index.getDim()]);
  }
  // Integer arithmetic on positions.
  if (isa<arith::IndexCastOp, arith::IndexCastUIOp, arith::ExtSIOp,
          arith::ExtUIOp, arith::TruncIOp>(op)) {
    if (in[0].kind == Sym::Int && !op->getOperand(0).getType().isInteger(1))
      return in[0];
    if (in[0].kind == Sym::Pred && isa<arith::ExtUIOp>(op))
      return Sym::unknown("a boolean widened to an integer");
    return Sym::unknown("'" + opName() + "' on a non-integer");
  }
  if (isa<arith::AddIOp, arith::SubIOp>(op)) {
    if (in[0].kind != Sym::Int || in[1].kind != Sym::Int)
      return Sym::unknown("'" + opName() + "' on booleans");
    return Sym::integer(isa<arith::AddIOp>(op) ? in[0].lin + in[1].lin
                                               : in[0].lin - in[1].lin);
  }
  if (isa<arith::MulIOp>(op)) {
    if (in[0].kind == Sym::Int && in[1].kind == Sym::Int) {
      if (in[1].lin.isConstant())
        return Sym::integer(in[0].lin.scaled(in[1].lin.c));
      if (in[0].lin.isConstant())
        return Sym::integer(in[1].lin.scaled(in[0].lin.c));
    }
    return Sym::unknown("a product of positions");
  }
  if (auto cmp = dyn_cast<arith::CmpIOp>(op)) {
    if (in[0].kind == Sym::Int && in[1].kind == Sym::Int) {
      if (std::optional<Band> b =
              compare(cmp.getPredicate(), in[0].lin, in[1].lin))
        return Sym::pred(*b);
      return Sym::unknown("a position comparison that is not <, <=, >, >= "
                          "(or unsigned on a difference)");
    }
    // b == false, b != false, b == true, b != true on booleans.
    if (in[0].kind == Sym::Pred && in[1].kind == Sym::Pred &&
        (in[1].isTrue() || in[1].isFalse()) &&
        (cmp.getPredicate() == arith::CmpIPredicate::eq ||
         cmp.getPredicate() == arith::CmpIPredicate::ne)) {
      bool same = (cmp.getPredicate() == arith::CmpIPredicate::eq) ==
                  in[1].isTrue();
      if (same)
        return in[0];
      if (std::optional<Band> n = negated(in[0].band))
        return Sym::pred(*n);
      return Sym::unknown("the complement of a band mask");
    }
    return Sym::unknown("an integer comparison of non-positions");
  }
  // Float comparisons of two-valued masks with constants: torch's
  // `bias == 0` on a 0/1 tril buffer.
  if (auto cmp = dyn_cast<arith::CmpFOp>(op)) {
    auto holds = [&](double x, double y) -> std::optional<bool> {
      using P = arith::CmpFPredicate;
      switch (cmp.getPredicate()) {
      case P::OEQ:
      case P::UEQ:
        return x == y;
      case P::ONE:
      case P::UNE:
        return x != y;
      case P::OLT:
      case P::ULT:
        return x < y;
      case P::OLE:
      case P::ULE:
        return x <= y;
      case P::OGT:
      case P::UGT:
        return x > y;
      case P::OGE:
      case P::UGE:
        return x >= y;
      default:
        return std::nullopt;
      }
    };
    const Sym &a = in[0], &b = in[1];
    auto constant = [](bool t) {
      return t ? Sym::pred({}) : Sym::pred(falseBand());
    };
    if (a.kind == Sym::Float && b.kind == Sym::Float) {
      if (std::optional<bool> t = holds(a.value, b.value))
        return constant(*t);
    } else if ((a.kind == Sym::Select && b.kind == Sym::Float) ||
               (a.kind == Sym::Float && b.kind == Sym::Select)) {
      const Sym &sel = a.kind == Sym::Select ? a : b;
      auto at = [&](double x) {
        return a.kind == Sym::Select ? holds(x, b.value) : holds(a.value, x);
      };
      std::optional<bool> inBand = at(sel.value), outside = at(sel.other);
      if (inBand && outside) {
        if (*inBand == *outside)
          return constant(*inBand);
        if (*inBand)
          return Sym::pred(sel.band);
        if (std::optional<Band> n = negated(sel.band))
          return Sym::pred(*n);
        return Sym::unknown("the complement of a band mask");
      }
    }
    return Sym::unknown("a float comparison that is not of a mask with a "
                        "constant");
  }
  if (isa<arith::XOrIOp>(op)) {
    if (in[0].kind == Sym::Pred && in[1].kind == Sym::Pred) {
      const Sym &b = in[1].isTrue() || in[1].isFalse() ? in[0] : in[1];
      const Sym &k = in[1].isTrue() || in[1].isFalse() ? in[1] : in[0];
      if (k.isFalse())
        return b;
      if (k.isTrue()) {
        if (std::optional<Band> n = negated(b.band))
          return Sym::pred(*n);
        return Sym::unknown("the complement of a band mask");
      }
    }
    return Sym::unknown("an xor that is not a logical not");
  }
  if (isa<arith::AndIOp>(op)) {
    if (in[0].kind == Sym::Pred && in[1].kind == Sym::Pred) {
      Band b = in[0].band;
      llvm::append_range(b, in[1].band);
      return Sym::pred(b);
    }
    return Sym::unknown("an and of non-booleans");
  }
  if (isa<arith::OrIOp>(op)) {
    if (in[0].kind == Sym::Pred && in[1].kind == Sym::Pred) {
      if (in[0].isFalse() || in[1].isTrue())
        return in[1];
      if (in[1].isFalse() || in[0].isTrue())
        return in[0];
    }
    return Sym::unknown("an or of two masks");
  }
  if (auto sel = dyn_cast<arith::SelectOp>(op)) {
    const Sym &c = in[0], &a = in[1], &b = in[2];
    if (c.kind != Sym::Pred)
      return Sym::unknown("a select on a non-boolean");
    if (c.isTrue())
      return a;
    if (c.isFalse())
      return b;
    std::optional<Band> notC = negated(c.band);
    auto both = [](Band x, const Band &y) {
      llvm::append_range(x, y);
      return x;
    };
    // Booleans: select(c, a, b) = (c and a) or (not c and b).
    if (a.kind == Sym::Pred && b.kind == Sym::Pred) {
      if (b.isFalse())
        return Sym::pred(both(c.band, a.band));
      if (a.isFalse() && notC)
        return Sym::pred(both(*notC, b.band));
      if (a.isTrue() && b.isTrue())
        return a;
      return Sym::unknown("a select of two masks");
    }
    if (a.kind == Sym::Float && b.kind == Sym::Float)
      return Sym::select(c.band, a.value, b.value);
    // The data kept where c holds, a masked value elsewhere (or the
    // other way round).
    if (a.kind == Sym::Data && b.kind == Sym::Float) {
      if (!isMaskedValue(b.value))
        return Sym::unknown("the mask replaces scores by " +
                            formatDouble(b.value) + ", not -inf");
      Sym d = a;
      llvm::append_range(d.band, c.band);
      return d;
    }
    if (b.kind == Sym::Data && a.kind == Sym::Float) {
      if (!isMaskedValue(a.value))
        return Sym::unknown("the mask replaces scores by " +
                            formatDouble(a.value) + ", not -inf");
      if (!notC)
        return Sym::unknown("the mask's complement is not a band");
      Sym d = b;
      llvm::append_range(d.band, *notC);
      return d;
    }
    return Sym::unknown("a select of the scores with a non-constant");
  }
  // Float conversions keep what a value is.
  if (isa<arith::ExtFOp, arith::TruncFOp>(op))
    return in[0];
  // A softcap's tanh (Gemma 2, Grok: c * tanh(s / c)): the scores so far
  // are its argument. A mask before it would map hidden scores to -c, not
  // -inf, so they would not be hidden.
  if (isa<math::TanhOp>(op)) {
    if (in[0].kind != Sym::Data)
      return Sym::unknown("a tanh of a mask");
    if (in[0].capped)
      return Sym::unknown("the scores pass through tanh twice");
    if (!in[0].band.empty())
      return Sym::unknown("a mask before the softcap's tanh (hidden scores "
                          "would become -c, not -inf)");
    Sym r = in[0];
    r.capped = true;
    r.inner = in[0].scale;
    r.scale = 1;
    return r;
  }
  if (isa<arith::UIToFPOp, arith::SIToFPOp>(op)) {
    if (in[0].kind == Sym::Int && in[0].lin.isConstant())
      return Sym::floating(double(in[0].lin.c));
    if (in[0].kind == Sym::Pred) {
      // i1 true is 1 unsigned, -1 signed.
      double t = isa<arith::UIToFPOp>(op) ? 1.0 : -1.0;
      if (in[0].isTrue())
        return Sym::floating(t);
      if (in[0].isFalse())
        return Sym::floating(0.0);
      return Sym::select(in[0].band, t, 0.0);
    }
    return Sym::unknown("a position converted to a float");
  }
  auto binaryConst = [](const Sym &s,
                        llvm::function_ref<double(double)> f) -> Sym {
    if (s.kind == Sym::Float)
      return Sym::floating(f(s.value));
    return Sym::select(s.band, f(s.value), f(s.other));
  };
  if (isa<arith::NegFOp>(op)) {
    if (in[0].kind == Sym::Float || in[0].kind == Sym::Select)
      return binaryConst(in[0], [](double x) { return -x; });
    return Sym::unknown("the scores are negated");
  }
  if (isa<arith::AddFOp, arith::SubFOp, arith::MulFOp, arith::DivFOp>(op)) {
    const Sym &a = in[0], &b = in[1];
    bool isAdd = isa<arith::AddFOp>(op), isSub = isa<arith::SubFOp>(op),
         isMul = isa<arith::MulFOp>(op);
    auto apply = [&](double x, double y) {
      return isAdd ? x + y : isSub ? x - y : isMul ? x * y : x / y;
    };
    auto isConstLike = [](const Sym &s) {
      return s.kind == Sym::Float || s.kind == Sym::Select;
    };
    // Constants and two-valued masks.
    if (a.kind == Sym::Float && b.kind == Sym::Float)
      return Sym::floating(apply(a.value, b.value));
    if (a.kind == Sym::Select && b.kind == Sym::Float)
      return binaryConst(a, [&](double x) { return apply(x, b.value); });
    if (a.kind == Sym::Float && b.kind == Sym::Select)
      return binaryConst(b, [&](double y) { return apply(a.value, y); });
    // Scores scaled by a positive constant.
    if ((isMul && a.kind == Sym::Data && b.kind == Sym::Float) ||
        (isMul && b.kind == Sym::Data && a.kind == Sym::Float) ||
        (isa<arith::DivFOp>(op) && a.kind == Sym::Data &&
         b.kind == Sym::Float)) {
      const Sym &d = a.kind == Sym::Data ? a : b;
      double c = a.kind == Sym::Data ? b.value : a.value;
      if (!(c > 0.0) || !std::isfinite(c))
        return Sym::unknown("the scores are scaled by " + formatDouble(c) +
                            ", not a positive finite constant");
      Sym r = d;
      r.scale = isMul ? d.scale * c : d.scale / c;
      return r;
    }
    // Scores plus a mask of 0 where visible and -inf where hidden.
    if (isAdd && (a.kind == Sym::Data) != (b.kind == Sym::Data) &&
        isConstLike(a.kind == Sym::Data ? b : a)) {
      const Sym &d = a.kind == Sym::Data ? a : b;
      const Sym &m = a.kind == Sym::Data ? b : a;
      if (m.kind == Sym::Float) {
        if (m.value == 0.0)
          return d;
        return Sym::unknown("a constant is added to the scores");
      }
      Sym r = d;
      if (m.value == 0.0 && isMaskedValue(m.other)) {
        llvm::append_range(r.band, m.band);
        return r;
      }
      if (isMaskedValue(m.value) && m.other == 0.0) {
        std::optional<Band> n = negated(m.band);
        if (!n)
          return Sym::unknown("the mask's complement is not a band");
        llvm::append_range(r.band, *n);
        return r;
      }
      return Sym::unknown("the mask adds " + formatDouble(m.value) +
                          " and " + formatDouble(m.other) +
                          ", not 0 where visible and -inf where hidden");
    }
    if (a.kind == Sym::Data || b.kind == Sym::Data)
      return Sym::unknown("'" + opName() + "' of the scores with " +
                          (isAdd ? "a non-constant (a bias?)"
                                 : "a non-constant"));
    return Sym::unknown("'" + opName() + "' of two masks");
  }
  return Sym::unknown("'" + opName() + "' in an elementwise body");
}

/// A constant mask tensor over the domain: a function of j - i only, and
/// an interval of diagonals (a band) for one of its two values.
Sym SymbolicBody::classifyDense(DenseElementsAttr dense, const Env &dims) {
  if (!domain.isStatic())
    return Sym::unknown("the mask is a constant tensor over dynamic sequence "
                        "lengths, not classified");
  auto type = cast<ShapedType>(dense.getType());
  int64_t rank = type.getRank();
  // Which tensor dims run over i and j, and with what offset.
  int64_t iDim = -1, jDim = -1;
  for (int64_t d = 0; d < rank; ++d) {
    if (!dims[d])
      continue;
    const Lin &l = *dims[d];
    if (l.ci == 1 && l.cj == 0 && iDim < 0)
      iDim = d;
    else if (l.ci == 0 && l.cj == 1 && jDim < 0)
      jDim = d;
    else if (!l.isConstant())
      return Sym::unknown("a constant mask read along a diagonal");
  }
  if (iDim < 0 || jDim < 0)
    return Sym::unknown("a constant mask that does not depend on both the "
                        "query and the key position");
  Type elt = dense.getElementType();
  bool isBool = elt.isInteger(1);
  if (!isBool && !isa<FloatType>(elt))
    return Sym::unknown("a constant mask of " +
                        llvm::formatv("{0}", elt).str());
  // The value on each diagonal d = j - i, d in [-(ni-1), nj-1].
  int64_t nDiag = domain.ni + domain.nj - 1;
  SmallVector<std::optional<double>> diag(nDiag);
  ArrayRef<int64_t> shape = type.getShape();
  SmallVector<int64_t> strides(rank, 1);
  for (int64_t d = rank - 2; d >= 0; --d)
    strides[d] = strides[d + 1] * shape[d + 1];
  auto valueAt = [&](int64_t flat) -> double {
    if (isBool)
      return dense.getValues<bool>()[flat] ? 1.0 : 0.0;
    return dense.getValues<APFloat>()[flat].convertToDouble();
  };
  if (dense.getNumElements() > (int64_t(1) << 26))
    return Sym::unknown("a constant mask too large to inspect");
  for (int64_t flat = 0, e = dense.getNumElements(); flat < e; ++flat) {
    int64_t i = 0, j = 0;
    bool inDomain = true;
    for (int64_t d = 0; d < rank && inDomain; ++d) {
      int64_t coord = (flat / strides[d]) % shape[d];
      if (!dims[d])
        continue; // batch / head: every slice must agree
      int64_t pos = coord - dims[d]->c;
      if (d == iDim)
        i = pos;
      else if (d == jDim)
        j = pos;
      else if (pos != 0)
        inDomain = false; // a constant index: only that slice is read
    }
    if (!inDomain || i < 0 || i >= domain.ni || j < 0 || j >= domain.nj)
      continue;
    double v = valueAt(flat);
    std::optional<double> &slot = diag[j - i + domain.ni - 1];
    if (slot && !(*slot == v || (std::isnan(*slot) && std::isnan(v))))
      return Sym::unknown("the mask is not causal or a window: a constant "
                          "mask that is not a function of j - i");
    slot = v;
  }
  SmallVector<double, 2> distinct;
  for (const std::optional<double> &v : diag)
    if (v && !llvm::is_contained(distinct, *v))
      distinct.push_back(*v);
  if (distinct.empty())
    return Sym::unknown("an empty constant mask");
  if (distinct.size() == 1)
    return isBool ? Sym::pred(distinct[0] != 0.0 ? Band{} : falseBand())
                  : Sym::floating(distinct[0]);
  if (distinct.size() > 2)
    return Sym::unknown("the mask is not causal or a window: a constant "
                        "mask with more than two values");
  // The diagonals holding distinct[k] must form one interval [lo, hi].
  for (int k = 0; k < 2; ++k) {
    int64_t lo = INT64_MAX, hi = INT64_MIN;
    for (int64_t idx = 0; idx < nDiag; ++idx)
      if (diag[idx] && *diag[idx] == distinct[k]) {
        lo = std::min(lo, idx);
        hi = std::max(hi, idx);
      }
    bool interval = true;
    for (int64_t idx = lo; idx <= hi; ++idx)
      if (diag[idx] && *diag[idx] != distinct[k])
        interval = false;
    if (!interval)
      continue;
    // lo <= j - i + ni - 1 <= hi.
    int64_t dLo = lo - (domain.ni - 1), dHi = hi - (domain.ni - 1);
    Band band = simplified({Lin{-1, 1, -dHi}, Lin{1, -1, dLo}});
    double a = distinct[k], b = distinct[1 - k];
    if (isBool) {
      if (a != 0.0)
        return Sym::pred(band);
      if (std::optional<Band> n = negate(band))
        return Sym::pred(*n);
      continue;
    }
    return Sym::select(band, a, b);
  }
  return Sym::unknown("the mask is not causal or a window: a constant mask "
                      "whose values are not one band of "
                      "diagonals (not causal or a window)");
}

Sym SymbolicBody::evalTensor(Value t, const Env &dims, int depth) {
  if (depth > 16)
    return Sym::unknown("a mask computed by too many ops");
  Operation *def = t.getDefiningOp();
  if (!def)
    return Sym::unknown("the mask is a function argument, not known to be "
                        "causal or a window");
  DenseElementsAttr dense;
  if (matchPattern(t, m_Constant(&dense))) {
    if (dense.isSplat()) {
      if (dense.getElementType().isInteger(1))
        return Sym::pred(dense.getSplatValue<bool>() ? Band{} : falseBand());
      if (isa<FloatType>(dense.getElementType()))
        return Sym::floating(
            dense.getSplatValue<APFloat>().convertToDouble());
      return Sym::unknown("an integer constant mask");
    }
    return classifyDense(dense, dims);
  }
  if (auto fill = dyn_cast<linalg::FillOp>(def)) {
    Value v = fill.getInputs()[0];
    if (v.getDefiningOp() && matchPattern(v, m_Constant()))
      return evalOp(v.getDefiningOp(), {}, dims);
    return Sym::unknown("a mask filled with a non-constant");
  }
  if (auto g = dyn_cast<linalg::GenericOp>(def)) {
    if (!isElementwise(g))
      return Sym::unknown("a mask computed by a generic that is not "
                          "elementwise");
    return evalGeneric(g, std::nullopt, dims, depth);
  }
  if (auto b = dyn_cast<linalg::BroadcastOp>(def)) {
    Env in;
    for (int64_t d = 0, e = dims.size(); d < e; ++d)
      if (!llvm::is_contained(b.getDimensions(), d))
        in.push_back(dims[d]);
    return evalTensor(b.getInput(), in, depth + 1);
  }
  if (auto tr = dyn_cast<linalg::TransposeOp>(def)) {
    Env in(dims.size());
    for (auto [d, p] : llvm::enumerate(tr.getPermutation()))
      in[p] = dims[d];
    return evalTensor(tr.getInput(), in, depth + 1);
  }
  if (auto ex = dyn_cast<tensor::ExpandShapeOp>(def)) {
    // Each source dim is one group of result dims; at most one of them may
    // be more than one element long.
    auto shape = ex.getResultType().getShape();
    Env in;
    for (ReassociationIndices group : ex.getReassociationIndices()) {
      std::optional<Lin> l = Lin{};
      int nonUnit = 0;
      for (int64_t d : group)
        if (shape[d] != 1) {
          ++nonUnit;
          l = dims[d];
        }
      if (nonUnit > 1)
        return Sym::unknown("a mask reshaped across its positions");
      in.push_back(l);
    }
    return evalTensor(ex.getSrc(), in, depth + 1);
  }
  if (auto co = dyn_cast<tensor::CollapseShapeOp>(def)) {
    auto shape = co.getSrcType().getShape();
    Env in(co.getSrcType().getRank(), Lin{});
    for (auto [r, group] : llvm::enumerate(co.getReassociationIndices())) {
      int nonUnit = 0;
      for (int64_t d : group)
        if (shape[d] != 1) {
          ++nonUnit;
          in[d] = dims[r];
        }
      if (nonUnit > 1)
        return Sym::unknown("a mask reshaped across its positions");
    }
    return evalTensor(co.getSrc(), in, depth + 1);
  }
  if (auto slice = dyn_cast<tensor::ExtractSliceOp>(def)) {
    // A window of a larger mask (torch's registered tril buffer sliced to
    // the sequence length): positions shifted by the static offsets.
    if (slice.getSourceType().getRank() != slice.getType().getRank() ||
        !slice.hasUnitStride())
      return Sym::unknown("a strided or rank-reducing slice of a mask");
    Env in;
    for (auto [d, off] : llvm::enumerate(slice.getStaticOffsets())) {
      if (ShapedType::isDynamic(off))
        return Sym::unknown("a mask sliced at a dynamic offset");
      std::optional<Lin> l = dims[d];
      if (l)
        l->c += off;
      in.push_back(l);
    }
    return evalTensor(slice.getSource(), in, depth + 1);
  }
  if (auto cast = dyn_cast<tensor::CastOp>(def))
    return evalTensor(cast.getSource(), dims, depth + 1);
  return Sym::unknown("the mask comes from '" + def->getName().getStringRef() +
                      "', not from constants and positions");
}

/// The loop dims of an elementwise op over the scores: i and j the last
/// two, the others batch and heads.
Env scoresEnv(int64_t rank) {
  Env env(rank);
  env[rank - 2] = Lin{1, 0, 0};
  env[rank - 1] = Lin{0, 1, 0};
  return env;
}

/// The attention's mask from where the scores stay visible, simplified on
/// the domain [0, ni) x [0, nj): causal (j <= i), a window (|i - j| < w),
/// both, or none.
struct MaskAttrs {
  bool causal = false;
  std::optional<int64_t> window;
  /// The diagonal through (Nq - 1, Nk - 1) rather than (0, 0): a KV cache's
  /// queries at key positions i + Nk - Nq.
  bool bottomRight = false;
};

FailureOr<MaskAttrs> classifyBand(Band band, Domain domain, Why &why) {
  // Normalise each constraint: divide by the gcd of the coefficients
  // (rounding the constant so the integer solutions stay the same).
  SmallVector<Lin> cs;
  for (Lin l : band) {
    int64_t g = std::gcd(std::abs(l.ci), std::abs(l.cj));
    if (g > 1) {
      // ci*i + cj*j <= -c  <=>  (ci/g)*i + (cj/g)*j <= floor(-c/g).
      int64_t rhs = -l.c;
      int64_t fl = rhs >= 0 ? rhs / g : -((-rhs + g - 1) / g);
      l = Lin{l.ci / g, l.cj / g, -fl};
    }
    cs.push_back(l);
  }
  // Drop constraints that hold on the whole domain; refuse one that holds
  // nowhere; keep the tightest of parallel ones.
  SmallVector<Lin> kept;
  for (const Lin &l : cs) {
    if (domain.isStatic()) {
      int64_t maxV = l.c, minV = l.c;
      maxV += std::max<int64_t>(0, l.ci * (domain.ni - 1)) +
              std::max<int64_t>(0, l.cj * (domain.nj - 1));
      minV += std::min<int64_t>(0, l.ci * (domain.ni - 1)) +
              std::min<int64_t>(0, l.cj * (domain.nj - 1));
      if (maxV <= 0)
        continue;
      if (minV > 0)
        return why("the mask hides every score");
    } else if (l.isConstant()) {
      if (l.c <= 0)
        continue;
      return why("the mask hides every score");
    }
    auto same = llvm::find_if(
        kept, [&](const Lin &k) { return k.ci == l.ci && k.cj == l.cj; });
    if (same != kept.end())
      same->c = std::max(same->c, l.c);
    else
      kept.push_back(l);
  }
  MaskAttrs attrs;
  std::optional<int64_t> upper, lower; // j - i <= upper, i - j <= lower
  for (const Lin &l : kept) {
    if (l.ci == -1 && l.cj == 1)
      upper = -l.c;
    else if (l.ci == 1 && l.cj == -1)
      lower = -l.c;
    else
      return why("the mask is not causal or a window: it constrains " +
                 Twine(l.ci) + "*i + " + Twine(l.cj) + "*j");
  }
  if (!upper && !lower)
    return attrs;
  // Relative to the top-left diagonal (j = i) or, when there are more keys
  // than queries, the bottom-right one (j = i + Nk - Nq); with fewer keys,
  // bottom-right rows would see no key (the program's softmax gives NaN
  // there, fa.attention 0), so that is not matched.
  SmallVector<int64_t, 2> offsets = {0};
  if (domain.isStatic() && domain.nj > domain.ni)
    offsets.push_back(domain.nj - domain.ni);
  for (int64_t off : offsets) {
    std::optional<int64_t> u, l; // j - (i + off) <= u, (i + off) - j <= l
    if (upper)
      u = *upper - off;
    if (lower)
      l = *lower + off;
    if (u && *u == 0) {
      attrs.causal = true;
      if (l) {
        if (*l < 0)
          return why("the mask hides every score");
        attrs.window = *l + 1;
      }
    } else if (u && l && *u == *l && *u >= 0) {
      attrs.window = *u + 1;
    } else {
      continue;
    }
    attrs.bottomRight = off != 0;
    // A top-left window leaves the queries i >= Nk + w - 1 without keys.
    if (attrs.window && !attrs.bottomRight && domain.isStatic() &&
        domain.ni > domain.nj + *attrs.window - 1)
      return why("the window leaves queries without a visible key");
    return attrs;
  }
  if (upper || lower) {
    std::string text;
    if (upper)
      text += "j - i <= " + std::to_string(*upper);
    if (lower)
      text += std::string(upper ? " and " : "") +
              "i - j <= " + std::to_string(*lower);
    return why("the mask is not causal or a window: visible where " + text);
  }
  return attrs;
}

//===----------------------------------------------------------------------===//
// Operands: reshapes, transposes, scales and grouped heads around them
//===----------------------------------------------------------------------===//

/// Under lifting, a 3-D [B*H, N, X] value is the [B, H, N, X] tensor it was
/// collapsed from (torch-mlir's matmul on 4-D operands).
struct Lift {
  int64_t b = 0, h = 0;
  bool on() const { return b > 0; }
};

/// A dim order: logical dim k (batch.., N, X as the attention reads it) is
/// dim perm[k] of the tensor.
using Perm = SmallVector<int64_t, 4>;

bool isIdentity(ArrayRef<int64_t> perm) {
  for (auto [k, p] : llvm::enumerate(perm))
    if (int64_t(k) != p)
      return false;
  return true;
}

/// An operand of the attention as found: `value`, read in the order
/// `perm`, holding Hq / group heads; 3-D under lifting, it is expanded to
/// [B, H, N, X].
struct Operand {
  Value value;
  Perm perm;
  int64_t group = 1;
  /// Before the head repeat was undone (to fall back on when K and V are
  /// grouped differently).
  Value repeated;
  Perm repeatedPerm;
};

/// The input of a transpose: linalg.transpose, or a copy generic reading
/// its input through a permutation map. `p`: result dim d is input dim
/// p[d].
Value transposeInput(Value v, Perm &p) {
  if (auto t = v.getDefiningOp<linalg::TransposeOp>()) {
    p.assign(t.getPermutation().begin(), t.getPermutation().end());
    return t.getInput();
  }
  auto g = v.getDefiningOp<linalg::GenericOp>();
  if (!isElementwise(g) || g.getNumDpsInputs() != 1)
    return nullptr;
  Block &body = g.getRegion().front();
  if (body.getOperations().size() != 1 || yielded(g) != body.getArgument(0))
    return nullptr;
  AffineMap in = g.getMatchingIndexingMap(g.getDpsInputOperand(0));
  if (!in.isPermutation() || in.isIdentity())
    return nullptr;
  // Input dim k is read at loop (= result) dim in[k].
  p.assign(in.getNumResults(), 0);
  for (auto [k, e] : llvm::enumerate(in.getResults()))
    p[cast<AffineDimExpr>(e).getPosition()] = k;
  return g.getDpsInputOperand(0)->get();
}

/// The operand of an elementwise generic that multiplies or divides by a
/// positive constant without changing the type (the scale folded into Q or
/// K); sets `scale` to the factor.
Value scaledInput(Value v, Domain domain, double &scale) {
  auto g = v.getDefiningOp<linalg::GenericOp>();
  if (!isElementwise(g))
    return nullptr;
  for (OpOperand *input : g.getDpsInputOperands()) {
    if (!g.getMatchingIndexingMap(input).isIdentity() ||
        input->get().getType() != v.getType())
      continue;
    SymbolicBody body(domain);
    Sym s = body.evalGeneric(g, input->getOperandNumber(),
                             scoresEnv(g.getNumLoops()));
    if (s.kind != Sym::Data || !s.band.empty() || s.scale == 1.0)
      continue;
    scale = s.scale;
    return input->get();
  }
  return nullptr;
}

/// [B, Hkv, G, N, X] repeating [B, Hkv, N, X] G times along dim 2 (torch's
/// repeat_interleave / expand): linalg.broadcast of dim 2, a copy generic
/// reading (d0, d1, d3, d4), or one reading (d0, d1, 0, d3, d4) of an
/// unsqueezed [B, Hkv, 1, N, X]. Returns the 4-D tensor.
Value repeatSource5D(Value v) {
  if (rankOf(v) != 5 || cast<ShapedType>(v.getType()).isDynamicDim(2))
    return nullptr;
  if (auto b = v.getDefiningOp<linalg::BroadcastOp>())
    return b.getDimensions() == ArrayRef<int64_t>{2} ? b.getInput() : nullptr;
  auto g = v.getDefiningOp<linalg::GenericOp>();
  if (!isElementwise(g) || g.getNumDpsInputs() != 1)
    return nullptr;
  Block &body = g.getRegion().front();
  if (body.getOperations().size() != 1 || yielded(g) != body.getArgument(0))
    return nullptr;
  MLIRContext *ctx = g.getContext();
  auto d = [&](unsigned k) { return getAffineDimExpr(k, ctx); };
  AffineMap in = g.getMatchingIndexingMap(g.getDpsInputOperand(0));
  Value src = g.getDpsInputOperand(0)->get();
  if (in == AffineMap::get(5, 0, {d(0), d(1), d(3), d(4)}, ctx))
    return src;
  if (in == AffineMap::get(5, 0,
                           {d(0), d(1), getAffineConstantExpr(0, ctx), d(3),
                            d(4)},
                           ctx)) {
    auto ex = src.getDefiningOp<tensor::ExpandShapeOp>();
    SmallVector<ReassociationIndices> unsqueeze = {{0}, {1, 2}, {3}, {4}};
    SmallVector<ReassociationIndices> unsqueeze2 = {{0}, {1}, {2, 3}, {4}};
    if (ex && (ex.getReassociationIndices() == unsqueeze ||
               ex.getReassociationIndices() == unsqueeze2))
      return ex.getSrc();
  }
  return nullptr;
}

/// K or V [B, Hq, N, X] materialised from [B, Hkv, N, X] by repeating each
/// head: the repeat collapsed to 4-D, or a copy generic reading
/// (b, h floordiv G, j, x). Returns the source and G.
std::optional<std::pair<Value, int64_t>> undoHeadRepeat(Value v) {
  if (auto collapse = v.getDefiningOp<tensor::CollapseShapeOp>()) {
    SmallVector<ReassociationIndices> expected = {{0}, {1, 2}, {3}, {4}};
    if (collapse.getReassociationIndices() == expected)
      if (Value src = repeatSource5D(collapse.getSrc()))
        return std::make_pair(
            src, cast<ShapedType>(collapse.getSrcType()).getDimSize(2));
  }
  auto g = v.getDefiningOp<linalg::GenericOp>();
  if (!isElementwise(g) || g.getNumDpsInputs() != 1 || g.getNumLoops() != 4)
    return std::nullopt;
  Block &body = g.getRegion().front();
  if (body.getOperations().size() != 1 || yielded(g) != body.getArgument(0))
    return std::nullopt;
  AffineMap in = g.getMatchingIndexingMap(g.getDpsInputOperand(0));
  MLIRContext *ctx = g.getContext();
  if (in.getNumResults() != 4 || in.getResult(0) != getAffineDimExpr(0, ctx) ||
      in.getResult(2) != getAffineDimExpr(2, ctx) ||
      in.getResult(3) != getAffineDimExpr(3, ctx))
    return std::nullopt;
  auto bin = dyn_cast<AffineBinaryOpExpr>(in.getResult(1));
  auto cst = bin ? dyn_cast<AffineConstantExpr>(bin.getRHS()) : nullptr;
  if (!bin || bin.getKind() != AffineExprKind::FloorDiv ||
      bin.getLHS() != getAffineDimExpr(1, ctx) || !cst || cst.getValue() < 2)
    return std::nullopt;
  return std::make_pair(g.getDpsInputOperand(0)->get(), cst.getValue());
}

/// Walks from what a contraction reads (in the order `perm`) back to the
/// tensor the attention should take: through transposes, scales (Q and K
/// only: `scale` collects them), and under lifting the collapse from
/// [B, H, N, X] (possibly of a head repeat [B, Hkv, G, N, X]).
Operand peelOperand(Value v, Perm perm, bool allowScale, Lift lift,
                    Domain domain, double &scale) {
  Operand o;
  o.value = v;
  o.perm = std::move(perm);
  // A 3-D [B*H, a, b] read in `p3` as the 4-D tensor it was collapsed from.
  auto liftPerm = [](ArrayRef<int64_t> p3) {
    return Perm{0, 1, p3[1] + 1, p3[2] + 1};
  };
  for (int step = 0; step < 16; ++step) {
    Value cur = o.value;
    Perm p;
    if (Value in = transposeInput(cur, p)) {
      // Logical k is dim perm[k] of the result, dim p[perm[k]] of the input.
      for (int64_t &d : o.perm)
        d = p[d];
      o.value = in;
      continue;
    }
    double s = 1.0;
    if (allowScale)
      if (Value in = scaledInput(cur, domain, s)) {
        scale *= s;
        o.value = in;
        continue;
      }
    if (lift.on() && rankOf(cur) == 3 && o.perm[0] == 0)
      if (auto c = cur.getDefiningOp<tensor::CollapseShapeOp>()) {
        auto src = cast<ShapedType>(c.getSrcType());
        SmallVector<ReassociationIndices> to3 = {{0, 1}, {2}, {3}};
        SmallVector<ReassociationIndices> from5 = {{0, 1, 2}, {3}, {4}};
        if (c.getReassociationIndices() == to3 &&
            src.getDimSize(0) == lift.b && src.getDimSize(1) == lift.h) {
          o.value = c.getSrc();
          o.perm = liftPerm(o.perm);
          continue;
        }
        if (c.getReassociationIndices() == from5 &&
            src.getDimSize(0) == lift.b && !src.isDynamicDim(1) &&
            !src.isDynamicDim(2) &&
            src.getDimSize(1) * src.getDimSize(2) == lift.h)
          if (Value k4 = repeatSource5D(c.getSrc())) {
            o.repeated = cur;
            o.repeatedPerm = o.perm;
            o.value = k4;
            o.perm = liftPerm(o.perm);
            o.group = src.getDimSize(2);
            return o;
          }
      }
    break;
  }
  // A head repeat along dim 1, the head dim as read.
  if (o.group == 1 && rankOf(o.value) == 4 && o.perm[0] == 0 &&
      o.perm[1] == 1)
    if (auto rep = undoHeadRepeat(o.value)) {
      o.repeated = o.value;
      o.repeatedPerm = o.perm;
      o.value = rep->first;
      o.group = rep->second;
    }
  return o;
}

//===----------------------------------------------------------------------===//
// Contractions
//===----------------------------------------------------------------------===//

/// A contraction over the last dim of its result's rows: Q K^T ("..id,
/// ..jd -> ..ij") or P V ("..ij, ..jd -> ..id"), as linalg.matmul (rank 2),
/// linalg.batch_matmul (rank 3; with or without transposed-B indexing
/// maps, which is how MLIR 22 spells batch_matmul_transpose_b) or an
/// einsum-like linalg.generic (rank 2 to 4). The body multiplies the inputs,
/// each possibly extended to a wider float first (f16 x f16 -> f32), and
/// accumulates from zero.
struct Contraction {
  linalg::LinalgOp op;
  Value lhs, rhs;
  /// The order in which each operand and the result are read, relative to
  /// the logical Q [.., Nq, D], K [.., Nk, D], P [.., Nq, Nk],
  /// V [.., Nk, Dv], S [.., Nq, Nk] and O [.., Nq, Dv] (Perm).
  Perm lhsPerm, rhsPerm, outPerm;
  /// The right operand's heads read as h floordiv group.
  int64_t group = 1;
  int64_t rank = 0;
};

/// acc + a * b with a, b the inputs, each possibly through arith.extf.
bool isMulAddBody(Block &body) {
  if (body.getNumArguments() != 3)
    return false;
  auto yield = cast<linalg::YieldOp>(body.getTerminator());
  if (yield.getNumOperands() != 1)
    return false;
  auto add = yield.getOperand(0).getDefiningOp<arith::AddFOp>();
  if (!add || add->getBlock() != &body)
    return false;
  Value acc = body.getArgument(2);
  Value prod = add.getLhs() == acc ? add.getRhs() : add.getLhs();
  if ((add.getLhs() == acc) == (add.getRhs() == acc))
    return false;
  auto mul = prod.getDefiningOp<arith::MulFOp>();
  if (!mul || mul->getBlock() != &body)
    return false;
  auto source = [&](Value x) -> Value {
    if (auto ext = x.getDefiningOp<arith::ExtFOp>())
      if (ext->getBlock() == &body)
        return ext.getIn();
    return x;
  };
  Value a = source(mul.getLhs()), b = source(mul.getRhs());
  if (!((a == body.getArgument(0) && b == body.getArgument(1)) ||
        (a == body.getArgument(1) && b == body.getArgument(0))))
    return false;
  // Nothing else in the body.
  for (Operation &op : body.without_terminator())
    if (&op != add && &op != mul && !(isa<arith::ExtFOp>(op)))
      return false;
  return true;
}

FailureOr<Contraction> matchContraction(Operation *def, bool isScores,
                                        Why &why) {
  const char *what = isScores ? "Q K^T" : "P V";
  auto op = dyn_cast_or_null<linalg::LinalgOp>(def);
  if (!op || !isa<linalg::MatmulOp, linalg::BatchMatmulOp, linalg::GenericOp>(
                 def))
    return why(Twine(what) + " is not a linalg.matmul, linalg.batch_matmul "
                             "or a contraction linalg.generic");
  if (op.getNumDpsInputs() != 2 || op.getNumDpsInits() != 1 ||
      def->getNumResults() != 1 || !op.hasPureTensorSemantics())
    return why(Twine(what) + " is not a two-operand contraction on tensors");
  if (op.getNumReductionLoops() != 1)
    return why(Twine(what) + " does not reduce over exactly one dim");
  if (!isZeroInit(op.getDpsInitOperand(0)->get()))
    return why(Twine(what) + " does not accumulate from zero (a bias?)");
  if (!isMulAddBody(*op.getBlock()))
    return why(Twine(what) + "'s body is not acc + a * b");
  int64_t r = rankOf(def->getResult(0));
  if (r < 2 || r > 4 || op.getNumLoops() != r + 1)
    return why(Twine(what) + " is not of rank 2, 3 or 4");
  SmallVector<AffineMap> maps = op.getIndexingMapsArray();
  AffineMap lhsMap = maps[0], rhsMap = maps[1], outMap = maps[2];
  if (!outMap.isProjectedPermutation() || outMap.getNumResults() != r ||
      !lhsMap.isProjectedPermutation() || lhsMap.getNumResults() != r ||
      rhsMap.getNumResults() != r)
    return why(Twine(what) + "'s indexing maps are not an einsum");
  MLIRContext *ctx = def->getContext();
  int64_t red = -1;
  for (auto [i, it] : llvm::enumerate(op.getIteratorTypesArray()))
    if (it == utils::IteratorType::reduction)
      red = i;
  AffineExpr redExpr = getAffineDimExpr(red, ctx);
  // The roles of the loops: batch dims (in all three), the row i (left
  // and out), the column (right and out: a key j or a value dim), the
  // reduced dim. The batch order is the scores' (Q K^T: its result must be
  // (batch.., i, j)) or P's (P V: its left operand must be (batch.., i, j)),
  // the softmax's layout; the other operands may be read in any order.
  AffineMap anchor = isScores ? outMap : lhsMap;
  SmallVector<AffineExpr> batch(anchor.getResults().take_front(r - 2));
  AffineExpr row = anchor.getResult(r - 2);
  AffineExpr col;
  if (isScores) {
    col = outMap.getResult(r - 1);
    if (col == redExpr)
      return why(Twine(what) + " does not reduce over the head dim");
  } else {
    if (anchor.getResult(r - 1) != redExpr)
      return why(Twine(what) + " does not contract P over the keys (its "
                               "last dim)");
    for (AffineExpr e : outMap.getResults())
      if (!llvm::is_contained(anchor.getResults(), e))
        col = e;
    if (!col)
      return why(Twine(what) + "'s result has no value dim");
  }
  // logical: what each operand's dims must be, in order.
  auto orderOf = [&](AffineMap map, ArrayRef<AffineExpr> logical,
                     bool rhs, Perm &perm, int64_t &group) -> bool {
    perm.assign(r, -1);
    for (auto [k, want] : llvm::enumerate(logical)) {
      for (auto [d, got] : llvm::enumerate(map.getResults())) {
        bool same = got == want;
        // Grouped-query heads: (h floordiv G) for the head of a 4-D K/V.
        if (!same && rhs && r == 4 && k == 1) {
          auto bin = dyn_cast<AffineBinaryOpExpr>(got);
          auto cst = bin ? dyn_cast<AffineConstantExpr>(bin.getRHS())
                         : nullptr;
          if (bin && bin.getKind() == AffineExprKind::FloorDiv &&
              bin.getLHS() == want && cst && cst.getValue() >= 2) {
            same = true;
            group = cst.getValue();
          }
        }
        if (same) {
          if (perm[k] >= 0)
            return false;
          perm[k] = d;
        }
      }
      if (perm[k] < 0)
        return false;
    }
    return true;
  };
  SmallVector<AffineExpr> lhsLogical(batch), rhsLogical(batch),
      outLogical(batch);
  lhsLogical.append({row, redExpr});
  if (isScores)
    rhsLogical.append({col, redExpr});
  else
    rhsLogical.append({redExpr, col});
  outLogical.append({row, col});
  Contraction c;
  c.op = op;
  c.rank = r;
  c.lhs = op.getDpsInputOperand(0)->get();
  c.rhs = op.getDpsInputOperand(1)->get();
  int64_t unused = 1;
  if (!orderOf(lhsMap, lhsLogical, false, c.lhsPerm, unused))
    return why(Twine(what) + " does not read its left operand as a "
                             "permutation of (batch.., row, reduced)");
  if (!orderOf(rhsMap, rhsLogical, true, c.rhsPerm, c.group))
    return why(Twine(what) + " does not contract the right operand over "
                             "the reduced dim, with the left's batch dims");
  if (!orderOf(outMap, outLogical, false, c.outPerm, unused))
    return why(Twine(what) + "'s result is not a permutation of (batch.., "
                             "row, column)");
  return c;
}

//===----------------------------------------------------------------------===//
// Softmax
//===----------------------------------------------------------------------===//

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
/// accumulator by one of OpTys. Returns the reduced input. A generic may
/// yield more results (torch-mlir's aten.max.dim also yields the argmax):
/// `v`'s own yielded value must combine only the input and its own
/// accumulator, so the others cannot change it.
template <typename... OpTys>
Value matchRowReduction(Value v, int64_t rank, bool zeroInit = false) {
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
bool matchRowBroadcast(linalg::GenericOp g, Value &full, Value &row) {
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
  if (!flag || !softmax ||
      !isRowMap(g.getMatchingIndexingMap(flag), rank) ||
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
  Value other = cmp.getLhs() == eqBody.getArgument(0) ? cmp.getRhs()
                                                      : cmp.getLhs();
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

//===----------------------------------------------------------------------===//
// The whole attention
//===----------------------------------------------------------------------===//

struct Match {
  Operation *root = nullptr; // replaced by the attention's O
  Operand q, k, v;
  Lift lift;     // operands are 3-D [B*H, N, X] to expand to [B, H, N, X]
  Perm outPerm;  // O's order in the root (rank 4)
  int64_t rank;  // of the softmax: 2, 3 or 4
  double scale = 1.0;
  double softcap = 0.0; // c of c * tanh(s / c); 0: none
  MaskAttrs mask;
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
    bool isContraction =
        isa<linalg::MatmulOp, linalg::BatchMatmulOp>(def) ||
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
      if (s.kind == Sym::Data) {
        result = s;
        next = input->get();
        break;
      }
      if (result.why.empty())
        result = s;
    }
    if (!next) {
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
  m.v = peelOperand(pv->rhs, pv->rhsPerm, /*allowScale=*/false, pvLift,
                    domain, vScale);
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
  m.lift = (qkLift.on() || pvLift.on()) ? Lift{xType.getDimSize(0),
                                              xType.getDimSize(1)}
                                        : Lift{};

  // Mask.
  FailureOr<MaskAttrs> mask = classifyBand(visible, domain, why);
  if (failed(mask))
    return failure();
  m.mask = *mask;
  if (std::optional<std::string> bad = checkScale(m.scale))
    return why("the scale " + formatDouble(m.scale) + " is out of range: " +
               *bad);
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
  auto isWideEnough = [&](Type t) {
    return t == m.elt || t.isF32();
  };
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
    return why("K and V have different head counts (" + Twine(ks[1]) +
               " and " + Twine(vs[1]) + ")");
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
  auto attention = AttentionOp::create(rewriter, loc, TypeRange{oType}, q, k, v,
                                       ValueRange{}, ValueRange{}, Value(),
                                       Value(), Value(), Value(),
                                       ArrayRef<NamedAttribute>{});
  attention.setScaleAttr(
      rewriter.getF32FloatAttr(static_cast<float>(m.scale)));
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
      linalgOp.getNumDpsInputs() != 2 ||
      linalgOp.getNumReductionLoops() == 0 || !linalgOp.hasPureTensorSemantics())
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
      for (Dialect *dialect : {ctx->getLoadedDialect("arith"),
                               ctx->getLoadedDialect("math")})
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
