//===- RaiseSymbolic.cpp - symbolic evaluation of elementwise bodies ------===//
//
// fa-raise-attention's symbolic evaluation of elementwise bodies
// (SymbolicBody): a scale as a product of positive constants, a mask as a
// conjunction of linear constraints on the query index i and the key index
// j (a band), whether it is spelled as a constant tensor, a select on
// linalg.index comparisons, a boolean chain or an additive 0 / -inf tensor;
// and the classification of a band as fa.attention's mask (classifyBand).
//
//===----------------------------------------------------------------------===//

#include "RaiseAttention.h"

#include "fa/Dialect/FA/IR/Validation.h"

#include "mlir/Dialect/Math/IR/Math.h"
#include "mlir/Dialect/Tensor/IR/Tensor.h"
#include "mlir/IR/Matchers.h"
#include "llvm/ADT/STLExtras.h"
#include "llvm/Support/FormatVariadic.h"

#include <cmath>
#include <limits>
#include <numeric>

namespace mlir::fa::raise {

static Band falseBand() { return Band{Lin{0, 0, 1}}; }

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
static bool isMaskedValue(double v) {
  return v == -std::numeric_limits<double>::infinity() || v <= -65504.0;
}

/// The position of a tensor read through `map` from a generic at `loops`.
static std::optional<Env> compose(AffineMap map, const Env &loops) {
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
static bool holdsEverywhere(const Lin &l, Domain domain) {
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
    std::optional<Env> dims = compose(g.getMatchingIndexingMap(input), loops);
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
static std::optional<Band> compare(arith::CmpIPredicate p, const Lin &a,
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
      bool same =
          (cmp.getPredicate() == arith::CmpIPredicate::eq) == in[1].isTrue();
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
      return Sym::unknown("the mask adds " + formatDouble(m.value) + " and " +
                          formatDouble(m.other) +
                          ", not 0 where visible and -inf where hidden");
    }
    if (a.kind == Sym::Data || b.kind == Sym::Data)
      return Sym::unknown(
          "'" + opName() + "' of the scores with " +
          (isAdd ? "a non-constant (a bias?)" : "a non-constant"));
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
        return Sym::floating(dense.getSplatValue<APFloat>().convertToDouble());
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

} // namespace mlir::fa::raise
