//===- Passes.h - fagpu passes ----------------------------------*- C++ -*-===//

#ifndef FA_DIALECT_FAGPU_TRANSFORMS_PASSES_H
#define FA_DIALECT_FAGPU_TRANSFORMS_PASSES_H

#include "fa/Dialect/FAGPU/IR/Choices.h"
#include "fa/Dialect/FAGPU/IR/FAGPU.h"
#include "mlir/Dialect/Func/IR/FuncOps.h"
#include "mlir/Pass/Pass.h"

namespace mlir::fagpu {
#define GEN_PASS_DECL
#include "fa/Dialect/FAGPU/Transforms/Passes.h.inc"

#define GEN_PASS_REGISTRATION
#include "fa/Dialect/FAGPU/Transforms/Passes.h.inc"
} // namespace mlir::fagpu

#endif // FA_DIALECT_FAGPU_TRANSFORMS_PASSES_H
