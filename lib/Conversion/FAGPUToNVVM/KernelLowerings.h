//===- KernelLowerings.h - one kernel lowering per target -------*- C++ -*-===//

#ifndef FA_LIB_CONVERSION_FAGPUTONVVM_KERNELLOWERINGS_H
#define FA_LIB_CONVERSION_FAGPUTONVVM_KERNELLOWERINGS_H

#include "fa/Dialect/FAGPU/IR/FAGPU.h"
#include "mlir/IR/BuiltinOps.h"

namespace mlir::fa {

/// Each replaces every fagpu.attention of its target in `module` by the
/// launch of the kernel its schedule describes, built into the module's
/// `fa_kernels` gpu.module; errors are diagnostics on the op. Each writes
/// the kernel body in fagpu's kernel-body ops (fagpu-build-kernels),
/// lowered by lowerWarpgroupOps.
LogicalResult buildSM80Kernels(ModuleOp module);
LogicalResult buildSM90Kernels(ModuleOp module);
LogicalResult buildSM100Kernels(ModuleOp module);

} // namespace mlir::fa

#endif // FA_LIB_CONVERSION_FAGPUTONVVM_KERNELLOWERINGS_H
