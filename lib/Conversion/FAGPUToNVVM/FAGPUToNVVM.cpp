//===- FAGPUToNVVM.cpp - fagpu.attention to NVVM kernels and launches -----===//

#include "fa/Conversion/Passes.h"

#include "KernelLowerings.h"

namespace mlir::fa {
#define GEN_PASS_DEF_CONVERTFAGPUTONVVM
#include "fa/Conversion/Passes.h.inc"
} // namespace mlir::fa

using namespace mlir;
using namespace mlir::fa;

namespace {

struct ConvertFAGPUToNVVMPass
    : fa::impl::ConvertFAGPUToNVVMBase<ConvertFAGPUToNVVMPass> {
  void runOnOperation() override {
    ModuleOp module = getOperation();
    for (auto lower : {lowerSM80Kernels, lowerSM90Kernels, lowerSM100Kernels})
      if (failed(lower(module)))
        return signalPassFailure();
  }
};

} // namespace
