//===- Pipelines.cpp - flash-mlir pass pipelines --------------------------===//

#include "fa/Pipelines/Pipelines.h"

#include "fa/Conversion/Passes.h"
#include "fa/Dialect/FA/IR/FADialect.h"
#include "fa/Dialect/FA/Transforms/Passes.h"

#include "mlir/InitAllDialects.h"
#include "mlir/InitAllExtensions.h"
#include "mlir/InitAllPasses.h"
#include "mlir/Pass/PassRegistry.h"
#include "llvm/Support/ErrorHandling.h"

using namespace mlir;
using namespace mlir::fa;

void mlir::fa::buildLoopsToLLVMPipeline(OpPassManager &pm) {
  // Everything below is upstream MLIR. bf16 conversions are expanded to
  // integer ops so the JIT needs no soft-float runtime for them.
  static constexpr const char *kTail =
      "one-shot-bufferize{bufferize-function-boundaries},"
      "canonicalize,"
      "convert-linalg-to-loops,"
      "func.func(scf-forall-to-parallel),"
      "lower-affine,"
      "convert-scf-to-cf,"
      "expand-strided-metadata,"
      "lower-affine,"
      "math-expand-ops{ops=tanh},"
      "arith-expand{include-bf16},"
      "finalize-memref-to-llvm,"
      "convert-math-to-llvm,"
      "convert-arith-to-llvm,"
      "convert-index-to-llvm,"
      "convert-cf-to-llvm,"
      "convert-func-to-llvm,"
      "reconcile-unrealized-casts";
  if (failed(parsePassPipeline(kTail, pm, llvm::errs())))
    llvm::report_fatal_error("fa: the built-in CPU pipeline does not parse");
}

void mlir::fa::buildCPUPipeline(OpPassManager &pm,
                                const CPUPipelineOptions &options) {
  OpPassManager &funcPm = pm.nest<func::FuncOp>();
  funcPm.addPass(createFAAttentionToBuffers());
  funcPm.addPass(createFATile(
      FATileOptions{options.sramBudget, options.blockR, options.blockC}));
  if (options.loopOrder == LoopOrder::FA1)
    funcPm.addPass(createFALowerFA1());
  else
    funcPm.addPass(createFALowerFA2());
  if (options.rescaleThreshold >= 0.0)
    pm.addPass(createFAConditionalRescale(FAConditionalRescaleOptions{
        options.rescaleThreshold, options.countRescales}));
  if (options.polyExp2Degree > 0)
    pm.nest<func::FuncOp>().addPass(createFAPolyExp2(
        FAPolyExp2Options{options.polyExp2Degree, options.polyExp2Period}));
  pm.addPass(createConvertFAToLoops());
  buildLoopsToLLVMPipeline(pm);
}

void mlir::fa::registerPipelines() {
  PassPipelineRegistration<CPUPipelineOptions>(
      "fa-cpu-pipeline",
      "Lower fa.attention through fa-tile and a loop order (FA1 or FA2) to "
      "the LLVM dialect for execution on the host",
      buildCPUPipeline);
}

void mlir::fa::registerAllFADialects(DialectRegistry &registry) {
  registry.insert<FADialect>();
  registerAllDialects(registry);
  registerAllExtensions(registry);
}

void mlir::fa::registerAllFAPasses() {
  registerAllPasses();
  registerFAPasses();
  registerFAConversionPasses();
  registerPipelines();
}
