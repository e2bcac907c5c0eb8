//===- KernelLowerings.h - one kernel lowering per target -------*- C++ -*-===//

#ifndef FA_LIB_CONVERSION_FAGPUTONVVM_KERNELLOWERINGS_H
#define FA_LIB_CONVERSION_FAGPUTONVVM_KERNELLOWERINGS_H

#include "fa/Dialect/FAGPU/IR/FAGPU.h"
#include "mlir/IR/BuiltinOps.h"

namespace mlir::fa {

/// Each replaces every fagpu.attention of its target in `module` by the
/// launch of the kernel its schedule describes, built into the module's
/// `fa_kernels` gpu.module; errors are diagnostics on the op. sm_80 and
/// sm_100a write NVVM directly; sm_90a writes the kernel body in fagpu's
/// warpgroup-level ops (fagpu-build-kernels), lowered by lowerWarpgroupOps.
LogicalResult lowerSM80Kernels(ModuleOp module);
LogicalResult buildSM90Kernels(ModuleOp module);
LogicalResult lowerSM100Kernels(ModuleOp module);

} // namespace mlir::fa

#endif // FA_LIB_CONVERSION_FAGPUTONVVM_KERNELLOWERINGS_H
