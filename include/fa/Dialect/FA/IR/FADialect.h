//===- FADialect.h - The fa dialect -----------------------------*- C++ -*-===//

#ifndef FA_DIALECT_FA_IR_FADIALECT_H
#define FA_DIALECT_FA_IR_FADIALECT_H

#include "mlir/Dialect/Arith/IR/Arith.h"
#include "mlir/Dialect/MemRef/IR/MemRef.h"
#include "mlir/IR/Dialect.h"

#include "fa/Dialect/FA/IR/FAOpsDialect.h.inc"

#endif // FA_DIALECT_FA_IR_FADIALECT_H
