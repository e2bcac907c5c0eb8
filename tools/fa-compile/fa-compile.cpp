//===- fa-compile.cpp - ahead-of-time attention kernel compiler -----------===//
//
//   fa-compile --arch sm_90a --head-dim 128 --dtype f16 --causal -o out/k
//
// writes out/k.ptx, out/k.cubin and out/k.json (launch metadata), which the
// pure-Python runtime (python/flashmlir/runtime.py) loads on a machine with
// only a driver and torch.
//
//===----------------------------------------------------------------------===//

#include "fa/Pipelines/Pipelines.h"
#include "fa/Support/ToolVersion.h"
#include "fa/Target/Compile.h"
#include "fa/Target/KernelOptionFlags.h"

#include "mlir/IR/Diagnostics.h"
#include "mlir/IR/MLIRContext.h"
#include "llvm/Support/CommandLine.h"
#include "llvm/Support/FileSystem.h"
#include "llvm/Support/InitLLVM.h"
#include "llvm/Support/Path.h"
#include "llvm/Support/SourceMgr.h"
#include "llvm/Support/raw_ostream.h"

using namespace mlir;
namespace cl = llvm::cl;

// The tool's own options; --help hides the LLVM ones linked in.
static cl::OptionCategory toolOptions("fa-compile options");

// Every kernel option, as declared once in fa/Target/KernelOptions.def.
static fa::KernelOptionFlags kernelOptions(toolOptions);

static cl::opt<std::string> output(cl::cat(toolOptions), "o",
                                   cl::desc("Output path prefix"),
                                   cl::init("attention"));
static cl::opt<std::string> outputDir(
    cl::cat(toolOptions), "out-dir",
    cl::desc("Write DIR/NAME.{ptx,cubin,json}, NAME the kernel's file name "
             "as flashmlir's kernel lookup expects it (fa::kernelFileName, "
             "e.g. sm_90a_d128_f16_causal_bralign); instead of -o"),
    cl::init(""));
static cl::opt<std::string>
    emit(cl::cat(toolOptions), "emit",
         cl::desc("all (ptx, cubin, json) | kernel-mlir | host-mlir | "
                  "ptx (to stdout)"),
         cl::init("all"));
static cl::opt<bool> noCubin(cl::cat(toolOptions), "no-cubin",
                             cl::desc("Stop at PTX (no ptxas needed)"),
                             cl::init(false));

static bool writeFile(const std::string &path, StringRef data) {
  std::error_code ec;
  llvm::raw_fd_ostream os(path, ec, llvm::sys::fs::OF_None);
  if (ec) {
    llvm::errs() << "fa-compile: error: cannot write " << path << ": "
                 << ec.message() << "\n";
    return false;
  }
  os << data;
  return true;
}

int main(int argc, char **argv) {
  llvm::InitLLVM initLLVM(argc, argv);
  fa::setToolVersionPrinter("fa-compile");
  cl::HideUnrelatedOptions(toolOptions);
  cl::ParseCommandLineOptions(argc, argv,
                              "flash-mlir ahead-of-time kernel compiler\n");
  DialectRegistry registry;
  fa::registerAllFADialects(registry);
  fa::registerAllFAPasses();
  MLIRContext context(registry);
  context.loadAllAvailableDialects();
  llvm::SourceMgr sourceMgr;
  SourceMgrDiagnosticHandler handler(sourceMgr, &context);

  // Every value through its one range check (fa::checkKernelOptions);
  // combinations a target refuses, the compiler refuses with its reason.
  auto refuse = [](StringRef flag, const std::string &why) {
    llvm::errs() << "fa-compile: error: --" << flag << ": " << why << "\n";
    return 1;
  };
  fa::KernelOptions options;
  if (std::optional<fa::KernelOptionError> error =
          kernelOptions.apply(options))
    return refuse(error->option->flag, error->message);
  options.runPtxas = emit == "all" && !noCubin;
  if (emit != "all" && emit != "kernel-mlir" && emit != "host-mlir" &&
      emit != "ptx") {
    llvm::errs() << "fa-compile: error: --emit must be all, kernel-mlir, "
                    "host-mlir or ptx, got '"
                 << emit << "'\n";
    return 1;
  }
  std::string prefix = output;
  if (!outputDir.empty()) {
    if (output.getNumOccurrences())
      return refuse("out-dir", "give -o (a file prefix) or --out-dir (a "
                               "folder, files named by the options), not "
                               "both");
    if (std::optional<fa::KernelOptionError> error =
            fa::checkNamedByFile(options))
      return refuse(error->option->flag, error->message + " (-o)");
    prefix = outputDir + "/" + fa::kernelFileName(options);
  }
  if (emit == "all") {
    // -o is a prefix (DIR/NAME -> DIR/NAME.{ptx,cubin,json}): one ending in
    // a separator would write hidden ".ptx" files.
    if (prefix.empty() || llvm::sys::path::is_separator(prefix.back()) ||
        StringRef(prefix).ends_with("/.") || prefix == ".")
      return refuse("o", "expected a file prefix (DIR/NAME writes "
                         "DIR/NAME.ptx, .cubin, .json), got the folder '" +
                             prefix + "'");
    // The output's folder first: a missing one is made, and one that cannot
    // be is refused before the compile, not after it.
    StringRef folder = llvm::sys::path::parent_path(prefix);
    if (!folder.empty())
      if (std::error_code ec = llvm::sys::fs::create_directories(folder))
        return refuse("o", "cannot create the folder '" + folder.str() +
                               "': " + ec.message());
  }
  FailureOr<fa::CompiledKernel> kernel = fa::compileKernel(context, options);
  if (failed(kernel))
    return 1;
  if (emit == "kernel-mlir") {
    llvm::outs() << kernel->kernelIR << "\n";
    return 0;
  }
  if (emit == "host-mlir") {
    llvm::outs() << kernel->hostIR << "\n";
    return 0;
  }
  if (emit == "ptx") {
    llvm::outs() << kernel->ptx;
    return 0;
  }
  if (!writeFile(prefix + ".ptx", kernel->ptx) ||
      !writeFile(prefix + ".json", kernel->metadata))
    return 1;
  if (!kernel->cubin.empty() && !writeFile(prefix + ".cubin", kernel->cubin))
    return 1;
  llvm::outs() << "fa-compile: " << kernel->name << " -> " << prefix
               << (kernel->cubin.empty() ? ".{ptx,json}" : ".{ptx,cubin,json}")
               << "\n";
  if (!kernel->ptxasLog.empty())
    llvm::outs() << kernel->ptxasLog;
  return 0;
}
