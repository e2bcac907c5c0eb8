//===- PolyExp2.h - software exp2 coefficients ------------------*- C++ -*-===//
//
// FlashAttention-4's software exp2: exp2(y) = 2^floor(y) * p(y - floor(y)),
// p of degree 2..5 approximating 2^f on [0, 1). Coefficients (p0 first) are
// relative-error minimax, computed with Lawson's iteratively reweighted least
// squares on 4001 Chebyshev points and rounded to f32. Max relative error of
// the f32 polynomial: 1.7e-3, 7.5e-5, 2.6e-6, 9.0e-8 for degrees 2..5.
// Shared by every lowering of the fa softmax steps so they agree bit for bit.
//
//===----------------------------------------------------------------------===//

#ifndef FA_DIALECT_FA_IR_POLYEXP2_H
#define FA_DIALECT_FA_IR_POLYEXP2_H

#include "mlir/Dialect/Arith/IR/Arith.h"
#include "mlir/Dialect/Math/IR/Math.h"
#include "mlir/IR/Builders.h"
#include "llvm/ADT/STLFunctionalExtras.h"

namespace mlir::fa {

inline constexpr double kPolyExp2Coefficients[4][6] = {
    {1.0017247200012207, 0.657636284828186, 0.3371894359588623},
    {0.9999251961708069, 0.6958335638046265, 0.22606715559959412,
     0.07802452147006989},
    {1.0000026226043701, 0.6930038332939148, 0.2414427548646927,
     0.052011460065841675, 0.013534167781472206},
    {0.9999999403953552, 0.6931530833244324, 0.24015361070632935,
     0.05582631751894951, 0.00898933969438076, 0.0018775766948238015}};

/// The coefficients p0..p_degree for a degree in [2, 5].
inline const double *polyExp2Coefficients(int64_t degree) {
  return kPolyExp2Coefficients[degree - 2];
}

/// floor(y) of a clamped y in [-126, 127], two ways: `whole` as f32 (for
/// the fraction y - whole) and `exponentStep` = whole << 23 as i32 (added to
/// p's bits, it multiplies p by 2^whole).
struct PolyExp2Floor {
  Value whole, exponentStep;
};
using PolyExp2FloorFn =
    llvm::function_ref<PolyExp2Floor(OpBuilder &, Location, Value)>;

/// The floor by conversions (math.floor, then fptosi): the CPU loops'. On
/// NVIDIA GPUs both are conversion-pipe instructions (FRND, F2I), which run
/// at the MUFU's rate; the GPU lowerings pass a floor on the FMA pipe
/// instead (NVVMEmitter::polyExp2Floor), equal bit for bit.
inline PolyExp2Floor polyExp2FloorByConversion(OpBuilder &b, Location loc,
                                               Value clamped) {
  Value whole = math::FloorOp::create(b, loc, clamped);
  Value step = arith::ShLIOp::create(
      b, loc, arith::FPToSIOp::create(b, loc, b.getI32Type(), whole),
      arith::ConstantIntOp::create(b, loc, 23, 32));
  return {whole, step};
}

/// exp2(y) = 2^floor(y) * p(y - floor(y)) in f32 with FMAs and
/// exponent-bit arithmetic (FlashAttention-4's software exp2), for every
/// lowering of the softmax step (loops on the CPU, registers on the GPUs).
/// y is clamped to [-126, 127] so the exponent field stays normal;
/// y < -126 (including the -inf of masked scores) gives exactly 0, and NaN
/// stays NaN. `floorFn` takes floor(y) (any exact floor: the result is the
/// same bit for bit).
inline Value emitPolyExp2(OpBuilder &b, Location loc, Value y, int64_t degree,
                          PolyExp2FloorFn floorFn = polyExp2FloorByConversion) {
  const double *c = polyExp2Coefficients(degree);
  Type f32 = b.getF32Type(), i32 = b.getI32Type();
  auto constant = [&](double v) -> Value {
    return arith::ConstantOp::create(b, loc, b.getF32FloatAttr(float(v)));
  };
  Value clamped = arith::MinimumFOp::create(
      b, loc, arith::MaximumFOp::create(b, loc, y, constant(-126.0)),
      constant(127.0));
  PolyExp2Floor floor = floorFn(b, loc, clamped);
  Value frac = arith::SubFOp::create(b, loc, clamped, floor.whole);
  Value p = constant(c[degree]);
  for (int64_t k = degree - 1; k >= 0; --k)
    p = math::FmaOp::create(b, loc, p, frac, constant(c[k]));
  Value bits = arith::AddIOp::create(
      b, loc, arith::BitcastOp::create(b, loc, i32, p), floor.exponentStep);
  Value r = arith::BitcastOp::create(b, loc, f32, bits);
  Value tiny = arith::CmpFOp::create(b, loc, arith::CmpFPredicate::OLT, y,
                                     constant(-126.0));
  r = arith::SelectOp::create(b, loc, tiny, constant(0.0), r);
  Value isNan = arith::CmpFOp::create(b, loc, arith::CmpFPredicate::UNO, y, y);
  return arith::SelectOp::create(b, loc, isNan, y, r);
}

} // namespace mlir::fa

#endif // FA_DIALECT_FA_IR_POLYEXP2_H
