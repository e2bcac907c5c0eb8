//===- NVVMEmitter.h - scalar and warp helpers for the GPU kernels -*- C++
//-*-===//
//
// The small vocabulary both tensor-core kernels (mma.sync on sm_80,
// wgmma on sm_90a) are written in: i32/f32 arithmetic, MUFU exp2 and the
// FA4 software exp2, quad shuffles, f16/bf16 packing, shared-memory
// addresses. Kept in one place so the two kernels' softmax arithmetic
// agrees instruction for instruction.
//
//===----------------------------------------------------------------------===//

#ifndef FA_LIB_CONVERSION_COMMON_NVVMEMITTER_H
#define FA_LIB_CONVERSION_COMMON_NVVMEMITTER_H

#include "fa/Dialect/FA/IR/PolyExp2.h"
#include "fa/Support/IRArithmetic.h"

#include "mlir/Dialect/Arith/IR/Arith.h"
#include "mlir/Dialect/ControlFlow/IR/ControlFlowOps.h"
#include "mlir/Dialect/LLVMIR/LLVMDialect.h"
#include "mlir/Dialect/LLVMIR/NVVMDialect.h"
#include "mlir/Dialect/Math/IR/Math.h"
#include "mlir/IR/Builders.h"

namespace mlir::fa {

constexpr double kLog2E = 1.4426950408889634;
constexpr double kLn2 = 0.6931471805599453;

class NVVMEmitter {
public:
  NVVMEmitter(OpBuilder &b, Location loc, bool bf16)
      : b(b), loc(loc), i32(b.getI32Type()), i64(b.getI64Type()),
        f32(b.getF32Type()),
        half(bf16 ? Type(b.getBF16Type()) : Type(b.getF16Type())),
        halfPair(VectorType::get({2}, half)),
        genericPtr(LLVM::LLVMPointerType::get(b.getContext(), 0)),
        globalPtr(LLVM::LLVMPointerType::get(b.getContext(), 1)),
        sharedPtr(LLVM::LLVMPointerType::get(b.getContext(), 3)) {}

protected:
  // Scalars.
  Value c32(int64_t v) { return arith::ConstantIntOp::create(b, loc, v, 32); }
  Value c64(int64_t v) { return arith::ConstantIntOp::create(b, loc, v, 64); }
  Value cf(double v) {
    return arith::ConstantOp::create(b, loc, b.getF32FloatAttr(float(v)));
  }
  Value add(Value x, Value y) { return arith::AddIOp::create(b, loc, x, y); }
  Value sub(Value x, Value y) { return arith::SubIOp::create(b, loc, x, y); }
  Value mul(Value x, Value y) { return arith::MulIOp::create(b, loc, x, y); }
  Value divu(Value x, Value y) { return arith::DivUIOp::create(b, loc, x, y); }
  Value remu(Value x, Value y) { return arith::RemUIOp::create(b, loc, x, y); }
  Value minu(Value x, Value y) { return arith::MinUIOp::create(b, loc, x, y); }
  Value ext64(Value x) { return arith::ExtUIOp::create(b, loc, i64, x); }
  Value ult(Value x, Value y) {
    return arith::CmpIOp::create(b, loc, arith::CmpIPredicate::ult, x, y);
  }
  Value ule(Value x, Value y) {
    return arith::CmpIOp::create(b, loc, arith::CmpIPredicate::ule, x, y);
  }
  Value eq(Value x, Value y) {
    return arith::CmpIOp::create(b, loc, arith::CmpIPredicate::eq, x, y);
  }
  Value andi(Value x, Value y) { return arith::AndIOp::create(b, loc, x, y); }
  /// Stops the kernel unless `ok`: cf.assert with the rule's `message`,
  /// which convert-fagpu-to-nvvm lowers to a trap (the launch fails and the
  /// context with it, as after torch's device-side asserts; no message:
  /// DeviceAssertLowering says why). For inputs that live on the device
  /// (KV lengths, block tables, prefix sums), which the host could check
  /// only by synchronising.
  void deviceAssert(Value ok, StringRef message) {
    cf::AssertOp::create(b, loc, ok, message);
  }
  Value select(Value c, Value x, Value y) {
    return arith::SelectOp::create(b, loc, c, x, y);
  }
  Value fmul(Value x, Value y) { return arith::MulFOp::create(b, loc, x, y); }
  Value fadd(Value x, Value y) { return arith::AddFOp::create(b, loc, x, y); }
  Value fmax(Value x, Value y) {
    return arith::MaxNumFOp::create(b, loc, x, y);
  }
  Value fma(Value x, Value y, Value z) {
    return math::FmaOp::create(b, loc, x, y, z);
  }
  /// exp2 on the MUFU unit.
  Value ex2(Value x) { return asmF32("ex2.approx.ftz.f32 $0, $1;", x); }
  Value lg2(Value x) { return asmF32("lg2.approx.ftz.f32 $0, $1;", x); }
  Value tanhApprox(Value x) { return asmF32("tanh.approx.f32 $0, $1;", x); }
  Value asmF32(StringRef text, Value x);

  /// FA4 software exp2 on the FMA pipe (the tile level's polynomial).
  Value polyExp2(Value y, int64_t degree) {
    return emitPolyExp2(b, loc, y, degree, polyExp2Floor);
  }

  /// floor(y) for the software exp2 without the conversion pipe: y +
  /// 1.5 * 2^23 rounded toward -inf is 1.5 * 2^23 + floor(y) (an f32 there
  /// has unit steps), so its low mantissa bits hold floor(y) in two's
  /// complement and (bits << 23) is floor(y) << 23 modulo 2^32 (the high
  /// bits shift out). One FADD.RM, one FADD and a shift, all on the FMA
  /// and ALU pipes; math.floor + fptosi would be FRND and F2I, conversion
  /// instructions at the MUFU's rate (16 a clock an SM), which the software
  /// exp2 is there to relieve.
  static PolyExp2Floor polyExp2Floor(OpBuilder &b, Location loc, Value clamped);

  // Memory.
  Value gep(Type ptrType, Type elt, Value base, Value index) {
    return LLVM::GEPOp::create(b, loc, ptrType, elt, base, ValueRange{index});
  }

  /// Packs two f32 into the i32 holding an f16/bf16 pair (low = first).
  Value packPair(Value lo, Value hi);

  /// `v` (the same in every lane) read from lane 0: ptxas then knows it is
  /// warp-uniform and keeps what is derived from it -- the wgmma
  /// descriptors above all -- in uniform registers instead of moving it
  /// there (R2UR) before every use.
  Value warpUniform(Value v);

  /// Butterfly shuffle across the lanes of a warp.
  Value shflXor(Value v, int64_t mask);

  OpBuilder &b;
  Location loc;
  Type i32, i64, f32, half, halfPair;
  Type genericPtr, globalPtr, sharedPtr;
};

} // namespace mlir::fa

#endif // FA_LIB_CONVERSION_COMMON_NVVMEMITTER_H
