//===- fa-fuzz.cpp - libFuzzer harness for the fa dialect and pipelines ---===//
//
// Parses the input as MLIR and, when it verifies, runs the main pipelines on
// copies of it: fa-raise-attention, fa-cpu-pipeline (FA2 and FA1 loop
// orders, down to the LLVM dialect), the GPU pipelines down to PTX
// (fa-sm80-pipeline, fa-sm90-pipeline) and the sm_100a kernel builder
// (fa-sm100-kernel-pipeline). Diagnostics are
// expected and swallowed; crashes, sanitizer reports and hangs are the
// findings.
// Seed corpus: the lit tests, split at `// -----` (scripts/fuzz.sh).
//
//===----------------------------------------------------------------------===//

#include "fa/Pipelines/Pipelines.h"
#include "fa/Support/UpstreamParserGuard.h"

#include "mlir/IR/BuiltinOps.h"
#include "mlir/IR/Diagnostics.h"
#include "mlir/IR/MLIRContext.h"
#include "mlir/IR/Verifier.h"
#include "mlir/Parser/Parser.h"
#include "mlir/Pass/PassManager.h"
#include "mlir/Pass/PassRegistry.h"

#include <cstdint>
#include <string>

using namespace mlir;

namespace {

struct State {
  DialectRegistry registry;
  std::unique_ptr<MLIRContext> context;
  State() {
    fa::registerAllFADialects(registry);
    fa::registerAllFAPasses();
    context = std::make_unique<MLIRContext>(registry,
                                            MLIRContext::Threading::DISABLED);
    context->loadAllAvailableDialects();
    context->allowUnregisteredDialects(false);
    // Swallow diagnostics: bad input is expected to be diagnosed.
    context->getDiagEngine().registerHandler([](Diagnostic &) {});
  }
};

State &state() {
  static State s;
  return s;
}

void runPipeline(ModuleOp module, StringRef pipeline) {
  OwningOpRef<ModuleOp> copy = module.clone();
  PassManager pm(copy->getContext());
  if (failed(parsePassPipeline(pipeline, pm)))
    return;
  (void)pm.run(*copy);
}

} // namespace

extern "C" int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size) {
  if (size > 64 * 1024)
    return 0;
  State &s = state();
  std::string text(reinterpret_cast<const char *>(data), size);
  // Inputs that crash the upstream parser (include/fa/Support/
  // UpstreamParserGuard.h) are refused by the tools; skip them here.
  if (mlir::fa::findUpstreamLinalgParserCrash(text) != StringRef::npos)
    return 0;
  OwningOpRef<ModuleOp> module =
      parseSourceString<ModuleOp>(text, s.context.get());
  if (!module || failed(verify(*module)))
    return 0;
  // Raising looks at any linalg; the rest needs fa ops.
  runPipeline(*module, "func.func(fa-raise-attention)");
  bool hasFA = false;
  module->walk([&](Operation *op) {
    if (op->getDialect() &&
        op->getDialect()->getNamespace() == "fa")
      hasFA = true;
  });
  if (!hasFA)
    return 0;
  runPipeline(*module, "fa-cpu-pipeline");
  runPipeline(*module, "fa-cpu-pipeline{loop-order=fa1 block-r=16 "
                       "block-c=16 rescale-threshold=8 poly-exp2-degree=3}");
  runPipeline(*module, "func.func(fa-attention-to-buffers,fa-tile),"
                       "fa-io-report{output=/dev/null}");
  runPipeline(*module, "fa-sm80-pipeline{chip=sm_90a}");
  runPipeline(*module, "fa-sm90-pipeline");
  // The Blackwell kernel builder (this project's code) without LLVM's PTX
  // emission, which the sm_80/sm_90a pipelines already exercise: a second
  // NVPTX code generation per input would halve the fuzzing rate.
  runPipeline(*module, "fa-sm100-kernel-pipeline");
  return 0;
}
