//===- Passes.h - fa dialect passes -----------------------------*- C++ -*-===//

#ifndef FA_DIALECT_FA_TRANSFORMS_PASSES_H
#define FA_DIALECT_FA_TRANSFORMS_PASSES_H

#include "fa/Dialect/FA/IR/FAOps.h"
#include "mlir/Dialect/Affine/IR/AffineOps.h"
#include "mlir/Dialect/Bufferization/IR/Bufferization.h"
#include "mlir/Dialect/Func/IR/FuncOps.h"
#include "mlir/Dialect/Linalg/IR/Linalg.h"
#include "mlir/Dialect/SCF/IR/SCF.h"
#include "mlir/Dialect/Tensor/IR/Tensor.h"
#include "mlir/IR/PatternMatch.h"
#include "mlir/Pass/Pass.h"

namespace mlir {
namespace fa {

#define GEN_PASS_DECL
#include "fa/Dialect/FA/Transforms/Passes.h.inc"

#define GEN_PASS_REGISTRATION
#include "fa/Dialect/FA/Transforms/Passes.h.inc"

/// The loop orders that lower a tiled, buffer-form fa.attention.
enum class LoopOrder { FA1, FA2 };

/// Replaces `op` (memref form, with block_r/block_c) by the loop nest of the
/// given loop order built from fa tile ops. Emits an error on `op` and fails
/// when the op is not ready (tensor form, no tiles).
LogicalResult lowerAttention(RewriterBase &rewriter, AttentionOp op,
                             LoopOrder order);

} // namespace fa
} // namespace mlir

#endif // FA_DIALECT_FA_TRANSFORMS_PASSES_H
