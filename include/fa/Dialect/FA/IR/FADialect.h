//===- FADialect.h - The fa dialect -----------------------------*- C++ -*-===//

#ifndef FA_DIALECT_FA_IR_FADIALECT_H
#define FA_DIALECT_FA_IR_FADIALECT_H

#include "mlir/Dialect/Arith/IR/Arith.h"
#include "mlir/Dialect/Math/IR/Math.h"
#include "mlir/Dialect/MemRef/IR/MemRef.h"
#include "mlir/Dialect/Tensor/IR/Tensor.h"
#include "mlir/IR/Dialect.h"

#include "fa/Dialect/FA/IR/FAOpsDialect.h.inc"

namespace mlir::fa {
/// The attribute on the loads of a KV cache's operands in the FA2 loop nest
/// (fa-lower-fa2): "kv_lengths" on the read of a sequence's key count,
/// "block_table" on the read of a K/V block's page. fa-map-to-gpu finds the
/// operands through it.
inline constexpr const char kKVCacheAttr[] = "fa.kv_cache";
} // namespace mlir::fa

#endif // FA_DIALECT_FA_IR_FADIALECT_H
