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

#include "mlir/ExecutionEngine/CRunnerUtils.h"
#include "mlir/ExecutionEngine/ExecutionEngine.h"
#include "mlir/ExecutionEngine/OptUtils.h"
#include "mlir/IR/BuiltinOps.h"
#include "mlir/Parser/Parser.h"
#include "mlir/Pass/PassManager.h"
#include "llvm/Support/TargetSelect.h"

#include <pybind11/numpy.h>
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
                 const std::string &dtype, bool causal, int64_t window,
                 double softcap, int64_t blockR, int64_t blockC,
                 py::object rescaleThreshold, int64_t polyDegree,
                 int64_t polyPeriod, int64_t stages, bool pingPong,
                 bool intraOverlap, int persistent,
                 const std::string &sm90Kernel, bool runPtxas) {
  fa::KernelOptions options;
  options.arch = arch;
  options.headDim = headDim;
  options.dtype = dtype;
  options.causal = causal;
  options.window = window;
  options.softcap = softcap;
  options.blockR = blockR;
  options.blockC = blockC;
  if (!rescaleThreshold.is_none())
    options.rescaleThreshold = rescaleThreshold.cast<double>();
  options.polyExp2Degree = polyDegree;
  options.polyExp2Period = polyPeriod;
  options.stages = stages;
  options.pingPong = pingPong;
  options.intraOverlap = intraOverlap;
  options.persistent = persistent;
  options.sm90Kernel = sm90Kernel;
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

using F32Array = py::array_t<float, py::array::c_style | py::array::forcecast>;

std::string memrefType(const std::vector<int64_t> &shape) {
  std::string t = "memref<";
  for (int64_t d : shape)
    t += std::to_string(d) + "x";
  return t + "f32>";
}

/// Lowers fa.attention on the given f32 shapes with fa-cpu-pipeline, JIT
/// compiles it with MLIR's ExecutionEngine and runs it on the arrays.
py::tuple runCpu(F32Array q, F32Array k, F32Array v, bool causal,
                 py::object scale, const std::string &loopOrder,
                 int64_t blockR, int64_t blockC) {
  for (auto *a : {&q, &k, &v})
    if (a->ndim() != 4)
      throw py::value_error("q, k and v must be 4-D [B, H, N, D]");
  std::vector<int64_t> qs(q.shape(), q.shape() + 4), ks(k.shape(), k.shape() + 4),
      vs(v.shape(), v.shape() + 4);
  std::vector<int64_t> os = {qs[0], qs[1], qs[2], vs[3]}, ls = {qs[0], qs[1], qs[2]};
  std::string attrs = causal ? "causal" : "";
  if (!scale.is_none())
    attrs += std::string(attrs.empty() ? "" : ", ") + "scale = " +
             std::to_string(scale.cast<double>()) + " : f32";
  std::string text =
      "func.func @attention(%q: " + memrefType(qs) + ", %k: " + memrefType(ks) +
      ", %v: " + memrefType(vs) + ", %o: " + memrefType(os) +
      ", %l: " + memrefType(ls) +
      ") attributes {llvm.emit_c_interface} {\n  fa.attention %q, %k, %v "
      "outs(%o, %l : " + memrefType(os) + ", " + memrefType(ls) + ")" +
      (attrs.empty() ? "" : " {" + attrs + "}") + " : " + memrefType(qs) +
      ", " + memrefType(ks) + ", " + memrefType(vs) + "\n  return\n}\n";

  MLIRContext &ctx = context();
  std::string errors;
  ScopedDiagnosticHandler handler(&ctx, [&](Diagnostic &diag) {
    llvm::raw_string_ostream os(errors);
    os << diag << "\n";
    return success();
  });
  auto fail = [&]() -> py::tuple {
    static py::object error =
        py::module_::import("flashmlir.errors").attr("CompileError");
    PyErr_SetString(error.ptr(), errors.c_str());
    throw py::error_already_set();
  };
  OwningOpRef<ModuleOp> module = parseSourceString<ModuleOp>(text, &ctx);
  if (!module)
    return fail();
  fa::CPUPipelineOptions options;
  if (loopOrder != "fa1" && loopOrder != "fa2")
    throw py::value_error("loop_order must be 'fa1' or 'fa2'");
  options.loopOrder = loopOrder == "fa1" ? fa::LoopOrder::FA1 : fa::LoopOrder::FA2;
  options.blockR = blockR;
  options.blockC = blockC;
  PassManager pm(&ctx);
  fa::buildCPUPipeline(pm, options);
  if (failed(pm.run(*module)))
    return fail();

  static std::once_flag targets;
  std::call_once(targets, [] {
    llvm::InitializeNativeTarget();
    llvm::InitializeNativeTargetAsmPrinter();
  });
  std::function<llvm::Error(llvm::Module *)> optimize =
      makeOptimizingTransformer(2, 0, nullptr);
  ExecutionEngineOptions engineOptions;
  engineOptions.transformer = optimize;
  auto engine = ExecutionEngine::create(*module, engineOptions);
  if (!engine) {
    errors += llvm::toString(engine.takeError());
    return fail();
  }
  auto fn = (*engine)->lookup("_mlir_ciface_attention");
  if (!fn) {
    errors += llvm::toString(fn.takeError());
    return fail();
  }
  F32Array out(os), lse(ls);
  auto descriptor = [](float *data, const std::vector<int64_t> &shape) {
    StridedMemRefType<float, 4> d{data, data, 0, {}, {}};
    int64_t stride = 1;
    for (int64_t i = int64_t(shape.size()) - 1; i >= 0; --i) {
      d.sizes[i] = shape[i];
      d.strides[i] = stride;
      stride *= shape[i];
    }
    return d;
  };
  auto dq = descriptor(q.mutable_data(), qs), dk = descriptor(k.mutable_data(), ks),
       dv = descriptor(v.mutable_data(), vs), dout = descriptor(out.mutable_data(), os);
  StridedMemRefType<float, 3> dl{lse.mutable_data(), lse.mutable_data(), 0,
                                 {ls[0], ls[1], ls[2]},
                                 {ls[1] * ls[2], ls[2], 1}};
  {
    py::gil_scoped_release release;
    reinterpret_cast<void (*)(void *, void *, void *, void *, void *)>(*fn)(
        &dq, &dk, &dv, &dout, &dl);
  }
  return py::make_tuple(out, lse);
}

} // namespace

PYBIND11_MODULE(_compiler, m) {
  m.doc() = "flash-mlir compiler bindings (see flashmlir.compile)";
  m.def("compile", &compile, py::arg("arch"), py::arg("head_dim"),
        py::arg("dtype"), py::arg("causal"), py::arg("window") = 0,
        py::arg("softcap") = 0.0, py::arg("block_r") = 0,
        py::arg("block_c") = 0, py::arg("rescale_threshold") = py::none(),
        py::arg("poly_exp2_degree") = -1, py::arg("poly_exp2_period") = 8,
        py::arg("stages") = 0, py::arg("ping_pong") = true,
        py::arg("intra_overlap") = true, py::arg("persistent") = -1,
        py::arg("sm90_kernel") = "wgmma", py::arg("run_ptxas") = true);
  m.def("run_cpu", &runCpu, py::arg("q"), py::arg("k"), py::arg("v"),
        py::arg("causal") = false, py::arg("scale") = py::none(),
        py::arg("loop_order") = "fa2", py::arg("block_r") = 0,
        py::arg("block_c") = 0);
}
