//===- WarpgroupToNVVM.h - the kernel-body ops to NVVM ----------*- C++ -*-===//

#ifndef FA_LIB_CONVERSION_FAGPUTONVVM_WARPGROUPTONVVM_H
#define FA_LIB_CONVERSION_FAGPUTONVVM_WARPGROUPTONVVM_H

#include "mlir/IR/BuiltinOps.h"
#include "mlir/IR/PatternMatch.h"

namespace mlir {
class TypeConverter;
namespace fa {

/// Fragments to their registers, shared-memory tiles to (base, offset),
/// pipelines to (base, barrier offset, tile offset).
void populateWarpgroupTypeConversions(TypeConverter &converter);
/// One pattern per kernel-body op of fagpu.
void populateWarpgroupToNVVMPatterns(const TypeConverter &converter,
                                     RewritePatternSet &patterns);
/// Lowers every kernel-body op of `module` (with the scf ops that carry
/// their values) to NVVM, LLVM, arith and scf on scalars.
LogicalResult lowerWarpgroupOps(ModuleOp module);

} // namespace fa
} // namespace mlir

#endif // FA_LIB_CONVERSION_FAGPUTONVVM_WARPGROUPTONVVM_H
