// An ML compiler's view: its own registry and IR, flash-mlir's dialect and
// pipeline, found through the installed CMake package.
#include "fa/Dialect/FA/IR/FADialect.h"
#include "fa/Pipelines/Pipelines.h"

#include "mlir/Dialect/Func/IR/FuncOps.h"
#include "mlir/IR/BuiltinOps.h"
#include "mlir/IR/MLIRContext.h"
#include "mlir/InitAllDialects.h"
#include "mlir/InitAllExtensions.h"
#include "mlir/Parser/Parser.h"
#include "mlir/Pass/PassManager.h"

#include <cstdio>

static const char *kIR = R"mlir(
func.func @my_model_attention(%q: tensor<2x8x96x64xf32>, %k: tensor<2x2x160x64xf32>,
                              %v: tensor<2x2x160x64xf32>) -> tensor<2x8x96x64xf32> {
  %o = fa.attention %q, %k, %v {causal}
      : tensor<2x8x96x64xf32>, tensor<2x2x160x64xf32>, tensor<2x2x160x64xf32>
      -> tensor<2x8x96x64xf32>
  return %o : tensor<2x8x96x64xf32>
}
)mlir";

int main() {
  mlir::DialectRegistry registry;
  mlir::registerAllDialects(registry);
  mlir::registerAllExtensions(registry);
  registry.insert<mlir::fa::FADialect>(); // flash-mlir joins our registry
  mlir::fa::registerAllFAPasses();
  mlir::MLIRContext context(registry);
  auto module = mlir::parseSourceString<mlir::ModuleOp>(kIR, &context);
  if (!module) {
    std::fprintf(stderr, "consumer: parse failed\n");
    return 1;
  }
  mlir::PassManager pm(&context);
  mlir::fa::CPUPipelineOptions options;
  options.loopOrder = mlir::fa::LoopOrder::FA2;
  mlir::fa::buildCPUPipeline(pm, options);
  if (mlir::failed(pm.run(*module))) {
    std::fprintf(stderr, "consumer: fa-cpu-pipeline failed\n");
    return 1;
  }
  int llvmFuncs = 0, faOps = 0;
  module->walk([&](mlir::Operation *op) {
    if (op->getName().getStringRef() == "llvm.func")
      ++llvmFuncs;
    if (op->getDialect() && op->getDialect()->getNamespace() == "fa")
      ++faOps;
  });
  std::printf("consumer: fa-cpu-pipeline lowered @my_model_attention: "
              "%d llvm.func, %d fa ops left\n",
              llvmFuncs, faOps);
  return faOps == 0 && llvmFuncs > 0 ? 0 : 1;
}
