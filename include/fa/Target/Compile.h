//===- Compile.h - fa.attention to PTX, cubin and launch metadata -*- C++
//-*-===//

#ifndef FA_TARGET_COMPILE_H
#define FA_TARGET_COMPILE_H

#include "fa/Target/KernelOptions.h"

#include "mlir/IR/BuiltinOps.h"
#include "mlir/IR/MLIRContext.h"
#include "mlir/IR/OwningOpRef.h"

#include <string>
#include <vector>

namespace mlir {
namespace fa {

/// O's element type: the inputs' for f16/bf16, KernelOptions::outDtype (f16
/// or bf16, default bf16) for e4m3.
std::string outputDtype(const KernelOptions &options);

struct CompiledKernel {
  std::string name;
  std::string kernelIR; // the gpu.module as built by convert-fagpu-to-nvvm
  std::string hostIR;   // the host function with its gpu.launch_func
  std::string ptx;
  std::string cubin;    // empty when ptxas was not run
  std::string ptxasLog; // ptxas -v: registers, shared memory, spills
  std::string metadata; // JSON: kernel, grid, block, shared memory, params
  /// One entry per fa.attention of the module, in program order: the kernel
  /// it launches (all in `ptx` / `cubin`) and its launch metadata. `name`
  /// and `metadata` above are the first's.
  struct Launch {
    std::string name, metadata;
  };
  std::vector<Launch> launches;
};

/// The module `fa-compile` starts from: one function holding a memref-form
/// fa.attention with dynamic batch, heads and lengths.
OwningOpRef<ModuleOp> buildAttentionModule(MLIRContext &context,
                                           const KernelOptions &options);

/// fa.attention -> the tile level -> fagpu -> LLVM/NVVM -> PTX (LLVM NVPTX via
/// gpu-module-to-binary) -> cubin (ptxas) + launch metadata. Errors are
/// reported as diagnostics on `context`.
FailureOr<CompiledKernel> compileKernel(MLIRContext &context,
                                        const KernelOptions &options);

/// The same for a caller's module holding any number of memref-form (or
/// tensor-form) fa.attention ops inside func.funcs; each op's head dim,
/// dtype, mask and scale are its own, each becomes a kernel launch (equal
/// kernels are built once) with its own metadata in `launches`. The module
/// is lowered in place.
FailureOr<CompiledKernel> compileModule(ModuleOp module,
                                        const KernelOptions &options);

} // namespace fa
} // namespace mlir

#endif // FA_TARGET_COMPILE_H
