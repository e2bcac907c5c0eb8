//===- KernelLowerings.h - one kernel lowering per target -------*- C++ -*-===//

#ifndef FA_LIB_CONVERSION_FAGPUTONVVM_KERNELLOWERINGS_H
#define FA_LIB_CONVERSION_FAGPUTONVVM_KERNELLOWERINGS_H

#include "fa/Dialect/FAGPU/IR/FAGPU.h"
#include "mlir/Dialect/GPU/IR/GPUDialect.h"
#include "mlir/Dialect/LLVMIR/LLVMDialect.h"
#include "mlir/IR/BuiltinOps.h"

#include <string>

namespace mlir::fa {

/// Each replaces every fagpu.attention of its target in `module` by the
/// launch of the kernel its schedule describes, built into the module's
/// `fa_kernels` gpu.module; errors are diagnostics on the op. Each writes
/// the kernel body in fagpu's kernel-body ops (fagpu-build-kernels),
/// lowered by lowerWarpgroupOps.
LogicalResult buildSM80Kernels(ModuleOp module);
LogicalResult buildSM90Kernels(ModuleOp module);
LogicalResult buildSM100Kernels(ModuleOp module);
/// The same for every fagpu.attention_backward (SM80Backward.cpp).
LogicalResult buildSM80BackwardKernels(ModuleOp module);

/// The e4m3 kernels' V layout kernel (V^T [B, Hkv, D, Nk_128] from a
/// strided V, fagpu::valueLayoutParams) for head dim `headDim`, named
/// `name`, built into `module`; and the name the kernels of one head dim
/// share (SM90ValueLayout.cpp).
LLVM::LLVMFuncOp buildSM90ValueLayoutKernel(OpBuilder &b, Location loc,
                                            gpu::GPUModuleOp module,
                                            int64_t headDim, StringRef name);
std::string sm90ValueLayoutKernelName(int64_t headDim);

/// The KV-cache kernels' append kernel (the new keys and values written
/// into the cache and the lengths the attention reads,
/// fagpu::kvAppendParams) for head dim `headDim` (a multiple of
/// fagpu::kKVAppendColumnsPerThread), f16 or bf16 rows, a 16-bit or an e4m3
/// cache, named `name`, built into `module`; and the name the kernels of
/// one such kind share (SM90KVAppend.cpp).
LLVM::LLVMFuncOp buildSM90KVAppendKernel(OpBuilder &b, Location loc,
                                         gpu::GPUModuleOp module,
                                         int64_t headDim, bool bf16,
                                         bool e4m3Cache, StringRef name);
std::string sm90KVAppendKernelName(int64_t headDim, bool bf16, bool e4m3Cache);

/// The backward's kernels around its main one, for head dim `headDim`
/// (a multiple of 16), f16 or bf16 rows, named `name`, built into `module`
/// (SM80BackwardRows.cpp): the preprocess (row_dots = rowsum(dO o O),
/// dq_accum = 0, and with `deterministic` the turn counters = 0,
/// fagpu::backwardPreprocessParams) and dQ's conversion from its f32
/// accumulator (fagpu::backwardConvertParams).
LLVM::LLVMFuncOp buildSM80BackwardPreprocessKernel(OpBuilder &b, Location loc,
                                                   gpu::GPUModuleOp module,
                                                   StringRef name,
                                                   int64_t headDim, bool bf16,
                                                   bool deterministic);
LLVM::LLVMFuncOp buildSM80BackwardConvertKernel(OpBuilder &b, Location loc,
                                                gpu::GPUModuleOp module,
                                                StringRef name, int64_t headDim,
                                                bool bf16);

} // namespace mlir::fa

#endif // FA_LIB_CONVERSION_FAGPUTONVVM_KERNELLOWERINGS_H
