//===- ExpandFP8Casts.cpp - f8E4M3FN casts as integer code ----------------===//
//
// The host path stores e4m3 values as i8 (LLVM has no f8 type), so the
// conversions between e4m3 and f32 are written here on the bits; each is
// exact or rounds to nearest even as APFloat does (the lit test
// test/Integration/CPU/fp8-casts.test compares all 256 codes and the
// rounding boundaries with the host's fa/Support/Float8.h).
//
//===----------------------------------------------------------------------===//

#include "fa/Conversion/Passes.h"

#include "mlir/IR/PatternMatch.h"
#include "mlir/Transforms/GreedyPatternRewriteDriver.h"

namespace mlir::fa {
#define GEN_PASS_DEF_FAEXPANDFP8CASTS
#include "fa/Conversion/Passes.h.inc"
} // namespace mlir::fa

using namespace mlir;

namespace {

/// Scalar integer/float constants and ops on the bits (the CPU path casts
/// scalars; vector casts are left alone).
struct BitBuilder {
  PatternRewriter &b;
  Location loc;
  Type i32, f32;

  Value int32(int64_t v) {
    return arith::ConstantOp::create(b, loc, b.getIntegerAttr(i32, v));
  }
  Value float32(double v) {
    return arith::ConstantOp::create(b, loc, b.getFloatAttr(f32, v));
  }
  Value andi(Value x, int64_t m) {
    return arith::AndIOp::create(b, loc, x, int32(m));
  }
  Value shl(Value x, int64_t n) {
    return arith::ShLIOp::create(b, loc, x, int32(n));
  }
  Value shr(Value x, int64_t n) {
    return arith::ShRUIOp::create(b, loc, x, int32(n));
  }
  Value add(Value x, Value y) { return arith::AddIOp::create(b, loc, x, y); }
  Value cmp(arith::CmpIPredicate p, Value x, int64_t c) {
    return arith::CmpIOp::create(b, loc, p, x, int32(c));
  }
  Value select(Value c, Value x, Value y) {
    return arith::SelectOp::create(b, loc, c, x, y);
  }
};

bool isE4M3(Type t) { return isa<Float8E4M3FNType>(t); }

struct ExpandE4M3ExtF : OpRewritePattern<arith::ExtFOp> {
  using OpRewritePattern::OpRewritePattern;
  LogicalResult matchAndRewrite(arith::ExtFOp op,
                                PatternRewriter &rewriter) const override {
    Type inType = op.getIn().getType();
    if (!isE4M3(inType))
      return failure();
    Location loc = op.getLoc();
    BitBuilder bb{rewriter, loc, rewriter.getI32Type(), rewriter.getF32Type()};
    Value bits = arith::ExtUIOp::create(
        rewriter, loc, bb.i32,
        arith::BitcastOp::create(rewriter, loc, rewriter.getI8Type(),
                                 op.getIn()));
    Value sign = bb.shl(bb.andi(bits, 0x80), 24);
    Value magnitude = bb.andi(bits, 0x7f);
    // Normal: exponent e + 127 - 7 and mantissa in place, in one add:
    // ((e << 3 | m) + (120 << 3)) << 20.
    Value normal = bb.shl(bb.add(magnitude, bb.int32(120 << 3)), 20);
    // Subnormal (e = 0): m * 2^-9, exact in f32.
    Value subnormal = arith::BitcastOp::create(
        rewriter, loc, bb.i32,
        arith::MulFOp::create(
            rewriter, loc,
            arith::UIToFPOp::create(rewriter, loc, bb.f32, bb.andi(bits, 7)),
            bb.float32(0x1p-9)));
    Value result = bb.select(bb.cmp(arith::CmpIPredicate::ult, magnitude, 8),
                             subnormal, normal);
    result = bb.select(bb.cmp(arith::CmpIPredicate::eq, magnitude, 0x7f),
                       bb.int32(0x7fc00000), result);
    result = arith::OrIOp::create(rewriter, loc, result, sign);
    Value widened = arith::BitcastOp::create(rewriter, loc, bb.f32, result);
    // f16, bf16, f64: from the f32, exactly (e4m3 fits every one of them).
    if (op.getType() != bb.f32)
      widened = op.getType().getIntOrFloatBitWidth() > 32
                    ? Value(arith::ExtFOp::create(rewriter, loc, op.getType(),
                                                  widened))
                    : Value(arith::TruncFOp::create(rewriter, loc, op.getType(),
                                                    widened));
    rewriter.replaceOp(op, widened);
    return success();
  }
};

struct ExpandE4M3TruncF : OpRewritePattern<arith::TruncFOp> {
  using OpRewritePattern::OpRewritePattern;
  LogicalResult matchAndRewrite(arith::TruncFOp op,
                                PatternRewriter &rewriter) const override {
    Type outType = op.getType();
    if (!isE4M3(outType))
      return failure();
    Location loc = op.getLoc();
    BitBuilder bb{rewriter, loc, rewriter.getI32Type(), rewriter.getF32Type()};
    Value x = op.getIn();
    // f16 / bf16 sources widen to f32 exactly first; f64 would round twice.
    if (x.getType().getIntOrFloatBitWidth() > 32)
      return rewriter.notifyMatchFailure(op, "f64 to e4m3 is not supported");
    if (x.getType() != bb.f32)
      x = arith::ExtFOp::create(rewriter, loc, bb.f32, x);
    Value bits = arith::BitcastOp::create(rewriter, loc, bb.i32, x);
    Value sign = bb.andi(bb.shr(bits, 24), 0x80);
    Value magnitude = bb.andi(bits, 0x7fffffff);
    // |x| >= 2^-6: round the 23-bit mantissa to 3 bits, nearest even, then
    // rebase the exponent (127 - 7 = 120). Unsigned wrap-around for the
    // largest magnitudes lands far above 0x7e, as it should.
    Value lsb = bb.andi(bb.shr(magnitude, 20), 1);
    Value rounded =
        bb.shr(bb.add(bb.add(magnitude, bb.int32(0x7ffff)), lsb), 20);
    Value normal =
        arith::SubIOp::create(rewriter, loc, rounded, bb.int32(120 << 3));
    // |x| < 2^-6: |x| * 2^9 rounded to an integer (nearest even, by adding
    // and subtracting 2^23) is the encoding itself, 8 meaning 2^-6.
    Value absX = arith::BitcastOp::create(rewriter, loc, bb.f32, magnitude);
    Value scaled =
        arith::MulFOp::create(rewriter, loc, absX, bb.float32(0x1p9));
    Value integral = arith::SubFOp::create(
        rewriter, loc,
        arith::AddFOp::create(rewriter, loc, scaled, bb.float32(0x1p23)),
        bb.float32(0x1p23));
    Value subnormal = arith::FPToUIOp::create(rewriter, loc, bb.i32, integral);
    Value result =
        bb.select(bb.cmp(arith::CmpIPredicate::ult, magnitude, 0x3c800000),
                  subnormal, normal);
    // Past 448 (0x7e) after rounding, or NaN: the NaN encoding.
    Value overflow = arith::OrIOp::create(
        rewriter, loc, bb.cmp(arith::CmpIPredicate::ugt, result, 0x7e),
        bb.cmp(arith::CmpIPredicate::ugt, magnitude, 0x7f800000));
    result = bb.select(overflow, bb.int32(0x7f), result);
    result = arith::OrIOp::create(rewriter, loc, result, sign);
    Value byte =
        arith::TruncIOp::create(rewriter, loc, rewriter.getI8Type(), result);
    rewriter.replaceOpWithNewOp<arith::BitcastOp>(op, outType, byte);
    return success();
  }
};

struct FAExpandFP8CastsPass
    : fa::impl::FAExpandFP8CastsBase<FAExpandFP8CastsPass> {
  void runOnOperation() override {
    RewritePatternSet patterns(&getContext());
    patterns.add<ExpandE4M3ExtF, ExpandE4M3TruncF>(&getContext());
    if (failed(applyPatternsGreedily(getOperation(), std::move(patterns))))
      signalPassFailure();
  }
};

} // namespace
