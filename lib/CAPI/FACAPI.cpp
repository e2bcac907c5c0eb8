//===- FACAPI.cpp - flash-mlir compiler C API -----------------------------===//

#include "fa-c/Compiler.h"
#include "fa-c/Passes.h"

#include "fa/Conversion/Passes.h"
#include "fa/Dialect/FA/IR/FADialect.h"
#include "fa/Dialect/FA/Transforms/Passes.h"
#include "fa/Pipelines/Pipelines.h"
#include "fa/Target/Compile.h"

#include "mlir/CAPI/IR.h"
#include "mlir/CAPI/Pass.h"
#include "mlir/CAPI/Registration.h"
#include "mlir/CAPI/Support.h"
#include "mlir/IR/DialectRegistry.h"
#include "mlir/Pass/PassManager.h"

#include <cmath>
#include <limits>
#include <string>

using namespace mlir;

MLIR_DEFINE_CAPI_DIALECT_REGISTRATION(FA, fa, mlir::fa::FADialect)

// The TableGen-generated pass C API (mlirRegisterFAPasses, mlirCreateFA...).
using namespace mlir::fa;
#include "fa/Conversion/Passes.capi.cpp.inc"
#include "fa/Dialect/FA/Transforms/Passes.capi.cpp.inc"

struct FaCompiledKernel {
  std::string name, ptx, cubin, metadata, ir;
};

extern "C" {

void faContextRegisterAll(MlirContext context) {
  DialectRegistry registry;
  fa::registerAllFADialects(registry);
  unwrap(context)->appendDialectRegistry(registry);
  unwrap(context)->loadAllAvailableDialects();
}

void faRegisterPasses(void) { fa::registerAllFAPasses(); }

FaCompileOptions faCompileOptionsDefault(void) {
  FaCompileOptions o;
  o.target = "sm_90a";
  o.rescaleThreshold = std::numeric_limits<double>::quiet_NaN();
  o.polyExp2Degree = -1;
  o.polyExp2Period = 8;
  o.runPtxas = 1;
  return o;
}

FaCompiledKernel *faCompileModule(MlirModule cModule,
                                  const FaCompileOptions *options) {
  ModuleOp module = unwrap(cModule);
  FaCompileOptions o = options ? *options : faCompileOptionsDefault();
  std::string target = o.target ? o.target : "";
  auto result = new FaCompiledKernel();
  if (target == "cpu") {
    fa::CPUPipelineOptions cpu;
    if (!std::isnan(o.rescaleThreshold))
      cpu.rescaleThreshold = o.rescaleThreshold;
    cpu.polyExp2Degree = std::max(o.polyExp2Degree, 0);
    cpu.polyExp2Period = o.polyExp2Period;
    PassManager pm(module.getContext());
    fa::buildCPUPipeline(pm, cpu);
    if (failed(pm.run(module))) {
      delete result;
      return nullptr;
    }
    llvm::raw_string_ostream os(result->ir);
    module.print(os);
    return result;
  }
  fa::KernelOptions k;
  k.arch = target;
  k.rescaleThreshold = o.rescaleThreshold;
  k.polyExp2Degree = o.polyExp2Degree;
  k.polyExp2Period = o.polyExp2Period;
  k.runPtxas = o.runPtxas != 0;
  FailureOr<fa::CompiledKernel> compiled = fa::compileModule(module, k);
  if (failed(compiled)) {
    delete result;
    return nullptr;
  }
  result->name = compiled->name;
  result->ptx = compiled->ptx;
  result->cubin = compiled->cubin;
  result->metadata = compiled->metadata;
  result->ir = compiled->kernelIR;
  return result;
}

static MlirStringRef ref(const std::string &s) {
  return mlirStringRefCreate(s.data(), s.size());
}
MlirStringRef faCompiledKernelName(const FaCompiledKernel *k) {
  return ref(k->name);
}
MlirStringRef faCompiledKernelPtx(const FaCompiledKernel *k) {
  return ref(k->ptx);
}
MlirStringRef faCompiledKernelCubin(const FaCompiledKernel *k) {
  return ref(k->cubin);
}
MlirStringRef faCompiledKernelMetadata(const FaCompiledKernel *k) {
  return ref(k->metadata);
}
MlirStringRef faCompiledKernelIR(const FaCompiledKernel *k) {
  return ref(k->ir);
}
void faCompiledKernelDestroy(FaCompiledKernel *k) { delete k; }

} // extern "C"
