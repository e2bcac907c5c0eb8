//===- NVVMEmitter.cpp - scalar and warp helpers
//----------------------------===//
//
// Out-of-line definitions of NVVMEmitter.h (see there).
//
//===----------------------------------------------------------------------===//

#include "NVVMEmitter.h"

using namespace mlir;

namespace mlir::fa {

Value NVVMEmitter::asmF32(StringRef text, Value x) {
  return LLVM::InlineAsmOp::create(b, loc, f32, ValueRange{x}, text, "=f,f",
                                   /*has_side_effects=*/false,
                                   /*is_align_stack=*/false,
                                   LLVM::tailcallkind::TailCallKind::None,
                                   /*asm_dialect=*/LLVM::AsmDialectAttr(),
                                   /*operand_attrs=*/ArrayAttr())
      .getResult(0);
}

PolyExp2Floor NVVMEmitter::polyExp2Floor(OpBuilder &b, Location loc,
                                         Value clamped) {
  Type f32 = b.getF32Type(), i32 = b.getI32Type();
  Value magic = arith::ConstantOp::create(b, loc, b.getF32FloatAttr(0x1.8p23f));
  Value shifted = LLVM::CallIntrinsicOp::create(
                      b, loc, f32, b.getStringAttr("llvm.nvvm.add.rm.f"),
                      ValueRange{clamped, magic})
                      .getResult(0);
  Value whole = arith::SubFOp::create(b, loc, shifted, magic);
  Value step = arith::ShLIOp::create(
      b, loc, arith::BitcastOp::create(b, loc, i32, shifted),
      arith::ConstantIntOp::create(b, loc, 23, 32));
  return {whole, step};
}

Value NVVMEmitter::packPair(Value lo, Value hi) {
  auto pairF32 = VectorType::get({2}, f32);
  Value v = LLVM::PoisonOp::create(b, loc, pairF32);
  v = LLVM::InsertElementOp::create(b, loc, v, lo, c32(0));
  v = LLVM::InsertElementOp::create(b, loc, v, hi, c32(1));
  Value narrow = LLVM::FPTruncOp::create(b, loc, halfPair, v);
  return LLVM::BitcastOp::create(b, loc, i32, narrow);
}

Value NVVMEmitter::warpUniform(Value v) {
  return NVVM::ShflOp::create(
      b, loc, i32, c32(-1), v, c32(0), c32(0x1f),
      NVVM::ShflKindAttr::get(b.getContext(), NVVM::ShflKind::idx), UnitAttr());
}

Value NVVMEmitter::shflXor(Value v, int64_t mask) {
  return NVVM::ShflOp::create(
      b, loc, v.getType(), c32(-1), v, c32(mask), c32(0x1f),
      NVVM::ShflKindAttr::get(b.getContext(), NVVM::ShflKind::bfly),
      UnitAttr());
}

} // namespace mlir::fa
