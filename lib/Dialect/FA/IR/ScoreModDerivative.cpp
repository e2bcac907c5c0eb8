//===- ScoreModDerivative.cpp - d score_mod / d score ---------------------===//
//
// Forward-mode differentiation of a score_mod body with respect to its
// score argument; the rules are listed in ScoreModDerivative.h.
//
//===----------------------------------------------------------------------===//

#include "fa/Dialect/FA/IR/ScoreModDerivative.h"

#include "mlir/Dialect/Arith/IR/Arith.h"
#include "mlir/Dialect/Math/IR/Math.h"
#include "llvm/ADT/DenseSet.h"
#include "llvm/ADT/TypeSwitch.h"

#include "llvm/Support/MathExtras.h"

using namespace mlir;

/// Whether `op` (one float result) has a derivative rule in buildTangent.
static bool hasRule(Operation *op) {
  return op->getNumRegions() == 0 &&
         isa<arith::AddFOp, arith::SubFOp, arith::NegFOp, arith::MulFOp,
             arith::DivFOp, math::FmaOp, arith::MaximumFOp, arith::MaxNumFOp,
             arith::MinimumFOp, arith::MinNumFOp, arith::SelectOp,
             arith::ExtFOp, arith::TruncFOp, math::TanhOp, math::ExpOp,
             math::Exp2Op, math::LogOp, math::Log2Op, math::SqrtOp,
             math::RsqrtOp, math::AbsFOp, math::SinOp, math::CosOp,
             math::FloorOp, math::CeilOp, math::RoundOp, math::RoundEvenOp,
             math::TruncOp>(op);
}

StringRef mlir::fa::differentiableOpNames() {
  return "arith.addf, subf, negf, mulf, divf, maximumf, maxnumf, minimumf, "
         "minnumf, select, extf, truncf; math.fma, tanh, exp, exp2, log, log2, "
         "sqrt, rsqrt, absf, sin, cos, floor, ceil, round, roundeven, trunc";
}

Operation *mlir::fa::findUndifferentiable(Region &scoreMod) {
  if (scoreMod.empty() || scoreMod.front().getNumArguments() == 0)
    return nullptr;
  Block &body = scoreMod.front();
  llvm::DenseSet<Value> reached = {body.getArgument(0)};
  for (Operation &op : body.without_terminator()) {
    // On the path: the op, or an op nested in it, reads a reached value.
    bool onPath =
        op.walk([&](Operation *inner) {
            return llvm::any_of(inner->getOperands(),
                                [&](Value v) { return reached.contains(v); })
                       ? WalkResult::interrupt()
                       : WalkResult::advance();
          }).wasInterrupted();
    if (!onPath || llvm::none_of(op.getResultTypes(), llvm::IsaPred<FloatType>))
      continue;
    if (op.getNumResults() != 1 || !hasRule(&op))
      return &op;
    reached.insert(op.getResult(0));
  }
  return nullptr;
}

Value mlir::fa::buildTangent(OpBuilder &b, Operation *op,
                             ArrayRef<Value> tangents) {
  if (op->getNumResults() != 1 || !isa<FloatType>(op->getResult(0).getType()) ||
      llvm::all_of(tangents, [](Value t) { return !t; }))
    return nullptr;
  Location loc = op->getLoc();
  Value y = op->getResult(0);
  Type type = y.getType();
  auto constant = [&](double v) -> Value {
    return arith::ConstantOp::create(b, loc, b.getFloatAttr(type, v));
  };
  // Null is zero: sums and products skip it.
  auto add = [&](Value x, Value z) -> Value {
    if (!x || !z)
      return x ? x : z;
    return arith::AddFOp::create(b, loc, x, z);
  };
  auto mul = [&](Value x, Value z) -> Value {
    if (!x || !z)
      return nullptr;
    return arith::MulFOp::create(b, loc, x, z);
  };
  auto div = [&](Value x, Value z) -> Value {
    if (!x)
      return nullptr;
    return arith::DivFOp::create(b, loc, x, z);
  };
  auto neg = [&](Value x) -> Value {
    if (!x)
      return nullptr;
    return arith::NegFOp::create(b, loc, x);
  };
  auto orZero = [&](Value t) { return t ? t : constant(0.0); };
  auto choose = [&](Value condition, Value x, Value z) -> Value {
    return arith::SelectOp::create(b, loc, condition, orZero(x), orZero(z));
  };
  auto compare = [&](arith::CmpFPredicate p, Value x, Value z) -> Value {
    return arith::CmpFOp::create(b, loc, p, x, z);
  };
  Value a = op->getOperand(0), da = tangents[0];
  const double ln2 = llvm::numbers::ln2;
  return llvm::TypeSwitch<Operation *, Value>(op)
      .Case<arith::AddFOp>([&](auto) { return add(da, tangents[1]); })
      .Case<arith::SubFOp>([&](auto) { return add(da, neg(tangents[1])); })
      .Case<arith::NegFOp>([&](auto) { return neg(da); })
      // d(a b) = da b + a db
      .Case<arith::MulFOp>([&](arith::MulFOp o) {
        return add(mul(da, o.getRhs()), mul(o.getLhs(), tangents[1]));
      })
      // d(a / b) = (da - y db) / b
      .Case<arith::DivFOp>([&](arith::DivFOp o) {
        return div(add(da, neg(mul(y, tangents[1]))), o.getRhs());
      })
      // d(a b + c) = da b + a db + dc
      .Case<math::FmaOp>([&](math::FmaOp o) {
        return add(add(mul(da, o.getB()), mul(o.getA(), tangents[1])),
                   tangents[2]);
      })
      // The chosen operand's tangent (ties choose the first).
      .Case<arith::MaximumFOp, arith::MaxNumFOp>([&](Operation *o) {
        return choose(compare(arith::CmpFPredicate::OGE, a, o->getOperand(1)),
                      da, tangents[1]);
      })
      .Case<arith::MinimumFOp, arith::MinNumFOp>([&](Operation *o) {
        return choose(compare(arith::CmpFPredicate::OLE, a, o->getOperand(1)),
                      da, tangents[1]);
      })
      .Case<arith::SelectOp>([&](arith::SelectOp o) {
        return choose(o.getCondition(), tangents[1], tangents[2]);
      })
      .Case<arith::ExtFOp>([&](auto) -> Value {
        return da ? arith::ExtFOp::create(b, loc, type, da) : Value();
      })
      .Case<arith::TruncFOp>([&](auto) -> Value {
        return da ? arith::TruncFOp::create(b, loc, type, da) : Value();
      })
      // tanh' = 1 - tanh^2
      .Case<math::TanhOp>([&](auto) {
        return mul(arith::SubFOp::create(b, loc, constant(1.0), mul(y, y)), da);
      })
      .Case<math::ExpOp>([&](auto) { return mul(y, da); })
      .Case<math::Exp2Op>([&](auto) { return mul(mul(y, constant(ln2)), da); })
      .Case<math::LogOp>([&](auto) { return div(da, a); })
      .Case<math::Log2Op>([&](auto) { return div(da, mul(a, constant(ln2))); })
      .Case<math::SqrtOp>([&](auto) { return div(da, mul(constant(2.0), y)); })
      // d(a^-1/2) = -a^-3/2 / 2 da = -y^3 / 2 da
      .Case<math::RsqrtOp>(
          [&](auto) { return mul(mul(constant(-0.5), mul(y, mul(y, y))), da); })
      .Case<math::AbsFOp>([&](auto) {
        return choose(compare(arith::CmpFPredicate::OLT, a, constant(0.0)),
                      neg(da), da);
      })
      .Case<math::SinOp>(
          [&](auto) { return mul(math::CosOp::create(b, loc, a), da); })
      .Case<math::CosOp>(
          [&](auto) { return mul(neg(math::SinOp::create(b, loc, a)), da); })
      // Piecewise constant: no tangent.
      .Default([](Operation *) { return Value(); });
}
