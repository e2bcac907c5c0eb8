//===- FACAPI.cpp - flash-mlir compiler C API -----------------------------===//

#include "fa-c/Compiler.h"
#include "fa-c/Passes.h"
#include "fa-c/Version.h"

#include "fa/Conversion/Passes.h"
#include "fa/Dialect/FA/IR/FADialect.h"
#include "fa/Dialect/FA/IR/Validation.h"
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
#include <mutex>
#include <string>
#include <vector>

using namespace mlir;

MLIR_DEFINE_CAPI_DIALECT_REGISTRATION(FA, fa, mlir::fa::FADialect)

// The TableGen-generated pass C API (mlirRegisterFAPasses, mlirCreateFA...).
using namespace mlir::fa;
#include "fa/Conversion/Passes.capi.cpp.inc"
#include "fa/Dialect/FA/Transforms/Passes.capi.cpp.inc"

struct FaCompiledKernel {
  std::string name, ptx, cubin, metadata, ir;
  std::vector<mlir::fa::CompiledKernel::Launch> launches;
};

namespace {

/// Why the last call on this thread failed where no context could carry a
/// diagnostic (a null module or context).
thread_local std::string lastError;

/// Records `message` and, when there is a module, emits it on its context.
FaCompiledKernel *failCompile(ModuleOp module, const std::string &message) {
  lastError = message;
  if (module)
    emitError(module.getLoc()) << message;
  return nullptr;
}

/// Registers every pass and pipeline once per process: the compile
/// pipelines are partly textual (upstream passes by name), so
/// faCompileModule needs them registered whether or not its caller called
/// faRegisterPasses (before, it aborted in the emission pipeline's parse).
void registerPassesOnce() {
  static std::once_flag once;
  std::call_once(once, [] { fa::registerAllFAPasses(); });
}

} // namespace

extern "C" {

MlirStringRef faLastError(void) {
  return mlirStringRefCreate(lastError.data(), lastError.size());
}

void faContextRegisterAll(MlirContext context) {
  if (mlirContextIsNull(context)) {
    lastError = "faContextRegisterAll: the context is null";
    return;
  }
  DialectRegistry registry;
  fa::registerAllFADialects(registry);
  unwrap(context)->appendDialectRegistry(registry);
  unwrap(context)->loadAllAvailableDialects();
}

void faRegisterPasses(void) { registerPassesOnce(); }

const char *faVersion(void) { return FA_VERSION_STRING; }

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
  lastError.clear();
  if (mlirModuleIsNull(cModule))
    return failCompile(nullptr,
                       "faCompileModule: the module is null (did its parse "
                       "fail? its diagnostics are on the context)");
  ModuleOp module = unwrap(cModule);
  if (!options)
    return failCompile(module, "faCompileModule: options must not be null; "
                               "start from faCompileOptionsDefault()");
  FaCompileOptions o = *options;
  if (!o.target)
    return failCompile(module, "faCompileModule: options->target must not "
                               "be null; use \"cpu\", \"sm_80\", "
                               "\"sm_90a\" or \"sm_100a\"");
  std::string target = o.target;
  // The documented sentinels (NaN: default, < 0: off; degree 0: off, < 0:
  // the target's default) first; every other value must be in range: the
  // kernel options' one check (fa::checkKernelOptions), naming the field of
  // FaCompileOptions (KernelOptions.def's field names).
  {
    fa::KernelOptions checked;
    checked.rescaleThreshold = o.rescaleThreshold;
    checked.polyExp2Degree = o.polyExp2Degree;
    checked.polyExp2Period = o.polyExp2Period;
    if (std::optional<fa::KernelOptionError> error =
            fa::checkKernelOptions(checked))
      return failCompile(module, "faCompileModule: options->" +
                                     error->option->field.str() + ": " +
                                     error->message);
  }
  registerPassesOnce();
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
  std::optional<fagpu::Target> arch = fagpu::parseChoice<fagpu::Target>(target);
  if (!arch) {
    delete result;
    return failCompile(module, "faCompileModule: options->target: expected "
                               "cpu, " +
                                   fagpu::choiceList<fagpu::Target>() +
                                   ", got '" + target + "'");
  }
  k.arch = *arch;
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
  result->launches = compiled->launches;
  return result;
}

/// A field of a kernel; the empty string for a null kernel.
static MlirStringRef ref(const FaCompiledKernel *k,
                         std::string FaCompiledKernel::*field) {
  if (!k)
    return mlirStringRefCreate("", 0);
  const std::string &s = k->*field;
  return mlirStringRefCreate(s.data(), s.size());
}
MlirStringRef faCompiledKernelName(const FaCompiledKernel *k) {
  return ref(k, &FaCompiledKernel::name);
}
MlirStringRef faCompiledKernelPtx(const FaCompiledKernel *k) {
  return ref(k, &FaCompiledKernel::ptx);
}
MlirStringRef faCompiledKernelCubin(const FaCompiledKernel *k) {
  return ref(k, &FaCompiledKernel::cubin);
}
MlirStringRef faCompiledKernelMetadata(const FaCompiledKernel *k) {
  return ref(k, &FaCompiledKernel::metadata);
}
MlirStringRef faCompiledKernelIR(const FaCompiledKernel *k) {
  return ref(k, &FaCompiledKernel::ir);
}
intptr_t faCompiledKernelLaunchCount(const FaCompiledKernel *k) {
  return k ? intptr_t(k->launches.size()) : 0;
}
/// Field `field` of launch `index`; the empty string when there is none.
static MlirStringRef
launchRef(const FaCompiledKernel *k, intptr_t index,
          std::string mlir::fa::CompiledKernel::Launch::*field) {
  if (!k || index < 0 || index >= intptr_t(k->launches.size()))
    return mlirStringRefCreate("", 0);
  const std::string &s = k->launches[index].*field;
  return mlirStringRefCreate(s.data(), s.size());
}
MlirStringRef faCompiledKernelLaunchName(const FaCompiledKernel *k,
                                         intptr_t index) {
  return launchRef(k, index, &mlir::fa::CompiledKernel::Launch::name);
}
MlirStringRef faCompiledKernelLaunchMetadata(const FaCompiledKernel *k,
                                             intptr_t index) {
  return launchRef(k, index, &mlir::fa::CompiledKernel::Launch::metadata);
}
void faCompiledKernelDestroy(FaCompiledKernel *k) { delete k; }

} // extern "C"
