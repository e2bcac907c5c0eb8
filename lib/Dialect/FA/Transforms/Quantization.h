//===- Quantization.h - helpers of the fp8 quantisation passes --*- C++ -*-===//
//
// fa-quantize-fp8 makes an attention's e4m3 inputs with fa.quantize ops;
// fa-incoherent-processing and fa-block-quantize find and rewrite them.
//
//===----------------------------------------------------------------------===//

#ifndef FA_LIB_DIALECT_FA_TRANSFORMS_QUANTIZATION_H
#define FA_LIB_DIALECT_FA_TRANSFORMS_QUANTIZATION_H

#include "fa/Dialect/FA/IR/FAOps.h"

#include "mlir/Dialect/MemRef/IR/MemRef.h"

namespace mlir::fa {

/// A fresh buffer of `shape` (dynamic sizes: those of `like`'s dims at the
/// same positions, `like` having at least as many dims) in `element`.
inline Value allocLike(OpBuilder &b, Location loc, Value like,
                       ArrayRef<int64_t> shape, Type element) {
  SmallVector<Value> sizes;
  for (auto [dim, size] : llvm::enumerate(shape))
    if (ShapedType::isDynamic(size))
      sizes.push_back(memref::DimOp::create(b, loc, like, dim));
  return memref::AllocOp::create(b, loc, MemRefType::get(shape, element),
                                 sizes);
}

/// The fa.quantize in the same block before `attention` that writes
/// `buffer` (an e4m3 operand of it), or null.
inline QuantizeOp quantizeWriting(Value buffer, AttentionOp attention) {
  for (Operation *user : buffer.getUsers())
    if (auto quantize = dyn_cast<QuantizeOp>(user))
      if (quantize.getOutput() == buffer &&
          quantize->getBlock() == attention->getBlock() &&
          quantize->isBeforeInBlock(attention))
        return quantize;
  return nullptr;
}

/// Calls `rewrite` on every fa.attention under `root` whose inputs are e4m3
/// (`fp8`) or not, collected first since `rewrite` changes the IR around
/// them; stops at the first failure.
inline LogicalResult
forEachAttention(Operation *root, bool fp8,
                 llvm::function_ref<LogicalResult(AttentionOp)> rewrite) {
  SmallVector<AttentionOp> ops;
  root->walk([&](AttentionOp op) {
    if (op.isFP8() == fp8)
      ops.push_back(op);
  });
  for (AttentionOp op : ops)
    if (failed(rewrite(op)))
      return failure();
  return success();
}

} // namespace mlir::fa

#endif // FA_LIB_DIALECT_FA_TRANSFORMS_QUANTIZATION_H
