//===- Modifications.cpp - score_mod and mask_mod at the fagpu level ------===//
//
// The modification regions fagpu.attention and fagpu.modify_scores carry:
// which ops the sm_90a kernel lowers in them, and their verifier.
//
//===----------------------------------------------------------------------===//

#include "fa/Dialect/FAGPU/IR/FAGPU.h"

#include "mlir/Dialect/Arith/IR/Arith.h"
#include "mlir/Dialect/Math/IR/Math.h"

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
            math::AbsFOp, math::SqrtOp>(op) &&
        llvm::all_of(op->getOperandTypes(), [](Type t) { return t.isF32(); });
    bool lowered = (arith || math) && op->getNumRegions() == 0;
    if (lowered)
      return WalkResult::advance();
    found = op;
    return WalkResult::interrupt();
  });
  return found;
}

StringRef mlir::fagpu::supportedModificationMathOps() {
  return "math.tanh, math.exp, math.exp2, math.log, math.log2, math.absf "
         "and math.sqrt of f32";
}

/// One region: its block's arguments are `leading`, it ends in one
/// fagpu.yield of `yielded`, and its ops are lowered and use only its own
/// values.
static LogicalResult verifyRegion(Operation *op, Region &region, StringRef name,
                                  TypeRange leading, Type yielded) {
  if (region.empty())
    return success();
  if (!region.hasOneBlock())
    return op->emitOpError() << "expected " << name << " to have one block";
  Block &block = region.front();
  if (block.getArgumentTypes() != leading) {
    std::string want, got;
    llvm::raw_string_ostream w(want), g(got);
    llvm::interleaveComma(leading, w);
    llvm::interleaveComma(block.getArgumentTypes(), g);
    return op->emitOpError()
           << "expected " << name << "'s block arguments to be (" << want
           << "), got (" << got << ")";
  }
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
                                                     Region &maskMod) {
  Builder b(op->getContext());
  Type index = b.getIndexType();
  Type indices[] = {index, index, index, index};
  Type scoreArgs[] = {b.getF32Type(), index, index, index, index};
  return failure(
      failed(
          verifyRegion(op, scoreMod, "score_mod", scoreArgs, b.getF32Type())) ||
      failed(verifyRegion(op, maskMod, "mask_mod", indices, b.getI1Type())));
}
