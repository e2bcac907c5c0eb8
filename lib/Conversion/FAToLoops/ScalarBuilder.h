//===- ScalarBuilder.h - scalar code in the CPU lowering's loop nests -----===//
//
// The helpers every fa tile op's CPU pattern writes its loop nest with
// (FAToLoops.cpp: the forward's ops; BackwardToLoops.cpp: the backward's).
//
//===----------------------------------------------------------------------===//

#ifndef FA_LIB_CONVERSION_FATOLOOPS_SCALARBUILDER_H
#define FA_LIB_CONVERSION_FATOLOOPS_SCALARBUILDER_H

#include "fa/Dialect/FA/IR/PolyExp2.h"
#include "fa/Dialect/FA/IR/Validation.h"

#include "mlir/Dialect/Arith/IR/Arith.h"
#include "mlir/Dialect/Math/IR/Math.h"
#include "mlir/Dialect/MemRef/IR/MemRef.h"
#include "mlir/Dialect/SCF/IR/SCF.h"
#include "mlir/IR/Builders.h"

#include <limits>

namespace mlir::fa::loops {

constexpr double kLog2E = 1.4426950408889634;
constexpr double kLn2 = 0.6931471805599453;

/// Small helpers for scalar code inside loop nests.
struct ScalarBuilder {
  OpBuilder &b;
  Location loc;

  Value index(int64_t v) { return arith::ConstantIndexOp::create(b, loc, v); }
  Value f32(double v) {
    return arith::ConstantOp::create(b, loc,
                                     b.getF32FloatAttr(static_cast<float>(v)));
  }
  Value negInf() { return f32(-std::numeric_limits<double>::infinity()); }
  Value dim(Value memref, int64_t d) {
    return b.createOrFold<memref::DimOp>(loc, memref, d);
  }
  Value load(Value memref, ValueRange idx) {
    return memref::LoadOp::create(b, loc, memref, idx);
  }
  /// Loads an element and widens it to f32.
  Value loadF32(Value memref, ValueRange idx) {
    Value v = load(memref, idx);
    if (v.getType() != b.getF32Type())
      v = arith::ExtFOp::create(b, loc, b.getF32Type(), v);
    return v;
  }
  void store(Value v, Value memref, ValueRange idx) {
    memref::StoreOp::create(b, loc, v, memref, idx);
  }

  /// x rounded to e4m3 and widened back, saturating at +-448 (the
  /// hardware's cvt.rn.satfinite; arith.truncf alone would give NaN past
  /// 448). fa-expand-fp8-casts lowers the casts for targets without f8.
  Value roundToE4M3(Value x, Type f8) {
    Value clamped = arith::MinimumFOp::create(
        b, loc, arith::MaximumFOp::create(b, loc, x, f32(-kE4M3Max)),
        f32(kE4M3Max));
    return arith::TruncFOp::create(b, loc, f8, clamped);
  }

  Value polyExp2(Value y, int64_t degree) {
    return emitPolyExp2(b, loc, y, degree);
  }

  /// exp2 of an element in score column `col`: software for one column in
  /// `period` when a degree is given, math.exp2 otherwise.
  Value exp2(Value y, Value col, std::optional<int64_t> degree,
             std::optional<int64_t> period) {
    Value hw = math::Exp2Op::create(b, loc, y);
    if (!degree)
      return hw;
    if (*period == 1)
      return polyExp2(y, *degree);
    Value emulated = arith::CmpIOp::create(
        b, loc, arith::CmpIPredicate::eq,
        arith::RemUIOp::create(b, loc, col, index(*period)), index(0));
    return arith::SelectOp::create(b, loc, emulated, polyExp2(y, *degree),
                                   hw);
  }

  /// max(init, S[r, 0..cols)).
  Value rowMax(Value scores, Value r, Value cols, Value init) {
    return reduce(cols, init, [&](Value c, Value acc) {
      return arith::MaximumFOp::create(b, loc, acc, load(scores, {r, c}))
          .getResult();
    });
  }

  /// The value subtracted before exp2: m, or 0 when m = -inf (a row with
  /// every score masked), so that exp2(-inf - 0) = 0 rather than
  /// exp2(-inf + inf) = NaN.
  Value softmaxBase(Value m) {
    Value isEmpty =
        arith::CmpFOp::create(b, loc, arith::CmpFPredicate::OEQ, m, negInf());
    return arith::SelectOp::create(b, loc, isEmpty, f32(0.0), m);
  }

  /// S[r, c] <- exp2(S[r, c] - base) for c < cols; returns the row sum.
  Value exponentiateRow(Value scores, Value r, Value cols, Value base,
                        std::optional<int64_t> degree,
                        std::optional<int64_t> period) {
    return reduce(cols, f32(0.0), [&](Value c, Value acc) {
      Value s = load(scores, {r, c});
      Value p = exp2(arith::SubFOp::create(b, loc, s, base), c, degree, period);
      store(p, scores, {r, c});
      return arith::AddFOp::create(b, loc, acc, p).getResult();
    });
  }

  /// for iv in [0, ub): body(iv)
  void forLoop(Value ub, function_ref<void(Value)> body) {
    auto loop = scf::ForOp::create(b, loc, index(0), ub, index(1));
    OpBuilder::InsertionGuard guard(b);
    b.setInsertionPoint(loop.getBody()->getTerminator());
    body(loop.getInductionVar());
  }
  /// A reduction loop: returns fold(init, body(iv)) over [0, ub).
  Value reduce(Value ub, Value init,
               function_ref<Value(Value iv, Value acc)> body) {
    auto loop = scf::ForOp::create(b, loc, index(0), ub, index(1),
                                   ValueRange{init});
    OpBuilder::InsertionGuard guard(b);
    b.setInsertionPointToStart(loop.getBody());
    Value next = body(loop.getInductionVar(), loop.getRegionIterArgs()[0]);
    scf::YieldOp::create(b, loc, next);
    // Replace the implicit empty yield created by the builder, if any.
    return loop.getResult(0);
  }
};

} // namespace mlir::fa::loops

#endif // FA_LIB_CONVERSION_FATOLOOPS_SCALARBUILDER_H
