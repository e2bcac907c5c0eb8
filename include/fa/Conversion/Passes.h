//===- Passes.h - fa conversion passes --------------------------*- C++ -*-===//

#ifndef FA_CONVERSION_PASSES_H
#define FA_CONVERSION_PASSES_H

#include "mlir/Dialect/Arith/IR/Arith.h"
#include "mlir/Dialect/ControlFlow/IR/ControlFlow.h"
#include "mlir/Dialect/GPU/IR/GPUDialect.h"
#include "mlir/Dialect/LLVMIR/LLVMDialect.h"
#include "mlir/Dialect/LLVMIR/NVVMDialect.h"
#include "mlir/Dialect/Linalg/IR/Linalg.h"
#include "mlir/Dialect/Math/IR/Math.h"
#include "mlir/Dialect/MemRef/IR/MemRef.h"
#include "mlir/Dialect/SCF/IR/SCF.h"
#include "fa/Dialect/FAGPU/IR/FAGPU.h"
#include "mlir/Pass/Pass.h"

namespace mlir {
class RewritePatternSet;
namespace fa {

#define GEN_PASS_DECL
#include "fa/Conversion/Passes.h.inc"

#define GEN_PASS_REGISTRATION
#include "fa/Conversion/Passes.h.inc"

/// Patterns expanding every fa tile op into scf/arith/math/memref code.
void populateFAToLoopsPatterns(RewritePatternSet &patterns);
/// The backward's tile ops (FABackwardOps.td), one pattern each.
void populateBackwardToLoopsPatterns(RewritePatternSet &patterns);

} // namespace fa
} // namespace mlir

#endif // FA_CONVERSION_PASSES_H
