//===- _compiler.cpp - pybind11 bindings of the flash-mlir compiler -------===//
//
// flashmlir._compiler.compile(...) runs fa-compile's stages in-process and
// returns the kernel's name, every IR stage, PTX, cubin and metadata.
// Diagnostics become a flashmlir.CompileError with their text.
//
//===----------------------------------------------------------------------===//

#include "fa/Pipelines/Pipelines.h"
#include "fa/Target/Compile.h"

#include "mlir/IR/Diagnostics.h"
#include "mlir/IR/MLIRContext.h"

#include <pybind11/pybind11.h>

#include <mutex>

namespace py = pybind11;
using namespace mlir;

namespace {

MLIRContext &context() {
  static std::once_flag once;
  static std::unique_ptr<MLIRContext> ctx;
  std::call_once(once, [] {
    DialectRegistry registry;
    fa::registerAllFADialects(registry);
    fa::registerAllFAPasses();
    ctx = std::make_unique<MLIRContext>(registry);
    ctx->loadAllAvailableDialects();
  });
  return *ctx;
}

py::dict compile(const std::string &arch, int64_t headDim,
                 const std::string &dtype, bool causal, int64_t blockR,
                 int64_t blockC, py::object rescaleThreshold,
                 int64_t polyDegree, int64_t polyPeriod, bool runPtxas) {
  fa::KernelOptions options;
  options.arch = arch;
  options.headDim = headDim;
  options.dtype = dtype;
  options.causal = causal;
  options.blockR = blockR;
  options.blockC = blockC;
  if (!rescaleThreshold.is_none())
    options.rescaleThreshold = rescaleThreshold.cast<double>();
  options.polyExp2Degree = polyDegree;
  options.polyExp2Period = polyPeriod;
  options.runPtxas = runPtxas;

  MLIRContext &ctx = context();
  std::string errors;
  FailureOr<fa::CompiledKernel> kernel;
  {
    ScopedDiagnosticHandler handler(&ctx, [&](Diagnostic &diag) {
      llvm::raw_string_ostream os(errors);
      os << diag << "\n";
      return success();
    });
    py::gil_scoped_release release;
    kernel = fa::compileKernel(ctx, options);
  }
  if (failed(kernel)) {
    static py::object error =
        py::module_::import("flashmlir.errors").attr("CompileError");
    PyErr_SetString(error.ptr(), errors.c_str());
    throw py::error_already_set();
  }
  py::dict out;
  out["name"] = kernel->name;
  out["kernel_ir"] = kernel->kernelIR;
  out["host_ir"] = kernel->hostIR;
  out["ptx"] = kernel->ptx;
  out["cubin"] = py::bytes(kernel->cubin);
  out["ptxas_log"] = kernel->ptxasLog;
  out["metadata"] = kernel->metadata;
  return out;
}

} // namespace

PYBIND11_MODULE(_compiler, m) {
  m.doc() = "flash-mlir compiler bindings (see flashmlir.compile)";
  m.def("compile", &compile, py::arg("arch"), py::arg("head_dim"),
        py::arg("dtype"), py::arg("causal"), py::arg("block_r") = 0,
        py::arg("block_c") = 0, py::arg("rescale_threshold") = py::none(),
        py::arg("poly_exp2_degree") = 0, py::arg("poly_exp2_period") = 8,
        py::arg("run_ptxas") = true);
}
