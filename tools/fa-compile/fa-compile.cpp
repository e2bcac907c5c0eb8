//===- fa-compile.cpp - ahead-of-time attention kernel compiler -----------===//
//
//   fa-compile --arch sm_90a --head-dim 128 --dtype f16 --causal -o out/k
//
// writes out/k.ptx, out/k.cubin and out/k.json (launch metadata), which the
// pure-Python runtime (python/flashmlir/runtime.py) loads on a machine with
// only a driver and torch.
//
//===----------------------------------------------------------------------===//

#include "fa/Dialect/FA/IR/Validation.h"
#include "fa/Pipelines/Pipelines.h"
#include "fa/Support/ToolVersion.h"
#include "fa/Target/Compile.h"

#include "mlir/IR/Diagnostics.h"
#include "mlir/IR/MLIRContext.h"
#include "llvm/ADT/StringExtras.h"
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

static cl::opt<std::string> arch(cl::cat(toolOptions), "arch",
                                 cl::desc("sm_80 | sm_90a | sm_100a"),
                                 cl::init("sm_90a"));
static cl::opt<int64_t>
    valueHeadDim(cl::cat(toolOptions), "value-head-dim",
                 cl::desc("V's and O's head dim (0: the head dim); on sm_90a "
                          "(wgmma) also a multiple of 32 below it, e.g. Q/K "
                          "192 with V 128"),
                 cl::init(0));
static cl::opt<int64_t> headDim(cl::cat(toolOptions), "head-dim",
                                cl::desc("64 | 128 | 256; on sm_90a (wgmma) any "
                                         "multiple of 32 up to 256"),
                                cl::init(128));
static cl::opt<std::string>
    dtype(cl::cat(toolOptions), "dtype",
          cl::desc("f16 | bf16 | e4m3 (sm_90a wgmma, D 128 or 256: FP8 "
                   "Q/K/V with per-tensor or per-(batch, K/V head) descales, "
                   "O in --out-dtype)"),
          cl::init("f16"));
static cl::opt<std::string>
    outDtype(cl::cat(toolOptions), "out-dtype",
             cl::desc("O's element type for --dtype e4m3: f16 | bf16 "
                      "(default bf16)"),
             cl::init(""));
static cl::opt<std::string>
    kvDtype(cl::cat(toolOptions), "kv-dtype",
            cl::desc("K's and V's element type where it is not --dtype's: "
                     "e4m3 (sm_90a wgmma) for an e4m3 KV cache beside an "
                     "f16/bf16 Q, with K's and V's descales"),
            cl::init(""));
static cl::opt<bool> causal(cl::cat(toolOptions), "causal",
                            cl::desc("Causal (top-left) mask"),
                            cl::init(false));
static cl::opt<int64_t> window(cl::cat(toolOptions), "window",
                               cl::desc("Sliding window |i - j| < w"),
                               cl::init(0));
static cl::opt<std::string> causalAlign(
    cl::cat(toolOptions), "causal-align",
    cl::desc("Alignment of the causal/window masks: top-left (query i sees "
             "keys j <= i) or bottom-right (query i at key position "
             "i + Nk - Nq, as with a KV cache)"),
    cl::init("top-left"));
static cl::opt<int64_t> diagonalOffset(
    cl::cat(toolOptions), "diagonal-offset",
    cl::desc("Move the causal/window diagonal d keys right (query i at key "
             "position i + d); flash-attention's window_size (left, right) "
             "is --causal --window left+right+1 --diagonal-offset right"),
    cl::init(0));
static cl::opt<double> softcap(cl::cat(toolOptions), "softcap",
                               cl::desc("Scores c * tanh(s / c)"),
                               cl::init(0.0));
static cl::opt<double> scale(cl::cat(toolOptions), "scale",
                             cl::desc("Softmax scale (default 1/sqrt(D)); "
                                      "the metadata carries it"),
                             cl::init(0.0));
static cl::opt<std::string> splitKV(
    cl::cat(toolOptions), "split-kv",
    cl::desc("wgmma: split-KV (flash-decoding) kernel: each CTA attends its "
             "query block to one chunk of the keys, the last chunk merges. "
             "N (2 to 1024): the launch default; auto: the runtimes pick "
             "the count per launch from the SM count and the shapes; off "
             "(default)"),
    cl::init("off"));
static cl::opt<bool> kvLengths(
    cl::cat(toolOptions), "kv-lengths",
    cl::desc("wgmma: a KV cache's per-sequence key lengths: the kernel takes "
             "kv_lengths [B] (i32) and sequence b attends its first "
             "kv_lengths[b] keys (bottom-right masks align with it)"),
    cl::init(false));
static cl::opt<int64_t> pageSize(
    cl::cat(toolOptions), "page-size",
    cl::desc("wgmma: a paged KV cache of pages of this many rows (a multiple "
             "of 16 and of block_c): K and V are [pages, Hkv, page_size, D] "
             "and the kernel takes a block table [B, max_pages] (i32); 0: "
             "contiguous K/V (default)"),
    cl::init(0));
static cl::opt<bool> varlen(
    cl::cat(toolOptions), "varlen",
    cl::desc("wgmma: a varlen batch: q, k, v, o hold the sequences packed "
             "along N (batch 1) and the kernel takes cu_seqlens_q and "
             "cu_seqlens_k [B + 1] (i32); masks are per sequence"),
    cl::init(false));
static cl::opt<int64_t> ctasPerSM(
    cl::cat(toolOptions), "ctas-per-sm",
    cl::desc("wgmma: resident CTAs per SM the kernel is built for (0: two "
             "for B_r = 64, else one; 1 gives a B_r = 64 kernel the whole "
             "SM's shared memory and registers)"),
    cl::init(0));
static cl::opt<bool> noLse(cl::cat(toolOptions), "no-lse",
                           cl::desc("Write O only (no LSE output)"),
                           cl::init(false));
static cl::opt<int64_t> blockR(cl::cat(toolOptions), "block-r",
                               cl::desc("Query rows per CTA"), cl::init(0));
static cl::opt<int64_t> blockC(cl::cat(toolOptions), "block-c",
                               cl::desc("Keys per block"), cl::init(0));
static cl::opt<bool> queryInRegisters(
    cl::cat(toolOptions), "q-in-registers",
    cl::desc("Keep Q fragments in registers where they fit (default true)"),
    cl::init(true));
static cl::opt<std::string> rescaleThreshold(
    cl::cat(toolOptions), "rescale-threshold",
    cl::desc("FA4 conditional rescaling threshold, log2 units: a number, "
             "'off', or 'auto' (measured: 8 for the sm_90a wgmma kernel and "
             "for D >= 128 on mma.sync, off for D = 64 on mma.sync)"),
    cl::init("auto"));
static cl::opt<int64_t> polyExp2Degree(
    cl::cat(toolOptions), "poly-exp2-degree",
    cl::desc("FA4 software exp2 degree (0: off; -1: the target's default, "
             "3 on sm_100a as in FA4, off on sm_80/sm_90a where it measured "
             "slower)"),
    cl::init(-1));
static cl::opt<int64_t>
    polyExp2Period(cl::cat(toolOptions), "poly-exp2-period",
                   cl::desc("Emulate one exp2 in this many"), cl::init(8));
static cl::opt<std::string> sm90Kernel(
    cl::cat(toolOptions), "sm90-kernel",
    cl::desc("sm_90a kernel: wgmma (FlashAttention-3, default) | mma-sync"),
    cl::init("wgmma"));
static cl::opt<int64_t>
    stages(cl::cat(toolOptions), "stages",
           cl::desc("wgmma/tcgen05: K/V ring depth (2 to 4; 0: "
                    "3 where it fits, else 2)"),
           cl::init(0));
static cl::opt<bool> pingPong(cl::cat(toolOptions), "ping-pong",
                              cl::desc("wgmma: consumer ping-pong"),
                              cl::init(true));
static cl::opt<bool>
    intraOverlap(cl::cat(toolOptions), "intra-overlap",
                 cl::desc("wgmma: softmax under the previous P V"),
                 cl::init(true));
static cl::opt<int64_t> queryGroup(
    cl::cat(toolOptions), "query-group",
    cl::desc("wgmma: pack-GQA beyond one query -- the G query heads of a K/V "
             "head packed query by query into a tile's rows; the kernel "
             "takes Q, O and the LSE packed [B, Hkv, Nq G, D] (0: off)"),
    cl::init(0));
static cl::opt<std::string>
    rowSumMma(cl::cat(toolOptions), "row-sum-mma",
              cl::desc("wgmma e4m3: P's row sums by an MMA against a ones "
                       "column (on, off or auto: the heuristics table)"),
              cl::init("auto"));
static cl::opt<std::string>
    epilogue(cl::cat(toolOptions), "epilogue",
             cl::desc("wgmma: how O leaves the kernel: tma (stmatrix + TMA "
                      "store; varlen: a partial block's rows copied), direct "
                      "(st.global) or auto (tma for D >= 128)"),
             cl::init("auto"));
static cl::opt<cl::boolOrDefault> persistent(
    cl::cat(toolOptions), "persistent",
    cl::desc("wgmma: persistent CTAs looping over the tiles, causal ones "
             "by a dynamic tile scheduler (unset: the back end's measured "
             "choice, on for D = 64 and 128)"));
static cl::opt<std::string> output(cl::cat(toolOptions), "o",
                                   cl::desc("Output path prefix"),
                                   cl::init("attention"));
static cl::opt<std::string>
    emit(cl::cat(toolOptions), "emit",
         cl::desc("all (ptx, cubin, json) | kernel-mlir | host-mlir | "
                  "ptx (to stdout)"),
         cl::init("all"));
static cl::opt<std::string> ptxasPath(cl::cat(toolOptions), "ptxas",
                                      cl::desc("Path to ptxas"), cl::init(""));
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

  // Every value through its one range check (fa/Dialect/FA/IR/Validation.h),
  // with the kernels' 32-bit positions for the window; "0" and "off" mean
  // not given, anything else is checked.
  auto refuse = [](StringRef flag, const std::string &why) {
    llvm::errs() << "fa-compile: error: --" << flag << ": " << why << "\n";
    return 1;
  };
  if (auto why = fa::checkHeadDim("head dim", headDim))
    return refuse("head-dim", *why);
  if (valueHeadDim != 0)
    if (auto why = fa::checkHeadDim("value head dim", valueHeadDim))
      return refuse("value-head-dim", *why);
  if (causalAlign != "top-left" && causalAlign != "bottom-right")
    return refuse("causal-align", "expected top-left or bottom-right, got '" +
                                      causalAlign + "'");
  if (window != 0)
    if (auto why = fa::checkWindow(window, /*positionBits=*/32))
      return refuse("window", *why);
  if (diagonalOffset != 0)
    if (auto why = fa::checkDiagonalOffset(diagonalOffset,
                                           /*positionBits=*/32))
      return refuse("diagonal-offset", *why);
  if (scale != 0.0) // NaN too
    if (auto why = fa::checkScale(scale))
      return refuse("scale", *why);
  if (softcap != 0.0) // NaN too: it is not 0
    if (auto why = fa::checkSoftcap(softcap))
      return refuse("softcap", *why);
  for (auto [flag, rows] : {std::pair<StringRef, int64_t>{"block-r", blockR},
                            {"block-c", blockC}})
    if (rows != 0)
      if (auto why = fa::checkTileSize(flag, rows))
        return refuse(flag, *why);
  int64_t kvSplits = 0;
  if (splitKV == "auto") {
    kvSplits = -1;
  } else if (splitKV != "off") {
    if (!llvm::to_integer(StringRef(splitKV), kvSplits, 10))
      return refuse("split-kv", "expected off, auto or a chunk count, got '" +
                                    splitKV + "'");
    if (auto why = fa::checkKVSplits(kvSplits))
      return refuse("split-kv", *why);
    if (kvSplits == 1)
      return refuse("split-kv", "1 chunk is no split: give off, auto or a "
                                "count of at least 2");
  }
  if (pageSize != 0)
    if (auto why = fa::checkPageSize(pageSize))
      return refuse("page-size", *why + " (0: contiguous K/V)");
  if (varlen && (arch != "sm_90a" || sm90Kernel != "wgmma"))
    return refuse("varlen", "varlen batches have a GPU kernel on sm_90a "
                            "(wgmma) only, not " +
                                arch + (arch == "sm_90a" ? " " + sm90Kernel
                                                         : ""));
  if (varlen && (kvLengths || pageSize || kvSplits))
    return refuse("varlen", "a varlen batch takes no KV cache or split-KV "
                            "(not supported together)");
  if ((kvLengths || pageSize) && (arch != "sm_90a" || sm90Kernel != "wgmma"))
    return refuse(pageSize ? "page-size" : "kv-lengths",
                  "a KV cache has a GPU kernel on sm_90a (wgmma) only, not " +
                      arch + (arch == "sm_90a" ? " " + sm90Kernel : ""));
  if (polyExp2Degree < -1)
    return refuse("poly-exp2-degree",
                  "expected -1 (the target's default), 0 (off) or a degree, "
                  "got " + std::to_string(polyExp2Degree));
  if (polyExp2Degree > 0)
    if (auto why = fa::checkPolyExp2(polyExp2Degree, polyExp2Period))
      return refuse("poly-exp2-degree", *why);

  fa::KernelOptions options;
  options.arch = arch;
  options.headDim = headDim;
  options.valueHeadDim = valueHeadDim;
  options.dtype = dtype;
  options.outDtype = outDtype;
  options.kvDtype = kvDtype;
  options.causal = causal;
  options.window = window;
  options.bottomRight = causalAlign == "bottom-right";
  options.diagonalOffset = diagonalOffset;
  options.softcap = softcap;
  options.scale = scale;
  options.lse = !noLse;
  options.blockR = blockR;
  options.blockC = blockC;
  options.kvSplits = kvSplits;
  options.kvLengths = kvLengths;
  options.pageSize = pageSize;
  options.varlen = varlen;
  options.ctasPerSM = ctasPerSM;
  options.queryInRegisters = queryInRegisters;
  if (rescaleThreshold == "off") {
    options.rescaleThreshold = -1.0;
  } else if (rescaleThreshold != "auto") {
    double tau;
    if (StringRef(rescaleThreshold).getAsDouble(tau))
      return refuse("rescale-threshold",
                    "expected a number, 'off' or 'auto', got '" +
                        rescaleThreshold + "'");
    if (auto why = fa::checkRescaleThreshold(tau))
      return refuse("rescale-threshold", *why);
    options.rescaleThreshold = tau;
  }
  options.polyExp2Degree = polyExp2Degree;
  options.polyExp2Period = polyExp2Period;
  options.sm90Kernel = sm90Kernel;
  options.stages = stages;
  options.pingPong = pingPong;
  options.intraOverlap = intraOverlap;
  options.rowSumMma = rowSumMma;
  options.queryGroup = queryGroup;
  options.persistent = persistent == cl::BOU_UNSET  ? -1
                       : persistent == cl::BOU_TRUE ? 1
                                                    : 0;
  options.epilogue = epilogue;
  options.ptxas = ptxasPath;
  options.runPtxas = emit == "all" && !noCubin;
  if (emit != "all" && emit != "kernel-mlir" && emit != "host-mlir" &&
      emit != "ptx") {
    llvm::errs() << "fa-compile: error: --emit must be all, kernel-mlir, "
                    "host-mlir or ptx, got '"
                 << emit << "'\n";
    return 1;
  }
  if (emit == "all") {
    // -o is a prefix (DIR/NAME -> DIR/NAME.{ptx,cubin,json}): one ending in
    // a separator would write hidden ".ptx" files.
    if (output.empty() || llvm::sys::path::is_separator(output.back()) ||
        StringRef(output).ends_with("/.") || output == ".")
      return refuse("o", "expected a file prefix (DIR/NAME writes "
                         "DIR/NAME.ptx, .cubin, .json), got the folder '" +
                             output + "'");
    // The output's folder first: a missing one is made, and one that cannot
    // be is refused before the compile, not after it.
    StringRef folder = llvm::sys::path::parent_path(output);
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
  std::string prefix = output;
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
