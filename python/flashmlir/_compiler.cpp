//===- _compiler.cpp - pybind11 bindings of the flash-mlir compiler -------===//
//
// flashmlir._compiler.compile(...) runs fa-compile's stages in-process and
// returns the kernel's name, every IR stage, PTX, cubin and metadata.
// Diagnostics become a flashmlir.CompileError with their text.
//
// Threads: the GIL is released while compiling, so Python threads may call
// in concurrently. Every use of the one MLIRContext -- registering the
// call's diagnostic handler, compiling, parsing, lowering, destroying IR --
// holds a process-wide lock: a handler registered by one call would
// otherwise receive another call's diagnostics (a CompileError with no
// text, or with another request's), and fa::compileKernel also sets LLVM's
// global nvptx-short-ptr option. Only running a compiled CPU kernel happens
// outside the lock. (A fresh context per call is not an option today: the
// ninth compileKernel in a process on a fresh context crashes in
// compileModule; see issue 16's report.)
//
//===----------------------------------------------------------------------===//

#include "fa/Dialect/FA/IR/Validation.h"
#include "fa/Dialect/FA/Transforms/Passes.h"
#include "fa/Model/Traffic.h"
#include "fa/Pipelines/Pipelines.h"
#include "fa/Support/Float8.h"
#include "fa/Support/UpstreamParserGuard.h"
#include "fa/Target/Compile.h"

#include "mlir/IR/Diagnostics.h"
#include "mlir/IR/MLIRContext.h"

#include "mlir/ExecutionEngine/CRunnerUtils.h"
#include "mlir/ExecutionEngine/ExecutionEngine.h"
#include "mlir/ExecutionEngine/OptUtils.h"
#include "mlir/IR/BuiltinOps.h"
#include "mlir/Parser/Parser.h"
#include "mlir/Pass/PassManager.h"
#include "llvm/ADT/StringExtras.h"
#include "llvm/Support/Format.h"
#include "llvm/Support/TargetSelect.h"

#include <pybind11/numpy.h>
#include <pybind11/pybind11.h>
#include <pybind11/stl.h>

#include <cmath>
#include <list>
#include <mutex>

namespace py = pybind11;
using namespace mlir;

namespace {

/// The context; use it only while holding contextLock().
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

/// Taken with the GIL released (py::gil_scoped_release first), so that a
/// thread waiting for it never blocks the interpreter.
std::mutex &contextLock() {
  static std::mutex lock;
  return lock;
}

/// Collects a call's diagnostics as text.
struct Diagnostics {
  std::string text;
  ScopedDiagnosticHandler handler;
  explicit Diagnostics(MLIRContext &ctx)
      : handler(&ctx, [this](Diagnostic &diag) {
          llvm::raw_string_ostream os(text);
          // Where it is, when it is somewhere: the user's module, or the
          // module a keyword call generated.
          if (auto file = dyn_cast<FileLineColLoc>(diag.getLocation()))
            os << file.getFilename().getValue() << ":" << file.getLine()
               << ":" << file.getColumn() << ": ";
          else if (!isa<UnknownLoc>(diag.getLocation()))
            os << diag.getLocation() << ": ";
          os << diag << "\n";
          return success();
        }) {}
};

[[noreturn]] void raiseCompileError(std::string message) {
  // Never an error without text, whatever the failure.
  if (message.empty())
    message = "compilation failed without a diagnostic";
  static py::object error =
      py::module_::import("flashmlir.errors").attr("CompileError");
  PyErr_SetString(error.ptr(), message.c_str());
  throw py::error_already_set();
}

/// A keyword's Python value as the option table takes it; std::nullopt for
/// a type no option takes (a list, a numpy array, ...).
std::optional<fa::KernelOptionValue> optionValueOf(py::handle value) {
  // numbers' classes, so that numpy's scalars count as Python's
  // (np.int64(128) is an integer, np.float32 a number, np.bool_ a bool).
  static py::object numbers = py::module_::import("numbers");
  std::string type = py::str(py::type::handle_of(value).attr("__name__"));
  if (value.is_none())
    return fa::KernelOptionValue(std::monostate());
  if (py::isinstance<py::bool_>(value) || type == "bool_")
    return fa::KernelOptionValue(PyObject_IsTrue(value.ptr()) == 1);
  if (py::isinstance(value, numbers.attr("Integral"))) {
    int overflow = 0;
    py::int_ integer = py::reinterpret_borrow<py::object>(value);
    long long v = PyLong_AsLongLongAndOverflow(integer.ptr(), &overflow);
    if (overflow)
      return std::nullopt; // beyond 64 bits: no option takes it
    return fa::KernelOptionValue(int64_t(v));
  }
  if (py::isinstance(value, numbers.attr("Real")))
    return fa::KernelOptionValue(
        PyFloat_AsDouble(py::float_(py::reinterpret_borrow<py::object>(value))
                             .ptr()));
  if (py::isinstance<py::str>(value))
    return fa::KernelOptionValue(value.cast<std::string>());
  return std::nullopt;
}

/// Each keyword through the option table (fa/Target/KernelOptions.def): an
/// unknown keyword, a value of the wrong type or out of its range is a
/// CompileError naming it.
fa::KernelOptions optionsOf(const py::dict &keywords) {
  fa::KernelOptions options;
  for (auto [key, value] : keywords) {
    std::string keyword = py::str(key);
    const fa::KernelOptionInfo *option =
        fa::lookupKernelOptionKeyword(keyword);
    if (!option)
      raiseCompileError("unknown kernel option '" + keyword + "'");
    std::optional<fa::KernelOptionValue> held = optionValueOf(value);
    std::optional<std::string> why =
        held ? fa::setKernelOption(options, *option, *held)
             : option->keyword.str() + " must be " +
                   fa::describeKernelOptionValues(*option);
    if (why)
      raiseCompileError(*why + ", got " +
                        std::string(py::str(py::repr(value))));
  }
  if (std::optional<fa::KernelOptionError> error =
          fa::checkKernelOptions(options))
    raiseCompileError(error->message);
  return options;
}

/// What both compile entry points return: the IR of each stage, the PTX,
/// the cubin and ptxas's report.
py::dict artefactsOf(const fa::CompiledKernel &kernel) {
  py::dict out;
  out["kernel_ir"] = kernel.kernelIR;
  out["host_ir"] = kernel.hostIR;
  out["ptx"] = kernel.ptx;
  out["cubin"] = py::bytes(kernel.cubin);
  out["ptxas_log"] = kernel.ptxasLog;
  return out;
}

/// flashmlir.compile's kernel: the keywords of the option table.
py::dict compile(const py::dict &keywords, bool runPtxas) {
  fa::KernelOptions options = optionsOf(keywords);
  options.runPtxas = runPtxas;
  std::string errors;
  FailureOr<fa::CompiledKernel> kernel;
  {
    py::gil_scoped_release release;
    std::lock_guard<std::mutex> lock(contextLock());
    MLIRContext &ctx = context();
    Diagnostics diagnostics(ctx);
    kernel = fa::compileKernel(ctx, options);
    errors = std::move(diagnostics.text);
  }
  if (failed(kernel))
    raiseCompileError(errors);
  py::dict out = artefactsOf(*kernel);
  out["name"] = kernel->name;
  out["metadata"] = kernel->metadata;
  return out;
}

/// A caller's MLIR module (any number of fa.attention ops in func.funcs)
/// compiled for a GPU target: one binary, one launch per attention.
py::dict compileModule(const std::string &text, const py::dict &keywords,
                       bool runPtxas, bool raiseAttention) {
  // Inputs known to crash MLIR 22's own parser are refused, as the tools do.
  if (fa::findUpstreamLinalgParserCrash(text) != StringRef::npos)
    raiseCompileError("the module holds a form that crashes MLIR 22's "
                      "parser (a malformed permutation/dimensions list)");
  // A module's attentions carry their own shapes and masks: the target and
  // FlashAttention-4's choices are what a caller picks for all of them.
  for (auto [key, value] : keywords) {
    std::string keyword = py::str(key);
    if (keyword != "arch" && keyword != "rescale_threshold" &&
        keyword != "poly_exp2_degree" && keyword != "poly_exp2_period")
      raiseCompileError("compile_module takes arch, rescale_threshold, "
                        "poly_exp2_degree and poly_exp2_period, not '" +
                        keyword + "' (the module's attentions carry it)");
  }
  fa::KernelOptions options = optionsOf(keywords);
  options.runPtxas = runPtxas;
  std::string errors;
  FailureOr<fa::CompiledKernel> kernel = failure();
  {
    py::gil_scoped_release release;
    std::lock_guard<std::mutex> lock(contextLock());
    MLIRContext &ctx = context();
    Diagnostics diagnostics(ctx);
    OwningOpRef<ModuleOp> module =
        parseSourceString<ModuleOp>(text, &ctx, "flashmlir.compile_module");
    // Raising first (fa-compile-module --raise): a candidate left as it is
    // has its remark, which an attention-less module then reports.
    bool raised = true;
    if (module && raiseAttention) {
      PassManager pm(&ctx);
      pm.nest<func::FuncOp>().addPass(fa::createFARaiseAttention());
      raised = succeeded(pm.run(*module));
    }
    if (module && raised)
      kernel = fa::compileModule(*module, options);
    errors = std::move(diagnostics.text);
  }
  if (failed(kernel))
    raiseCompileError(errors);
  py::dict out = artefactsOf(*kernel);
  py::list launches;
  for (const fa::CompiledKernel::Launch &launch : kernel->launches) {
    py::dict entry;
    entry["name"] = launch.name;
    entry["metadata"] = launch.metadata;
    launches.append(entry);
  }
  out["launches"] = launches;
  return out;
}

using F32Array = py::array_t<float, py::array::c_style | py::array::forcecast>;

using U8Array = py::array_t<uint8_t, py::array::c_style | py::array::forcecast>;

std::string memrefType(const std::vector<int64_t> &shape,
                       const std::string &elt = "f32") {
  std::string t = "memref<";
  for (int64_t d : shape)
    t += std::to_string(d) + "x";
  return t + elt + ">";
}

/// The e4m3 codes of an f32 array (nearest even, saturating at +-448), and
/// back: the codec of fa/Support/Float8.h, which the CPU path's IR matches.
U8Array toE4M3(F32Array x) {
  U8Array out(std::vector<py::ssize_t>(x.shape(), x.shape() + x.ndim()));
  const float *in = x.data();
  uint8_t *codes = out.mutable_data();
  for (py::ssize_t i = 0; i < x.size(); ++i)
    codes[i] = fa::floatToE4M3(in[i]);
  return out;
}

py::tuple quantizeE4M3(F32Array x) {
  U8Array codes(std::vector<py::ssize_t>(x.shape(), x.shape() + x.ndim()));
  float descale = fa::quantizeE4M3(x.data(), x.size(), codes.mutable_data());
  return py::make_tuple(codes, descale);
}

F32Array fromE4M3(U8Array codes) {
  F32Array out(
      std::vector<py::ssize_t>(codes.shape(), codes.shape() + codes.ndim()));
  const uint8_t *in = codes.data();
  float *values = out.mutable_data();
  for (py::ssize_t i = 0; i < codes.size(); ++i)
    values[i] = fa::e4m3ToFloat(in[i]);
  return out;
}

/// The fp8 keywords of run_cpu.
struct FP8Request {
  bool e4m3 = false;             // q, k, v are e4m3 codes (uint8)
  float descales[3] = {1, 1, 1}; // q, k, v (e4m3 only)
  std::string quantize;          // "", "tensor", "block" (f32 inputs)
  bool incoherent = false;
  uint64_t hadamardSeed = 0;
  double probsScale = 256.0;
};

/// run_cpu's JIT-compiled functions by module text and pipeline options,
/// the most recent kMaxEntries: a repeated call (flex_attention in a loop,
/// the same shapes and regions) runs without compiling again.
class HostFunctionCache {
public:
  struct Entry {
    std::shared_ptr<ExecutionEngine> engine;
    void *function;
  };
  std::optional<Entry> lookup(const std::string &key) {
    std::lock_guard<std::mutex> lock(mutex);
    for (auto it = entries.begin(); it != entries.end(); ++it)
      if (it->first == key) {
        entries.splice(entries.begin(), entries, it);
        return it->second;
      }
    return std::nullopt;
  }
  void insert(const std::string &key, Entry entry) {
    std::lock_guard<std::mutex> lock(mutex);
    entries.emplace_front(key, std::move(entry));
    if (entries.size() > kMaxEntries)
      entries.pop_back();
  }

private:
  static constexpr size_t kMaxEntries = 32;
  std::mutex mutex;
  std::list<std::pair<std::string, Entry>> entries; // most recent first
};

HostFunctionCache &hostFunctions() {
  // Never destroyed: its engines' code and LLVM's state must outlive every
  // other static at the interpreter's exit (destroying an engine after them
  // crashed).
  static HostFunctionCache *cache = new HostFunctionCache;
  return *cache;
}

/// The JIT-compiled `symbol` of the module `text` lowered by
/// fa-cpu-pipeline with `options` (`optionsKey` spells them for the cache):
/// from the cache, or parsed, lowered and compiled under the context lock
/// (the IR destroyed before it is released). A CompileError otherwise.
HostFunctionCache::Entry hostFunction(const std::string &text,
                                      const std::string &optionsKey,
                                      const fa::CPUPipelineOptions &options,
                                      const std::string &symbol) {
  std::string key = text + "\n" + optionsKey + "\n" + symbol;
  if (std::optional<HostFunctionCache::Entry> cached =
          hostFunctions().lookup(key))
    return *cached;
  std::string errors;
  std::optional<HostFunctionCache::Entry> compiled;
  {
    py::gil_scoped_release release;
    std::lock_guard<std::mutex> lock(contextLock());
    MLIRContext &ctx = context();
    Diagnostics diagnostics(ctx);
    [&] {
      OwningOpRef<ModuleOp> module =
          parseSourceString<ModuleOp>(text, &ctx, "flashmlir.run_cpu");
      if (!module)
        return;
      PassManager pm(&ctx);
      fa::buildCPUPipeline(pm, options);
      if (failed(pm.run(*module)))
        return;
      static std::once_flag targets;
      std::call_once(targets, [] {
        llvm::InitializeNativeTarget();
        llvm::InitializeNativeTargetAsmPrinter();
      });
      std::function<llvm::Error(llvm::Module *)> optimize =
          makeOptimizingTransformer(2, 0, nullptr);
      ExecutionEngineOptions engineOptions;
      engineOptions.transformer = optimize;
      auto created = ExecutionEngine::create(*module, engineOptions);
      if (!created) {
        diagnostics.text += llvm::toString(created.takeError());
        return;
      }
      // The packed form (_mlir__mlir_ciface_<symbol>): one void ** of
      // argument addresses, whatever their number.
      auto found = (*created)->lookupPacked("_mlir_ciface_" + symbol);
      if (!found) {
        diagnostics.text += llvm::toString(found.takeError());
        return;
      }
      compiled = HostFunctionCache::Entry{std::move(*created),
                                          reinterpret_cast<void *>(*found)};
    }();
    errors = std::move(diagnostics.text);
  }
  if (!compiled)
    raiseCompileError(errors);
  hostFunctions().insert(key, *compiled);
  return *compiled;
}

/// A memref descriptor of a C-contiguous array: {allocated, aligned,
/// offset, sizes, strides} in 64-bit words (pointers are 64-bit on every
/// host the JIT targets).
std::vector<int64_t> descriptorWords(py::array &a) {
  auto data = reinterpret_cast<int64_t>(a.mutable_data());
  std::vector<int64_t> words = {data, data, 0};
  std::vector<int64_t> strides(a.ndim());
  int64_t stride = 1;
  for (py::ssize_t i = a.ndim() - 1; i >= 0; --i) {
    strides[i] = stride;
    stride *= a.shape(i);
  }
  words.insert(words.end(), a.shape(), a.shape() + a.ndim());
  words.insert(words.end(), strides.begin(), strides.end());
  return words;
}

/// score_mod / mask_mod regions for run_cpu (flashmlir.flex_attention
/// traces them): their text, to follow the op's types, and the captured
/// arrays (f32, i32 or i64, C-contiguous), whose tensor types the regions'
/// block arguments spell.
struct RegionRequest {
  std::string text;
  std::vector<py::array> captures;
};

/// The MLIR element type of a captured array.
std::string captureElementType(const py::array &a, size_t index) {
  if (py::isinstance<py::array_t<float>>(a))
    return "f32";
  if (py::isinstance<py::array_t<int32_t>>(a))
    return "i32";
  if (py::isinstance<py::array_t<int64_t>>(a))
    return "i64";
  throw py::value_error("captures[" + std::to_string(index) +
                        "]: expected float32, int32 or int64 values, got " +
                        py::str(a.dtype()).cast<std::string>());
}

/// run_cpu's `regions` and `captures` keywords, checked.
RegionRequest regionRequest(const std::string &text, py::list captures) {
  RegionRequest regions;
  regions.text = text;
  for (py::handle c : captures) {
    py::array a = py::array::ensure(c);
    if (!a)
      throw py::value_error("captures: expected arrays");
    regions.captures.push_back(a);
  }
  if (!regions.captures.empty() && regions.text.empty())
    throw py::value_error("captures are read by score_mod / mask_mod "
                          "regions: give their text too");
  return regions;
}

/// The captures as the function's last arguments (", %c0: memref<...>")
/// and as the op's operands ("captures(%c0 : memref<...>) ").
std::pair<std::string, std::string> captureText(const RegionRequest &regions) {
  std::string args, operands, types;
  for (size_t i = 0; i < regions.captures.size(); ++i) {
    const py::array &a = regions.captures[i];
    if (!(a.flags() & py::array::c_style))
      throw py::value_error("captures[" + std::to_string(i) +
                            "]: expected a C-contiguous array");
    std::string type =
        memrefType(std::vector<int64_t>(a.shape(), a.shape() + a.ndim()),
                   captureElementType(a, i));
    std::string name = "%c" + std::to_string(i);
    args += ", " + name + ": " + type;
    operands += (i ? ", " : "") + name;
    types += (i ? ", " : "") + type;
  }
  if (!operands.empty())
    operands = "captures(" + operands + " : " + types + ") ";
  return {args, operands};
}

/// The `scale = ... : f32` attribute of a scale keyword (None: none):
/// checked as given (a double), then written as the f32 it becomes, in text
/// that parses back to that very f32.
std::string scaleAttribute(py::object scale) {
  if (scale.is_none())
    return "";
  double s = scale.cast<double>();
  if (std::optional<std::string> error = fa::checkScale(s))
    raiseCompileError(*error);
  return "scale = " + fa::formatF32(static_cast<float>(s)) + " : f32";
}

/// Lowers fa.attention on the given shapes with fa-cpu-pipeline, JIT
/// compiles it with MLIR's ExecutionEngine and runs it on the arrays (f32,
/// or e4m3 codes with their descales).
py::tuple runCpuImpl(py::array q, py::array k, py::array v, bool causal,
                     py::object scale, const std::string &loopOrder,
                     int64_t blockR, int64_t blockC, int64_t sramBudget,
                     const FP8Request &fp8, py::object sinksArg,
                     RegionRequest &regions) {
  for (auto *a : {&q, &k, &v})
    if (a->ndim() != 4)
      throw py::value_error("q, k and v must be 4-D [B, H, N, D]");
  std::vector<int64_t> qs(q.shape(), q.shape() + 4), ks(k.shape(), k.shape() + 4),
      vs(v.shape(), v.shape() + 4);
  std::string in = fp8.e4m3 ? "f8E4M3FN" : "f32";
  std::vector<int64_t> os = {qs[0], qs[1], qs[2], vs[3]}, ls = {qs[0], qs[1], qs[2]};
  for (int64_t d : {qs[3], vs[3]})
    if (std::optional<std::string> error = fa::checkHeadDim("head dim", d))
      raiseCompileError(*error);
  std::string attrs = causal ? "causal" : "";
  if (std::string scaleAttr = scaleAttribute(scale); !scaleAttr.empty())
    attrs += std::string(attrs.empty() ? "" : ", ") + scaleAttr;
  // e4m3: the descales (rank 0, per tensor) after the outputs, as the op's
  // operands are.
  std::string descaleArgs, descaleOperands;
  if (fp8.e4m3) {
    descaleArgs = ", %qd: memref<f32>, %kd: memref<f32>, %vd: memref<f32>";
    descaleOperands = "descale(%qd, %kd, %vd : memref<f32>, memref<f32>, "
                      "memref<f32>) ";
  }
  // Sinks: one f32 logit per query head, the last operand.
  std::optional<F32Array> sinks;
  std::string sinkArgs, sinkOperands;
  if (!sinksArg.is_none()) {
    sinks = F32Array::ensure(sinksArg);
    if (sinks->ndim() != 1 || sinks->shape(0) != qs[1])
      throw py::value_error("sinks must be 1-D with one logit per query "
                            "head (" +
                            std::to_string(qs[1]) + ")");
    for (int64_t h = 0; h < qs[1]; ++h)
      if (std::optional<std::string> error =
              fa::checkSinkLogit(h, sinks->at(h)))
        raiseCompileError(*error);
    std::string type = memrefType({qs[1]});
    sinkArgs = ", %s: " + type;
    sinkOperands = "sinks(%s : " + type + ") ";
  }
  // Captures of the regions: the last arguments, the op's last operands.
  auto [captureArgs, captureOperands] = captureText(regions);
  std::string text =
      "func.func @attention(%q: " + memrefType(qs, in) +
      ", %k: " + memrefType(ks, in) + ", %v: " + memrefType(vs, in) +
      ", %o: " + memrefType(os) + ", %l: " + memrefType(ls) + descaleArgs +
      sinkArgs + captureArgs +
      ") attributes {llvm.emit_c_interface} {\n  fa.attention %q, %k, %v " +
      descaleOperands + sinkOperands + captureOperands +
      "outs(%o, %l : " + memrefType(os) + ", " + memrefType(ls) + ")" +
      (attrs.empty() ? "" : " {" + attrs + "}") + " : " + memrefType(qs, in) +
      ", " + memrefType(ks, in) + ", " + memrefType(vs, in) + "\n" +
      regions.text + "\n  return\n}\n";

  if (loopOrder != "fa1" && loopOrder != "fa2")
    throw py::value_error("loop_order must be 'fa1' or 'fa2'");
  fa::CPUPipelineOptions options;
  options.loopOrder =
      loopOrder == "fa1" ? fa::LoopOrder::FA1 : fa::LoopOrder::FA2;
  options.blockR = blockR;
  options.blockC = blockC;
  if (sramBudget < 0)
    throw py::value_error("sram_budget must be at least 0 (0: the default)");
  options.sramBudget = sramBudget;
  options.fp8 = fp8.quantize == "tensor"  ? fa::FP8Quantization::Tensor
                : fp8.quantize == "block" ? fa::FP8Quantization::Block
                                          : fa::FP8Quantization::None;
  options.incoherent = fp8.incoherent;
  options.hadamardSeed = fp8.hadamardSeed;
  options.probsScale = fp8.probsScale;

  // Parse, lower and JIT (or find it compiled before); run it outside the
  // context lock.
  std::string key;
  llvm::raw_string_ostream keyStream(key);
  keyStream << loopOrder << " " << blockR << " " << blockC << " " << sramBudget
            << " " << fp8.quantize << " " << fp8.incoherent << " "
            << fp8.hadamardSeed << " " << llvm::format("%a", fp8.probsScale);
  HostFunctionCache::Entry compiled =
      hostFunction(text, key, options, "attention");
  void *fn = compiled.function;

  F32Array out(os), lse(ls);
  auto descriptor = [](void *data, const std::vector<int64_t> &shape) {
    StridedMemRefType<char, 4> d{
        static_cast<char *>(data), static_cast<char *>(data), 0, {}, {}};
    int64_t stride = 1;
    for (int64_t i = int64_t(shape.size()) - 1; i >= 0; --i) {
      d.sizes[i] = shape[i];
      d.strides[i] = stride;
      stride *= shape[i];
    }
    return d;
  };
  auto dq = descriptor(q.mutable_data(), qs),
       dk = descriptor(k.mutable_data(), ks),
       dv = descriptor(v.mutable_data(), vs),
       dout = descriptor(out.mutable_data(), os);
  StridedMemRefType<float, 3> dl{lse.mutable_data(), lse.mutable_data(), 0,
                                 {ls[0], ls[1], ls[2]},
                                 {ls[1] * ls[2], ls[2], 1}};
  float descales[3] = {fp8.descales[0], fp8.descales[1], fp8.descales[2]};
  StridedMemRefType<float, 0> dd[3];
  for (int i = 0; i < 3; ++i)
    dd[i] = {&descales[i], &descales[i], 0};
  StridedMemRefType<float, 1> ds{};
  if (sinks)
    ds = {sinks->mutable_data(), sinks->mutable_data(), 0, {qs[1]}, {1}};
  // The C interface takes a pointer to each descriptor, in the function's
  // argument order; the packed form takes the address of each of those.
  std::vector<void *> descriptors = {&dq, &dk, &dv, &dout, &dl};
  if (fp8.e4m3)
    descriptors.insert(descriptors.end(), {&dd[0], &dd[1], &dd[2]});
  if (sinks)
    descriptors.push_back(&ds);
  // The captures' descriptors.
  std::vector<std::vector<int64_t>> captureDescriptors;
  for (py::array &a : regions.captures)
    captureDescriptors.push_back(descriptorWords(a));
  for (std::vector<int64_t> &words : captureDescriptors)
    descriptors.push_back(words.data());
  std::vector<void *> packed;
  for (void *&descriptor : descriptors)
    packed.push_back(&descriptor);
  {
    py::gil_scoped_release release;
    reinterpret_cast<void (*)(void **)>(fn)(packed.data());
  }
  return py::make_tuple(out, lse);
}

py::tuple runCpu(py::array q, py::array k, py::array v, bool causal,
                 py::object scale, const std::string &loopOrder, int64_t blockR,
                 int64_t blockC, int64_t sramBudget, const std::string &dtype,
                 py::object qDescale, py::object kDescale, py::object vDescale,
                 py::object fp8, bool incoherent, uint64_t hadamardSeed,
                 double probsScale, py::object sinks,
                 const std::string &regionText, py::list captures) {
  RegionRequest regions = regionRequest(regionText, captures);
  FP8Request request;
  std::optional<StringRef> elt = fa::mlirElementTypeName(dtype);
  if (!elt || (*elt != "f32" && *elt != "f8E4M3FN"))
    throw py::value_error("dtype must be 'f32' or 'e4m3', got '" + dtype + "'");
  request.e4m3 = *elt == "f8E4M3FN";
  py::object descales[] = {qDescale, kDescale, vDescale};
  static const char *names[] = {"q_descale", "k_descale", "v_descale"};
  for (int i = 0; i < 3; ++i) {
    if (descales[i].is_none()) {
      if (request.e4m3)
        raiseCompileError(std::string("dtype='e4m3' needs ") + names[i] +
                          " (the per-tensor descale factor, amax / 448)");
      continue;
    }
    if (!request.e4m3)
      raiseCompileError(std::string(names[i]) + " is for dtype='e4m3' inputs");
    double value = descales[i].cast<double>();
    if (std::optional<std::string> error = fa::checkDescale(names[i], value))
      raiseCompileError(*error);
    request.descales[i] = static_cast<float>(value);
  }
  if (!fp8.is_none()) {
    request.quantize = fp8.cast<std::string>();
    if (request.quantize != "tensor" && request.quantize != "block")
      throw py::value_error("fp8 must be None, 'tensor' or 'block', got '" +
                            request.quantize + "'");
    if (request.e4m3)
      raiseCompileError("fp8 quantises f32 inputs; dtype='e4m3' inputs are "
                        "e4m3 already");
  }
  if (incoherent && request.quantize.empty())
    raiseCompileError("incoherent transforms Q and K before their e4m3 "
                      "quantisation: give fp8='tensor' or 'block' too");
  if (probsScale != 0)
    if (std::optional<std::string> error = fa::checkProbsScale(probsScale))
      raiseCompileError(*error);
  request.incoherent = incoherent;
  request.hadamardSeed = hadamardSeed;
  request.probsScale = probsScale;
  if (request.e4m3)
    return runCpuImpl(U8Array::ensure(q), U8Array::ensure(k),
                      U8Array::ensure(v), causal, scale, loopOrder, blockR,
                      blockC, sramBudget, request, sinks, regions);
  return runCpuImpl(F32Array::ensure(q), F32Array::ensure(k),
                    F32Array::ensure(v), causal, scale, loopOrder, blockR,
                    blockC, sramBudget, request, sinks, regions);
}

/// fa.attention_backward on the host (the backward of flex_attention's
/// forward): q, k, v, the forward's o and lse (natural log) and the
/// gradient `dout` of O, float32 [B, H, N, D] ([B, Hq, Nq] for lse), with
/// the forward's scale and regions; returns (dq, dk, dv) in float32.
py::tuple runCpuBackward(F32Array q, F32Array k, F32Array v, F32Array o,
                         F32Array lse, F32Array dout, py::object scale,
                         const std::string &regionText, py::list captures) {
  const std::pair<const char *, F32Array *> arrays[] = {
      {"q", &q}, {"k", &k},     {"v", &v},
      {"o", &o}, {"lse", &lse}, {"dout", &dout}};
  std::vector<std::string> types;
  for (auto [name, a] : arrays) {
    int rank = a == &lse ? 3 : 4;
    if (a->ndim() != rank)
      throw py::value_error(std::string(name) + " must be " +
                            std::to_string(rank) + "-D, got " +
                            std::to_string(a->ndim()) + "-D");
    types.push_back(
        memrefType(std::vector<int64_t>(a->shape(), a->shape() + rank)));
  }
  RegionRequest regions = regionRequest(regionText, captures);
  auto [captureArgs, captureOperands] = captureText(regions);
  std::string attrs = scaleAttribute(scale);
  std::string text =
      "func.func @backward(%q: " + types[0] + ", %k: " + types[1] +
      ", %v: " + types[2] + ", %o: " + types[3] + ", %l: " + types[4] +
      ", %do: " + types[5] + ", %dq: " + types[0] + ", %dk: " + types[1] +
      ", %dv: " + types[2] + captureArgs +
      ") attributes {llvm.emit_c_interface} {\n  fa.attention_backward %q, "
      "%k, %v, %o, %l, %do " +
      captureOperands + "outs(%dq, %dk, %dv : " + types[0] + ", " + types[1] +
      ", " + types[2] + ")" + (attrs.empty() ? "" : " {" + attrs + "}") +
      " : " + llvm::join(types, ", ") + "\n" + regions.text + "\n  return\n}\n";
  HostFunctionCache::Entry compiled =
      hostFunction(text, "fa2", fa::CPUPipelineOptions(), "backward");
  auto shapeOf = [](F32Array &a) {
    return std::vector<py::ssize_t>(a.shape(), a.shape() + a.ndim());
  };
  F32Array dq(shapeOf(q)), dk(shapeOf(k)), dv(shapeOf(v));
  std::vector<py::array> args = {q, k, v, o, lse, dout, dq, dk, dv};
  args.insert(args.end(), regions.captures.begin(), regions.captures.end());
  std::vector<std::vector<int64_t>> words;
  for (py::array &a : args)
    words.push_back(descriptorWords(a));
  std::vector<void *> descriptors, packed;
  for (std::vector<int64_t> &w : words)
    descriptors.push_back(w.data());
  for (void *&d : descriptors)
    packed.push_back(&d);
  {
    py::gil_scoped_release release;
    reinterpret_cast<void (*)(void **)>(compiled.function)(packed.data());
  }
  return py::make_tuple(dq, dk, dv);
}

} // namespace

PYBIND11_MODULE(_compiler, m) {
  m.doc() = "flash-mlir compiler bindings (see flashmlir.compile)";
  m.def("compile", &compile, py::arg("options"), py::arg("run_ptxas") = true);
  m.def(
      "check_options", [](const py::dict &keywords) { optionsOf(keywords); },
      py::arg("options"));
  // fa::kernelFileName: the name fa-compile --out-dir gives a kernel.
  m.def(
      "kernel_file_name",
      [](const py::dict &keywords) {
        return fa::kernelFileName(optionsOf(keywords));
      },
      py::arg("options"));
  m.def("compile_module", &compileModule, py::arg("text"),
        py::arg("options"), py::arg("run_ptxas") = true,
        py::arg("raise_attention") = false);
  // The option table, for flashmlir.compile's keywords: (keyword,
  // fa-compile's flag, kind, keyword form, default), in KernelOptions.def's
  // order.
  m.def("kernel_options", [] {
    static const fa::KernelOptions defaults;
    py::list table;
    size_t index = 0;
    llvm::ArrayRef<fa::KernelOptionInfo> options = fa::kernelOptionTable();
    auto entry = [&](py::object value) {
      const fa::KernelOptionInfo &option = options[index++];
      static const char *kinds[] = {"bool", "int", "real", "text"};
      static const char *forms[] = {"plain", "none_is_default", "chunk_count",
                                    "none_or_bool", "choice"};
      table.append(py::make_tuple(option.keyword.str(), option.flag.str(),
                                  kinds[int(option.kind)],
                                  forms[int(option.keywordForm)], value));
    };
    // A typed choice's default by its name, as the keyword takes it.
    auto value = [](const auto &field) -> py::object {
      using T = std::decay_t<decltype(field)>;
      if constexpr (std::is_enum_v<T>)
        return py::cast(fagpu::choiceName(field).str());
      else if constexpr (std::is_same_v<T, std::optional<fagpu::ElementType>>)
        return field ? py::cast(fagpu::choiceName(*field).str()) : py::none();
      else
        return py::cast(field);
    };
#define FA_KERNEL_OPTION(Field, Type, Default, Flag, FlagForm, Keyword,        \
                         KeywordForm, Help)                                    \
  entry(value(defaults.Field));
#include "fa/Target/KernelOptions.def"
    return table;
  });
  m.def(
      "predicted_bytes",
      [](int64_t blockR, int64_t blockC, int64_t headDim, int64_t elementBytes,
         bool causal, bool bottomRight, int64_t window,
         int64_t diagonalOffset, bool wholeBoxes,
         bool dynamicScheduler, bool writesLse, int64_t b, int64_t hq,
         int64_t hkv, int64_t nq, int64_t nk, int64_t kvSplits,
         int64_t valueHeadDim,
         std::vector<std::pair<int64_t, int64_t>> sequences,
         bool packedSequences, int64_t queryGroup) {
        if (kvSplits < 0 || kvSplits > 1024)
          throw py::value_error("predicted_bytes: kv_splits must be in "
                                "[0, 1024] (0: not a split kernel)");
        for (int64_t v : {blockR, blockC, headDim, valueHeadDim, elementBytes,
                          b, hq, hkv, nq, nk})
          if (v < 1 || v > 0x7fffffff)
            throw py::value_error("predicted_bytes: sizes and shapes must be "
                                  "in [1, 2^31 - 1]");
        if (hq % hkv != 0)
          throw py::value_error("predicted_bytes: the query heads must be a "
                                "multiple of the K/V heads");
        mlir::fa::model::TrafficKernel kernel;
        kernel.blockR = blockR;
        kernel.blockC = blockC;
        kernel.headDim = headDim;
        kernel.valueHeadDim = valueHeadDim;
        kernel.elementBytes = elementBytes;
        kernel.causal = causal;
        kernel.bottomRight = bottomRight;
        kernel.window = window;
        kernel.diagonalOffset = diagonalOffset;
        kernel.wholeBoxes = wholeBoxes;
        kernel.dynamicScheduler = dynamicScheduler;
        kernel.writesLse = writesLse;
        kernel.kvSplits = kvSplits;
        kernel.packedSequences = packedSequences;
        kernel.queryGroup = queryGroup;
        // Sequences of their own lengths (a KV cache's, a varlen batch's).
        std::vector<mlir::fa::model::SequenceLengths> lengths;
        for (auto [queries, keys] : sequences) {
          if (queries < 0 || keys < 0 || queries > 0x7fffffff ||
              keys > 0x7fffffff)
            throw py::value_error("predicted_bytes: each sequence's lengths "
                                  "must be in [0, 2^31 - 1]");
          lengths.push_back({queries, keys});
        }
        // The model's own check of its inputs (the window, the offset and
        // the products included), as fagpu-io-report and the C runtime.
        std::optional<std::string> why =
            lengths.empty()
                ? mlir::fa::model::checkTrafficShape(kernel,
                                                     {b, hq, hkv, nq, nk})
                : mlir::fa::model::checkSequencesTraffic(
                      kernel, hq, hkv, lengths.data(), int64_t(lengths.size()));
        if (why)
          throw py::value_error("predicted_bytes: " + *why);
        mlir::fa::model::Traffic t =
            lengths.empty()
                ? mlir::fa::model::kernelTraffic(kernel, {b, hq, hkv, nq, nk})
                : mlir::fa::model::sequencesTraffic(
                      kernel, hq, hkv, lengths.data(), int64_t(lengths.size()));
        return py::make_tuple(t.reads(), t.writes());
      });
  m.def("run_cpu", &runCpu, py::arg("q"), py::arg("k"), py::arg("v"),
        py::arg("causal") = false, py::arg("scale") = py::none(),
        py::arg("loop_order") = "fa2", py::arg("block_r") = 0,
        py::arg("block_c") = 0, py::arg("sram_budget") = 0,
        py::arg("dtype") = "f32", py::arg("q_descale") = py::none(),
        py::arg("k_descale") = py::none(), py::arg("v_descale") = py::none(),
        py::arg("fp8") = py::none(), py::arg("incoherent") = false,
        py::arg("hadamard_seed") = 0, py::arg("probs_scale") = 256.0,
        py::arg("sinks") = py::none(), py::arg("regions") = "",
        py::arg("captures") = py::list());
  m.def("run_cpu_backward", &runCpuBackward, py::arg("q"), py::arg("k"),
        py::arg("v"), py::arg("o"), py::arg("lse"), py::arg("dout"),
        py::arg("scale") = py::none(), py::arg("regions") = "",
        py::arg("captures") = py::list());
  m.def("to_e4m3", &toE4M3, py::arg("x"));
  m.def("from_e4m3", &fromE4M3, py::arg("codes"));
  m.def("quantize_e4m3", &quantizeE4M3, py::arg("x"));
}
