//===- Modifications.cpp - score_mod and mask_mod at the fagpu level ------===//
//
// The modification regions fagpu.attention and fagpu.modify_scores carry:
// which ops the sm_90a kernel lowers in them, and their verifier.
//
//===----------------------------------------------------------------------===//

#include "fa/Dialect/FA/IR/FAOps.h"
#include "fa/Dialect/FAGPU/IR/FAGPU.h"

#include "mlir/Dialect/Arith/IR/Arith.h"
#include "mlir/Dialect/Math/IR/Math.h"
#include "mlir/Dialect/Tensor/IR/Tensor.h"
#include "mlir/IR/Matchers.h"

using namespace mlir;

Operation *mlir::fagpu::unsupportedModificationOp(Region &region) {
  Operation *found = nullptr;
  region.walk([&](Operation *op) {
    if (isa<YieldOp>(op))
      return WalkResult::advance();
    // arith's ops have LLVM lowerings (its ceil and floor divisions once
    // expanded: fa-map-to-gpu expands them); of math's, the f32 ones that
    // map to the SFU's approximations or to exact NVPTX instructions do.
    bool arith =
        isa<arith::ArithDialect>(op->getDialect()) &&
        !isa<arith::CeilDivSIOp, arith::CeilDivUIOp, arith::FloorDivSIOp>(op);
    bool math =
        isa<math::TanhOp, math::ExpOp, math::Exp2Op, math::LogOp, math::Log2Op,
            math::AbsFOp, math::SqrtOp, math::FmaOp>(op) &&
        llvm::all_of(op->getOperandTypes(), [](Type t) { return t.isF32(); });
    // A capture is read by tensor.extract and sized by tensor.dim of a
    // constant dim (its static size).
    bool capture = false;
    if (auto extract = dyn_cast<tensor::ExtractOp>(op))
      capture = isa<BlockArgument>(extract.getTensor());
    if (auto dim = dyn_cast<tensor::DimOp>(op))
      capture = isa<BlockArgument>(dim.getSource()) &&
                matchPattern(dim.getIndex(), m_Constant());
    bool lowered = (arith || math || capture) && op->getNumRegions() == 0;
    if (lowered)
      return WalkResult::advance();
    found = op;
    return WalkResult::interrupt();
  });
  return found;
}

StringRef mlir::fagpu::supportedModificationMathOps() {
  return "math.tanh, math.exp, math.exp2, math.log, math.log2, math.absf, "
         "math.sqrt and math.fma of f32, and reads of captures";
}

std::optional<std::string> mlir::fagpu::checkCaptureType(Type type) {
  auto shaped = dyn_cast<ShapedType>(type);
  if (!shaped || !shaped.hasStaticShape())
    return std::string("a capture must have a static shape");
  // The kernel's index arithmetic is 32-bit.
  if (llvm::any_of(shaped.getShape(),
                   [](int64_t size) { return size >= (int64_t(1) << 31); }))
    return std::string("a capture's dims must be below 2^31");
  if (auto memref = dyn_cast<MemRefType>(type);
      memref && !memref.getLayout().isIdentity())
    return std::string("a capture must be contiguous (identity layout)");
  Type element = shaped.getElementType();
  if (!isa<Float32Type, Float16Type, BFloat16Type>(element) &&
      !(element.isSignlessInteger() &&
        llvm::is_contained({8u, 32u, 64u}, element.getIntOrFloatBitWidth())))
    return std::string("a capture's elements must be f32, f16, bf16, i8, "
                       "i32 or i64");
  return std::nullopt;
}

/// One region: its block's arguments are `leading` then `captures`, it ends
/// in one fagpu.yield of `yielded`, and its ops are lowered and use only its
/// own values.
static LogicalResult verifyRegion(Operation *op, Region &region, StringRef name,
                                  ArrayRef<Type> leading, TypeRange captures,
                                  Type yielded) {
  if (region.empty())
    return success();
  if (!region.hasOneBlock())
    return op->emitOpError() << "expected " << name << " to have one block";
  Block &block = region.front();
  SmallVector<Type> expected(leading);
  llvm::append_range(expected, captures);
  if (failed(fa::verifyRegionArguments(op, block, name, expected)))
    return failure();
  auto yield = dyn_cast<fagpu::YieldOp>(block.back());
  if (!yield || yield.getValue().getType() != yielded)
    return op->emitOpError() << "expected " << name
                             << " to end in fagpu.yield of one " << yielded;
  if (Operation *unsupported = fagpu::unsupportedModificationOp(region))
    return unsupported->emitOpError()
           << "in " << name << " has no sm_90a lowering (arith ops and "
           << fagpu::supportedModificationMathOps() << ")";
  WalkResult walk = region.walk([&](Operation *inner) {
    for (Value operand : inner->getOperands())
      if (!region.isAncestor(operand.getParentRegion())) {
        inner->emitOpError()
            << "in " << name << " uses a value defined outside it";
        return WalkResult::interrupt();
      }
    return WalkResult::advance();
  });
  return failure(walk.wasInterrupted());
}

LogicalResult mlir::fagpu::verifyModificationRegions(Operation *op,
                                                     Region &scoreMod,
                                                     Region &maskMod,
                                                     TypeRange captures) {
  Builder b(op->getContext());
  Type index = b.getIndexType();
  Type indices[] = {index, index, index, index};
  Type scoreArgs[] = {b.getF32Type(), index, index, index, index};
  SmallVector<Type> tensors;
  for (Type capture : captures) {
    if (std::optional<std::string> why = checkCaptureType(capture))
      return op->emitOpError() << *why << ", got " << capture;
    auto shaped = cast<ShapedType>(capture);
    tensors.push_back(
        RankedTensorType::get(shaped.getShape(), shaped.getElementType()));
  }
  if (scoreMod.empty() && maskMod.empty() && !captures.empty())
    return op->emitOpError("expected captures only with a score_mod or "
                           "mask_mod region that reads them");
  return failure(failed(verifyRegion(op, scoreMod, "score_mod", scoreArgs,
                                     tensors, b.getF32Type())) ||
                 failed(verifyRegion(op, maskMod, "mask_mod", indices, tensors,
                                     b.getI1Type())));
}
