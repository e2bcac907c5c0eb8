//===- FAGPUBlackwellOps.cpp - verifiers of the tcgen05 kernel ops --------===//

#include "fa/Dialect/FAGPU/IR/FAGPU.h"

#include "mlir/IR/Matchers.h"
#include "llvm/Support/MathExtras.h"

using namespace mlir;
using namespace mlir::fagpu;

/// Warps 0-3 are the softmax warpgroup: one thread per TMEM lane.
static constexpr int64_t kSoftmaxWarps = 4;

LogicalResult TcgenRolesOp::verify() {
  int64_t load = getLoadWarp(), mma = getMmaWarp();
  if (load < kSoftmaxWarps || mma < kSoftmaxWarps || load == mma)
    return emitOpError("the load and MMA warps must be two different warps "
                       "after the softmax warpgroup (warps 0-3), got ")
           << load << " and " << mma;
  for (Region *region : getRegions())
    if (region->front().getNumArguments() != 0)
      return emitOpError("the role regions take no arguments");
  return success();
}

LogicalResult CreateBarriersOp::verify() {
  if (getOffset() < 0 || getOffset() % 8 != 0)
    return emitOpError("offset must be a non-negative multiple of 8");
  return success();
}

LogicalResult InitBarriersOp::verify() {
  if (getArrivals().size() != getBarriers().size())
    return emitOpError("expected one arrival count per operand, got ")
           << getArrivals().size() << " for " << getBarriers().size();
  for (auto [value, arrivals] : llvm::zip(getBarriers(), getArrivals())) {
    if (arrivals < 1)
      return emitOpError("arrival counts must be positive");
    if (auto pipeline = dyn_cast<PipelineType>(value.getType())) {
      if (pipeline.isCpAsync())
        return emitOpError("a cp.async (row_major) pipeline has no barriers "
                           "to initialise");
      continue;
    }
    if (!isa<BarriersType>(value.getType()))
      return emitOpError("expected pipelines and barriers, got ")
             << value.getType();
  }
  return success();
}

LogicalResult TmemAllocOp::verify() {
  TmemType tmem = getType();
  int64_t columns = tmem.getColumns();
  // tcgen05.alloc takes a power of two of at least 32 columns.
  if (!tmem.getElementType().isF32() || columns < 32 ||
      !llvm::isPowerOf2_64(columns))
    return emitOpError("tcgen05.alloc allocates f32 columns, a power of two "
                       "from 32 to 512, got ")
           << tmem;
  if (getSlotOffset() < 0 || getSlotOffset() % 4 != 0)
    return emitOpError("slot must be a non-negative multiple of 4");
  if (getAllocWarp() < 0)
    return emitOpError("alloc_warp must be a warp index");
  return success();
}

LogicalResult TmemSliceOp::verify() {
  int64_t from = getTmem().getType().getColumns();
  int64_t columns = getSlice().getType().getColumns();
  APInt column;
  int64_t first = 0;
  if (matchPattern(getColumn(), m_ConstantInt(&column)))
    first = column.getSExtValue();
  if (first < 0 || first + columns > from)
    return emitOpError("columns ")
           << first << " .. " << first + columns << " exceed the region's "
           << from;
  return success();
}

LogicalResult TmemLoadOp::verify() {
  TmemType tmem = getTmem().getType();
  FragmentType result = getResult().getType();
  if (!tmem.getElementType().isF32() || tmem.getCols() % 32 != 0)
    return emitOpError("tcgen05.ld reads f32 regions of whole 32-column "
                       "chunks, got ")
           << tmem;
  if (result.getLayout() != FragmentLayout::Lanes ||
      result.getShape().size() != 2 || result.getCols() != tmem.getCols())
    return emitOpError("result must be the lanes fragment of the region's "
                       "shape, got ")
           << result;
  return success();
}

LogicalResult TmemStoreOp::verify() {
  TmemType tmem = getTmem().getType();
  FragmentType value = getValue().getType();
  if (value.getLayout() != FragmentLayout::Lanes ||
      value.getShape().size() != 2 || value.getCols() != tmem.getCols())
    return emitOpError("expected a lanes fragment of the region's shape, got ")
           << value;
  if (tmem.getColumns() % 32 != 0)
    return emitOpError("tcgen05.st writes whole 32-column chunks, got ")
           << tmem;
  return success();
}
