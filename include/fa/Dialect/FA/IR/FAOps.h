//===- FAOps.h - fa dialect operations --------------------------*- C++ -*-===//

#ifndef FA_DIALECT_FA_IR_FAOPS_H
#define FA_DIALECT_FA_IR_FAOPS_H

#include "fa/Dialect/FA/IR/FADialect.h"
#include "mlir/Bytecode/BytecodeOpInterface.h"
#include "mlir/IR/BuiltinTypes.h"
#include "mlir/IR/OpDefinition.h"
#include "mlir/Interfaces/SideEffectInterfaces.h"

#define GET_OP_CLASSES
#include "fa/Dialect/FA/IR/FAOps.h.inc"

namespace mlir::fa {
/// Checks that the block of `op`'s region `name` (a score_mod or mask_mod,
/// at the fa or the fagpu level) takes `expected`: an error at `op` that
/// lists both otherwise, `detail` after the expected list.
LogicalResult verifyRegionArguments(Operation *op, Block &block, StringRef name,
                                    TypeRange expected, StringRef detail = "");
} // namespace mlir::fa

#endif // FA_DIALECT_FA_IR_FAOPS_H
