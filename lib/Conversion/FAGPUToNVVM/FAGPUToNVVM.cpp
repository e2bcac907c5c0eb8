//===- FAGPUToNVVM.cpp - fagpu.attention to NVVM kernels and launches -----===//

#include "fa/Conversion/Passes.h"

#include "KernelLowerings.h"
#include "WarpgroupToNVVM.h"

namespace mlir::fa {
#define GEN_PASS_DEF_CONVERTFAGPUTONVVM
#define GEN_PASS_DEF_FAGPUBUILDKERNELS
#include "fa/Conversion/Passes.h.inc"
} // namespace mlir::fa

using namespace mlir;
using namespace mlir::fa;

namespace {

struct FAGPUBuildKernelsPass
    : fa::impl::FAGPUBuildKernelsBase<FAGPUBuildKernelsPass> {
  void runOnOperation() override {
    for (auto build : {buildSM80Kernels, buildSM90Kernels, buildSM100Kernels,
                       buildSM80BackwardKernels})
      if (failed(build(getOperation())))
        return signalPassFailure();
  }
};

struct ConvertFAGPUToNVVMPass
    : fa::impl::ConvertFAGPUToNVVMBase<ConvertFAGPUToNVVMPass> {
  void runOnOperation() override {
    ModuleOp module = getOperation();
    WalkResult unbuilt = module.walk([](Operation *op) {
      if (!isa<fagpu::AttentionOp, fagpu::AttentionBackwardOp>(op))
        return WalkResult::advance();
      op->emitOpError("has no kernel yet: run fagpu-build-kernels before "
                      "convert-fagpu-to-nvvm");
      return WalkResult::interrupt();
    });
    if (unbuilt.wasInterrupted() || failed(lowerWarpgroupOps(module)))
      signalPassFailure();
  }
};

} // namespace
