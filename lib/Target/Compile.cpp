//===- Compile.cpp - fa.attention to PTX, cubin and launch metadata -------===//
//
// The GPU back end as a list of stages, as Triton does: fa.attention ->
// (fagpu-tile, fa-lower-fa2, FA4 passes, fa-map-to-gpu, fagpu-*,
// convert-fagpu-to-nvvm) gpu.module in NVVM -> (upstream conversions) LLVM
// dialect -> (gpu-module-to-binary, LLVM NVPTX) PTX -> (ptxas) cubin.
//
//===----------------------------------------------------------------------===//

#include "fa/Target/Compile.h"

#include "fa/Dialect/FA/IR/FAOps.h"
#include "fa/Dialect/FA/IR/Validation.h"
#include "fa/Dialect/FA/Transforms/Passes.h"
#include "fa/Dialect/FAGPU/IR/Heuristics.h"
#include "fa/Dialect/FAGPU/IR/KernelABI.h"
#include "fa/Dialect/FAGPU/IR/SharedMemory.h"
#include "fa/Pipelines/Pipelines.h"
#include "mlir/Dialect/Func/IR/FuncOps.h"

#include "mlir/Dialect/GPU/IR/GPUDialect.h"
#include "mlir/Dialect/LLVMIR/LLVMDialect.h"
#include "mlir/Dialect/LLVMIR/NVVMDialect.h"
#include "mlir/Parser/Parser.h"
#include "mlir/Pass/PassManager.h"
#include "mlir/Pass/PassRegistry.h"
#include "mlir/Target/LLVM/NVVM/Target.h"
#include "mlir/Target/LLVMIR/Dialect/All.h"
#include "llvm/ADT/ScopeExit.h"
#include "llvm/Object/ObjectFile.h"
#include "llvm/Support/CommandLine.h"
#include "llvm/Support/FileSystem.h"
#include "llvm/Support/FormatVariadic.h"
#include "llvm/Support/JSON.h"
#include "llvm/Support/MemoryBuffer.h"
#include "llvm/Support/Path.h"
#include "llvm/Support/Program.h"
#include "llvm/Support/raw_ostream.h"

#include <cmath>
#include <cstdlib>

using namespace mlir;
using namespace mlir::fa;

/// 32-bit shared-memory pointers (as Triton sets them): shared addresses
/// fit in 32 bits, and 64-bit ones cost a second register per address.
/// nvptx-short-ptr is a process-wide LLVM option: it is set once, under the
/// thread-safe initialisation of a local static (set per compile, it was a
/// data race between an embedder's threads compiling at once). It then
/// holds for every NVPTX compilation in the process.
static void useShortSharedPointers() {
  static const bool set = [] {
    auto &registered = llvm::cl::getRegisteredOptions();
    auto it = registered.find("nvptx-short-ptr");
    if (it == registered.end())
      return false;
    static_cast<llvm::cl::opt<bool> *>(it->second)->setValue(true);
    return true;
  }();
  (void)set;
}

OwningOpRef<ModuleOp>
mlir::fa::buildAttentionModule(MLIRContext &context,
                               const KernelOptions &options) {
  std::string d = std::to_string(options.headDim);
  // V and O: Dv columns.
  std::string dv = std::to_string(options.valueHeadDim ? options.valueHeadDim
                                                       : options.headDim);
  bool fp8 = options.dtype == fagpu::ElementType::E4M3;
  std::string elt = fp8 ? "f8E4M3FN" : fagpu::choiceName(options.dtype).str();
  std::string t = "memref<?x?x?x" + d + "x" + elt + ">";
  // An e4m3 KV cache beside a 16-bit Q: K and V of e4m3 codes.
  bool fp8Cache = options.kvDtype == fagpu::ElementType::E4M3 && !fp8;
  std::string kvElt = fp8Cache ? "f8E4M3FN" : elt;
  // e4m3: O in f16/bf16, and the three per-tensor descales.
  std::string ot =
      "memref<?x?x?x" + dv + "x" + (fp8 ? outputDtype(options) : elt) + ">";
  // A paged cache [pages, Hkv, page_size, D] (the page size is static).
  auto kvType = [&](const std::string &columns) {
    return options.pageSize ? "memref<?x?x" + std::to_string(options.pageSize) +
                                  "x" + columns + "x" + kvElt + ">"
                            : "memref<?x?x?x" + columns + "x" + kvElt + ">";
  };
  std::string kv = kvType(d), vt = kvType(dv);
  std::string lse = "memref<?x?x?xf32>";
  std::string attrs;
  auto add = [&](const std::string &a) {
    attrs += (attrs.empty() ? "" : ", ") + a;
  };
  if (options.causal)
    add("causal");
  if (options.window)
    add("window = " + std::to_string(options.window) + " : i64");
  if (options.bottomRight)
    add("bottom_right");
  if (options.diagonalOffset)
    add("diagonal_offset = " + std::to_string(options.diagonalOffset) +
        " : i64");
  if (options.softcap > 0)
    add("softcap = " + formatF32(float(options.softcap)) + " : f32");
  if (options.scale > 0)
    add("scale = " + formatF32(float(options.scale)) + " : f32");
  if (options.blockR)
    add("block_r = " + std::to_string(options.blockR) + " : i64");
  if (options.blockC)
    add("block_c = " + std::to_string(options.blockC) + " : i64");
  // Split-KV: the kernel takes the chunk count per launch. With "auto" the
  // runtimes choose it; the module's own (IR) launch then uses 2.
  if (options.kvSplits)
    add("kv_splits = " +
        std::to_string(options.kvSplits < 0 ? 2 : options.kvSplits) + " : i64");
  if (options.backward) {
    // The backward of that attention: its inputs, O, the LSE and dO in;
    // dQ, dK, dV out.
    std::string text =
        "func.func @attention_backward(%q: " + t + ", %k: " + kv +
        ", %v: " + vt + ", %o: " + ot + ", %lse: " + lse + ", %do: " + ot +
        ", %dq: " + t + ", %dk: " + kv + ", %dv: " + vt +
        ") {\n  fa.attention_backward %q, %k, %v, %o, %lse, %do outs(%dq, "
        "%dk, %dv : " +
        t + ", " + kv + ", " + vt + ")" +
        (attrs.empty() ? "" : " {" + attrs + "}") + " : " + t + ", " + kv +
        ", " + vt + ", " + ot + ", " + lse + ", " + ot + "\n  return\n}\n";
    return parseSourceString<ModuleOp>(text, &context, "<fa-compile options>");
  }
  // Without LSE the kernel writes O only (what inference needs).
  std::string lseArg = options.lse ? ", %lse: " + lse : "";
  std::string outs =
      options.lse ? "%o, %lse : " + ot + ", " + lse : "%o : " + ot;
  // The KV cache's operands after the outputs, in the op's order.
  std::string cacheArgs, cacheOperands;
  if (fp8Cache) {
    // An e4m3 cache's descales come first, as fa.attention prints them.
    cacheArgs += ", %kd: memref<f32>, %vd: memref<f32>";
    cacheOperands += "descale(%kd, %vd : memref<f32>, memref<f32>) ";
  }
  if (options.kvLengths) {
    cacheArgs += ", %lens: memref<?xi32>";
    cacheOperands += "kv_lengths(%lens : memref<?xi32>) ";
  }
  if (options.pageSize) {
    cacheArgs += ", %table: memref<?x?xi32>";
    cacheOperands += "pages(%table : memref<?x?xi32>) ";
  }
  if (options.varlen) {
    cacheArgs += ", %cuq: memref<?xi32>, %cuk: memref<?xi32>";
    cacheOperands += "varlen(%cuq, %cuk : memref<?xi32>, memref<?xi32>) ";
  }
  if (fp8) {
    cacheArgs += ", %qd: memref<f32>, %kd: memref<f32>, %vd: memref<f32>";
    cacheOperands += "descale(%qd, %kd, %vd : memref<f32>, memref<f32>, "
                     "memref<f32>) ";
  }

  std::string text = "func.func @attention(%q: " + t + ", %k: " + kv +
                     ", %v: " + vt + ", %o: " + ot + lseArg + cacheArgs +
                     ") {\n  fa.attention %q, %k, %v " + cacheOperands +
                     "outs(" + outs + ")" +
                     (attrs.empty() ? "" : " {" + attrs + "}") + " : " + t +
                     ", " + kv + ", " + vt + "\n  return\n}\n";
  return parseSourceString<ModuleOp>(text, &context, "<fa-compile options>");
}

/// O's element type: the inputs' for f16/bf16, f16 or bf16 (default) for
/// e4m3.
std::string mlir::fa::outputDtype(const KernelOptions &options) {
  if (options.dtype != fagpu::ElementType::E4M3)
    return fagpu::choiceName(options.dtype).str();
  return fagpu::choiceName(options.outDtype.value_or(fagpu::ElementType::BF16))
      .str();
}

static FailureOr<std::string> findPtxas(const KernelOptions &options) {
  if (!options.ptxas.empty()) {
    if (llvm::sys::fs::can_execute(options.ptxas))
      return options.ptxas;
    return failure();
  }
  SmallVector<std::string> candidates;
  if (const char *home = std::getenv("CUDA_HOME"))
    candidates.push_back(std::string(home) + "/bin/ptxas");
  candidates.push_back("/usr/local/cuda/bin/ptxas");
  for (const std::string &c : candidates)
    if (llvm::sys::fs::can_execute(c))
      return c;
  if (llvm::ErrorOr<std::string> p = llvm::sys::findProgramByName("ptxas"))
    return *p;
  return failure();
}

/// The sm_90a back end is the FlashAttention-3 kernel unless the sm_80
/// one is asked for.
static bool usesWgmma(const KernelOptions &options) {
  return options.arch == fagpu::Target::sm_90a &&
         options.sm90Kernel == fagpu::SM90Kernel::Wgmma;
}

/// Blackwell: the tcgen05 kernel (compile-verified only).
static bool usesTcgen05(const KernelOptions &options) {
  return options.arch == fagpu::Target::sm_100a;
}

/// The kernels fed by TMA take q, k, v as tensor maps and one CTA per tile.
static bool usesTensorMaps(const KernelOptions &options) {
  return usesWgmma(options) || usesTcgen05(options);
}

namespace {
/// What convert-fagpu-to-nvvm built, typed: the schedule and its sizes, read
/// off the kernel before the emission pipeline replaces the gpu.module.
struct BuiltKernel {
  fagpu::Target target;
  fagpu::ScheduleAttr schedule;
  /// The launch grid the lowering gave the kernel (fagpu::launchGrid).
  DictionaryAttr grid;
  int64_t threads = 0, sharedBytes = 0;
  bool writesLse = true;
  float scale = 0.0f; // the attention's softmax scale
  /// e4m3: the V layout kernel the launch runs first (empty otherwise).
  std::string valueLayout;
  /// A KV cache: the kernel that appends a call's new keys and values
  /// before the attention (empty otherwise).
  std::string kvAppend;
  /// The parameters of the attention kernel and of the two above, as the
  /// lowering built their signatures (fagpu.params).
  SmallVector<fagpu::KernelParam> params, valueLayoutParams, kvAppendParams;
  /// The two auxiliary kernels' grids (fagpu.grid).
  DictionaryAttr valueLayoutGrid, kvAppendGrid;
  /// A backward kernel's preprocess and dQ conversion kernels (names,
  /// parameters, grids).
  std::string backwardPreprocess, backwardConvert;
  SmallVector<fagpu::KernelParam> backwardPreprocessParams,
      backwardConvertParams;
  DictionaryAttr backwardPreprocessGrid, backwardConvertGrid;
};
} // namespace

/// The parameters kernel `fn` was built from (fagpu.params).
static FailureOr<SmallVector<fagpu::KernelParam>>
kernelParamsOf(Operation *fn) {
  auto params =
      fn ? fn->getAttrOfType<ArrayAttr>(fagpu::kParamsAttrName) : ArrayAttr();
  if (!params)
    return failure();
  return fagpu::paramsOf(params);
}

static FailureOr<BuiltKernel> builtKernelOf(LLVM::LLVMFuncOp kernel) {
  auto target = kernel->getAttrOfType<fagpu::TargetAttr>("fagpu.target");
  auto schedule = kernel->getAttrOfType<fagpu::ScheduleAttr>("fagpu.schedule");
  auto threads = kernel->getAttrOfType<IntegerAttr>("fagpu.threads");
  auto bytes = kernel->getAttrOfType<IntegerAttr>("fagpu.shared_memory_bytes");
  auto grid = kernel->getAttrOfType<DictionaryAttr>(fagpu::kGridAttrName);
  if (!target || !schedule || !threads || !bytes || !grid)
    return failure();
  auto writesLse = kernel->getAttrOfType<BoolAttr>("fagpu.writes_lse");
  BuiltKernel built;
  built.target = target.getValue();
  built.schedule = schedule;
  built.grid = grid;
  built.threads = threads.getInt();
  built.sharedBytes = bytes.getInt();
  built.writesLse = !writesLse || writesLse.getValue();
  FailureOr<SmallVector<fagpu::KernelParam>> params = kernelParamsOf(kernel);
  if (failed(params))
    return failure();
  built.params = std::move(*params);
  // The auxiliary kernels sit in the attention's gpu.module.
  auto auxiliary = [&](StringRef name, SmallVector<fagpu::KernelParam> &into,
                       DictionaryAttr &grid) {
    Operation *fn = SymbolTable::lookupSymbolIn(kernel->getParentOp(), name);
    FailureOr<SmallVector<fagpu::KernelParam>> list = kernelParamsOf(fn);
    if (failed(list))
      return failure();
    into = std::move(*list);
    grid = fn->getAttrOfType<DictionaryAttr>(fagpu::kGridAttrName);
    return success(grid != nullptr);
  };
  if (auto layout = kernel->getAttrOfType<StringAttr>("fagpu.value_layout")) {
    built.valueLayout = layout.str();
    if (failed(auxiliary(built.valueLayout, built.valueLayoutParams,
                         built.valueLayoutGrid)))
      return failure();
  }
  if (auto append = kernel->getAttrOfType<StringAttr>("fagpu.kv_append")) {
    built.kvAppend = append.str();
    if (failed(auxiliary(built.kvAppend, built.kvAppendParams,
                         built.kvAppendGrid)))
      return failure();
  }
  if (auto pre =
          kernel->getAttrOfType<StringAttr>("fagpu.backward_preprocess")) {
    built.backwardPreprocess = pre.str();
    if (failed(auxiliary(built.backwardPreprocess,
                         built.backwardPreprocessParams,
                         built.backwardPreprocessGrid)))
      return failure();
  }
  if (auto convert =
          kernel->getAttrOfType<StringAttr>("fagpu.backward_convert")) {
    built.backwardConvert = convert.str();
    if (failed(auxiliary(built.backwardConvert, built.backwardConvertParams,
                         built.backwardConvertGrid)))
      return failure();
  }
  return built;
}

/// Adds `code_bytes` to each launch's metadata: the size of its kernel's
/// .text in the cubin. A launch reads its code from DRAM once, which the
/// DRAM model counts (mlir::fa::model::TrafficKernel::codeBytes).
static void recordCodeBytes(CompiledKernel &result) {
  llvm::Expected<std::unique_ptr<llvm::object::ObjectFile>> elf =
      llvm::object::ObjectFile::createObjectFile(
          llvm::MemoryBufferRef(result.cubin, "cubin"));
  if (!elf) {
    llvm::consumeError(elf.takeError());
    return;
  }
  for (CompiledKernel::Launch &launch : result.launches) {
    uint64_t bytes = 0;
    for (const llvm::object::SectionRef &section : (*elf)->sections()) {
      llvm::Expected<StringRef> name = section.getName();
      if (name && *name == (".text." + launch.name))
        bytes = section.getSize();
      else if (!name)
        llvm::consumeError(name.takeError());
    }
    llvm::Expected<llvm::json::Value> json = llvm::json::parse(launch.metadata);
    if (!bytes || !json || !json->getAsObject()) {
      if (!json)
        llvm::consumeError(json.takeError());
      continue;
    }
    (*json->getAsObject())["code_bytes"] = int64_t(bytes);
    launch.metadata.clear();
    llvm::raw_string_ostream os(launch.metadata);
    os << llvm::formatv("{0:2}", *json) << "\n";
  }
  result.metadata = result.launches.front().metadata;
}

/// A launch description attribute (fagpu::launchGrid's) as JSON: strings,
/// integers and nested dictionaries.
static llvm::json::Value jsonOf(Attribute attr) {
  if (auto text = dyn_cast<StringAttr>(attr))
    return text.str();
  if (auto number = dyn_cast<IntegerAttr>(attr))
    return number.getInt();
  llvm::json::Object object;
  for (NamedAttribute entry : cast<DictionaryAttr>(attr))
    object[entry.getName().str()] = jsonOf(entry.getValue());
  return object;
}

/// A kernel's parameters as the metadata's "params": the list the lowering
/// built its signature from, by name, kind, dtype, shape and meaning (and a
/// tensor map's box, swizzle, rank and L2 promotion).
static llvm::json::Array paramsJson(ArrayRef<fagpu::KernelParam> list) {
  llvm::json::Array params;
  for (const fagpu::KernelParam &p : list) {
    llvm::json::Object param{{"name", p.name},
                             {"kind", fagpu::paramKindName(p.kind)}};
    if (!p.dtype.empty())
      param["dtype"] = p.dtype;
    if (!p.shape.empty()) {
      llvm::json::Array shape;
      for (const std::string &dim : p.shape)
        shape.push_back(dim);
      param["shape"] = std::move(shape);
    }
    if (!p.meaning.empty())
      param["meaning"] = p.meaning;
    if (p.kind == fagpu::ParamKind::TensorMap) {
      // A box row is the swizzle span.
      int64_t elementBytes = p.dtype == "e4m3" ? 1 : 2;
      param["box"] =
          llvm::json::Array{p.swizzleBytes / elementBytes, p.boxRows};
      param["swizzle"] = std::to_string(p.swizzleBytes) + "B";
      param["rank"] = p.rank;
      param["l2_promotion"] = p.l2Promotion;
    }
    params.push_back(std::move(param));
  }
  return params;
}

static std::string metadataJson(StringRef kernelName,
                                const KernelOptions &options,
                                const BuiltKernel &built) {
  fagpu::ScheduleAttr schedule = built.schedule;
  int64_t blockR = schedule.getBlockR(), blockC = schedule.getBlockC();
  // Resident CTAs per SM the kernel is built for (2 for the sm_90a kernel
  // with one consumer warpgroup); a persistent grid launches that many.
  int64_t ctasPerSM = schedule.getCtasPerSm();
  bool persistent = schedule.isPersistent();
  // The wgmma and tcgen05 kernels take q, k, v as TMA tensor maps the
  // runtime encodes, and one CTA per (query block, head) tile.
  bool tensorMaps = usesTensorMaps(options);
  // How the CTAs find their tiles; a dynamic tile scheduler takes them from
  // a counter the runtime provides.
  StringRef scheduler =
      !tensorMaps ? "grid"
      : schedule.getScheduler() == fagpu::TileScheduler::Single
          ? "one tile per CTA"
          : fagpu::stringifyTileScheduler(schedule.getScheduler());
  // The tensor maps' boxes, as the lowering built the parameters: rows of
  // a map's box (0 where the parameter is a pointer), and a box row's
  // columns, the swizzle span of Q's elements.
  auto tensorMap = [&](StringRef name) -> const fagpu::KernelParam * {
    for (const fagpu::KernelParam &p : built.params)
      if (p.name == name && p.kind == fagpu::ParamKind::TensorMap)
        return &p;
    return nullptr;
  };
  auto boxRowsOf = [&](StringRef name) -> int64_t {
    const fagpu::KernelParam *map = tensorMap(name);
    return map ? map->boxRows : 0;
  };
  const fagpu::KernelParam *qMap = tensorMap("q");
  int64_t boxColumns =
      qMap ? qMap->swizzleBytes / (qMap->dtype == "e4m3" ? 1 : 2) : 0;
  llvm::json::Array params = paramsJson(built.params);
  llvm::json::Object root{
      {"format", "flash-mlir-kernel-1"},
      {"kernel", kernelName},
      {"arch", fagpu::stringifyTarget(options.arch)},
      {"head_dim", options.headDim},
      {"value_head_dim",
       options.valueHeadDim ? options.valueHeadDim : options.headDim},
      {"dtype", fagpu::choiceName(options.dtype)},
      {"kv_dtype", fagpu::choiceName(options.kvDtype.value_or(options.dtype))},
      {"out_dtype", outputDtype(options)},
      {"causal", options.causal},
      {"bottom_right", options.bottomRight},
      {"window", options.window},
      {"diagonal_offset", options.diagonalOffset},
      {"softcap", options.softcap},
      {"rescale_threshold", options.rescaleThreshold},
      {"exp2_poly_degree", options.polyExp2Degree},
      {"exp2_poly_period", options.polyExp2Period},
      {"layout",
       fagpu::stridedTensors(built.target)
           ? "strided [B, H, N, D] for q, k, v, o (batch, head and row "
             "strides in multiples of 8 elements, unit stride on D); "
             "contiguous [B, H, N] for lse"
           : "contiguous [B, H, N, D] for q, k, v, o; [B, H, N] for lse"},
      {"block", llvm::json::Array{built.threads, 1, 1}},
      // As the lowering launches it (fagpu::launchGrid).
      {"grid", jsonOf(built.grid)},
      {"tile_grid", tensorMaps},
      {"persistent", tensorMaps && persistent},
      {"tile_scheduler", scheduler},
      {"ctas_per_sm", ctasPerSM},
      {"block_r", blockR},
      {"block_c", blockC},
      {"kv_stages", schedule.getStages()},
      {"shared_memory_bytes", built.sharedBytes},
      {"tma_box_cols", boxColumns},
      // A paged cache's pages shorter than a block: one box per page.
      {"tma_box_rows_kv", boxRowsOf("k")},
      // O leaves the sm_90a kernel by TMA stores of boxes of one consumer's
      // rows, in a varlen kernel those of whole blocks (0: o is a pointer,
      // written from registers or by rows copied from the Q buffer).
      {"tma_box_rows_o", boxRowsOf("o")},
      {"writes_lse", built.writesLse},
      {"split_kv", schedule.isSplitKV()},
      // Pack-GQA beyond one query: Q, O and the LSE packed [B, Hkv, Nq G,
      // D], row r query r / G of head h G + r mod G (0: not packed).
      {"query_group", schedule.getQueryGroup()},
      // KV cache: per-sequence key lengths, a paged K/V's rows per page.
      {"kv_lengths", options.kvLengths},
      {"page_size", options.pageSize},
      // A varlen batch: sequences packed along N (cu_seqlens_q/k).
      {"varlen", options.varlen},
      {"kv_splits", !schedule.isSplitKV()  ? 0
                    : options.kvSplits < 0 ? 0
                                           : schedule.getKvSplits()},
      {"scale", double(built.scale)},
      {"params", std::move(params)},
  };
  // Tiles of at most this many real rows (fagpu's max_rows; absent: any),
  // which the launchers check against the launch's rows.
  if (int64_t maxRows = schedule.getMaxRows())
    root["max_rows"] = maxRows;
  if (!built.valueLayout.empty()) {
    // e4m3: V^T for the P V product, written by a kernel of the same cubin
    // on the launch's stream before the attention (v_t, a workspace of
    // B * Hkv * D * Nk_128 bytes, Nk_128 = Nk rounded up to the key
    // alignment, 128).
    root["value_layout"] = llvm::json::Object{
        {"kernel", built.valueLayout},
        {"block", llvm::json::Array{fagpu::kValueLayoutThreads, 1, 1}},
        {"key_alignment", fagpu::kValueLayoutKeyAlign},
        {"columns_per_thread", fagpu::kValueLayoutColumnsPerThread},
        {"grid", jsonOf(built.valueLayoutGrid)},
        {"params", paramsJson(built.valueLayoutParams)}};
  }
  if (!built.kvAppend.empty()) {
    // A KV cache: the call's new keys and values written into the cache,
    // and the lengths the attention reads (cache_seqlens + Nnew), by a
    // kernel of the same cubin on the launch's stream before the attention.
    root["kv_append"] = llvm::json::Object{
        {"kernel", built.kvAppend},
        {"block", llvm::json::Array{fagpu::kKVAppendThreads, 1, 1}},
        {"columns_per_thread", fagpu::kKVAppendColumnsPerThread},
        {"grid", jsonOf(built.kvAppendGrid)},
        {"params", paramsJson(built.kvAppendParams)}};
  }
  std::string out;
  llvm::raw_string_ostream os(out);
  os << llvm::formatv("{0:2}", llvm::json::Value(std::move(root))) << "\n";
  return out;
}

/// What the backward kernel takes (SM80Backward.cpp); the rest is refused
/// by name.
static LogicalResult checkBackward(Location loc, const KernelOptions &options) {
  // The backward kernel is mma.sync on every target it has (sm_90a runs
  // it as it is; --sm90-kernel chooses among forward kernels).
  if (usesTcgen05(options))
    return emitError(loc) << "fa-compile: the backward kernel is mma.sync: "
                             "--arch sm_80 or sm_90a, not "
                          << fagpu::stringifyTarget(options.arch);
  if (options.dtype != fagpu::ElementType::F16 &&
      options.dtype != fagpu::ElementType::BF16)
    return emitError(loc) << "fa-compile: the backward kernel takes f16 or "
                             "bf16, got "
                          << fagpu::choiceName(options.dtype);
  int64_t dv = options.valueHeadDim ? options.valueHeadDim : options.headDim;
  if ((options.headDim != 64 && options.headDim != 128) ||
      dv != options.headDim)
    return emitError(loc) << "fa-compile: the backward kernel takes head dim "
                             "64 or 128 for Q, K and V alike, got "
                          << options.headDim << " and " << dv;
  std::pair<bool, StringRef> unsupported[] = {
      {options.softcap != 0.0, "--softcap"},
      {options.kvSplits != 0, "--split-kv"},
      {options.kvLengths, "--kv-lengths"},
      {options.pageSize != 0, "--page-size"},
      {options.varlen, "--varlen"},
      {options.queryGroup != 0, "--query-group"},
      {options.maxRows != 0, "--max-rows"},
      {options.kvDtype.has_value() && *options.kvDtype != options.dtype,
       "--kv-dtype"}};
  for (auto [asked, flag] : unsupported)
    if (asked)
      return emitError(loc) << "fa-compile: " << flag
                            << " has no backward kernel yet (the CPU path "
                               "runs it: fa-run --backward)";
  return success();
}

static LogicalResult checkTarget(Location loc, const KernelOptions &options) {
  if (options.backward)
    return checkBackward(loc, options);
  if (options.deterministic)
    return emitError(loc) << "fa-compile: --deterministic orders the "
                             "backward's dQ adds: it needs --backward (the "
                             "forward kernels are deterministic)";
  // Asked for by name on a kernel whose P is not e4m3: refused, not
  // silently ignored (the pass leaves such kernels alone).
  using fagpu::ElementType;
  if (options.rowSumMma == fagpu::Switch::On &&
      options.dtype != ElementType::E4M3)
    return emitError(loc) << "fa-compile: --row-sum-mma on sums an e4m3 P "
                             "on the tensor cores: it needs --dtype e4m3";
  if (options.rowSumMma == fagpu::Switch::On && options.lse)
    return emitError(loc) << "fa-compile: --row-sum-mma on needs --no-lse: "
                          << fagpu::kRowSumMmaLseWhy;
  // e4m3 ("e4m3" from the tools, f8E4M3FN from a module): refused with the
  // reason, never compiled as an f16 kernel.
  StringRef dtype = fagpu::choiceName(options.dtype);
  if (std::optional<StringRef> elt = mlirElementTypeName(dtype))
    if (std::optional<std::string> why =
            checkTargetElementType(fagpu::stringifyTarget(options.arch), *elt))
      return emitError(loc) << "fa-compile: " << *why;
  if (options.dtype == ElementType::E4M3) {
    if (!usesWgmma(options))
      return emitError(loc)
             << "fa-compile: FP8 (e4m3) has a kernel on sm_90a "
                "wgmma only, not "
             << fagpu::stringifyTarget(options.arch)
             << (options.arch == fagpu::Target::sm_90a ? " mma-sync" : "");
    if (options.outDtype == ElementType::E4M3)
      return emitError(loc) << "fa-compile: an e4m3 kernel writes O in f16 or "
                               "bf16, got 'e4m3'";
  } else if (options.outDtype && *options.outDtype != options.dtype) {
    return emitError(loc) << "fa-compile: --out-dtype is for e4m3 inputs; "
                          << dtype << " kernels write O in " << dtype;
  }
  if (options.kvDtype && *options.kvDtype != options.dtype) {
    if (*options.kvDtype != ElementType::E4M3)
      return emitError(loc) << "fa-compile: --kv-dtype must be e4m3 (an e4m3 "
                               "KV cache beside a 16-bit Q) or left out, got '"
                            << fagpu::choiceName(*options.kvDtype) << "'";
    if (!usesWgmma(options))
      return emitError(loc)
             << "fa-compile: an e4m3 KV cache has a kernel on "
                "sm_90a wgmma only, not "
             << fagpu::stringifyTarget(options.arch)
             << (options.arch == fagpu::Target::sm_90a ? " mma-sync" : "");
    if (options.varlen)
      return emitError(loc) << "fa-compile: an e4m3 KV cache takes no varlen "
                               "batch";
  }
  // The FA3 kernel's schedule choices (fagpu-* passes of the sm_90a wgmma
  // pipeline): refused where no pass would read them, not ignored.
  if (!usesWgmma(options)) {
    std::string where =
        fagpu::stringifyTarget(options.arch).str() +
        (options.arch == fagpu::Target::sm_90a ? " mma-sync" : "");
    struct Choice {
      bool given;
      const char *what;
    };
    // sm_100a's pipeline reads the K/V ring's depth too.
    const Choice wgmmaOnly[] = {
        {options.stages != 0 && options.arch != fagpu::Target::sm_100a,
         "--stages"},
        {!options.pingPong, "--ping-pong"},
        {!options.intraOverlap, "--intra-overlap"},
        {options.rowSumMma != fagpu::Switch::Auto, "--row-sum-mma"},
        {options.queryGroup != 0, "--query-group"},
        {options.maxRows != 0, "--max-rows"},
        {options.epilogue != fagpu::EpilogueRequest::Auto, "--epilogue"},
        {options.persistent != -1, "--persistent"},
        {options.ctasPerSM != 0, "--ctas-per-sm"}};
    for (const Choice &choice : wgmmaOnly)
      if (choice.given)
        return emitError(loc)
               << "fa-compile: " << choice.what
               << " is a choice of the sm_90a wgmma (FlashAttention-3) "
                  "kernel; the "
               << where << " kernel has none";
  }
  if (!options.queryInRegisters && options.arch != fagpu::Target::sm_80 &&
      !(options.arch == fagpu::Target::sm_90a &&
        options.sm90Kernel == fagpu::SM90Kernel::MmaSync))
    return emitError(loc) << "fa-compile: --q-in-registers is a choice of the "
                             "mma.sync kernel; the "
                          << fagpu::stringifyTarget(options.arch)
                          << " kernel reads Q from shared memory";
  if (options.dtype == fagpu::ElementType::E4M3 &&
      (options.kvLengths || options.pageSize || options.varlen ||
       options.kvSplits != 0))
    return emitError(loc) << "fa-compile: FP8 (e4m3) kernels have no "
                             "split-KV, KV-cache (--kv-lengths, --page-size) "
                             "or varlen form yet";
  if (options.varlen && !usesWgmma(options))
    return emitError(loc) << "fa-compile: varlen batches have a GPU kernel on "
                             "sm_90a (wgmma) only, not "
                          << fagpu::stringifyTarget(options.arch);
  if (options.varlen &&
      (options.kvLengths || options.pageSize || options.kvSplits != 0))
    return emitError(loc) << "fa-compile: a varlen batch takes no KV cache or "
                             "split-KV (not supported together)";
  if ((options.kvLengths || options.pageSize) && !usesWgmma(options))
    return emitError(loc) << "fa-compile: per-sequence key lengths and paged "
                             "K/V have a GPU kernel on sm_90a (wgmma) only, "
                             "not "
                          << fagpu::stringifyTarget(options.arch)
                          << (options.arch == fagpu::Target::sm_90a
                                  ? " mma-sync"
                                  : "");
  if (options.pageSize < 0)
    return emitError(loc) << "fa-compile: the page size must be positive, got "
                          << options.pageSize;
  fagpu::Target target = options.arch;
  if (std::optional<std::string> why = fagpu::checkHeadDims(
          target, usesWgmma(options), options.headDim,
          options.valueHeadDim ? options.valueHeadDim : options.headDim))
    return emitError(loc) << "fa-compile: " << *why;
  return success();
}

/// The backward kernel on sm_90a adds into dQ two columns a reduction
/// (red.global.add.v2.f32): half the L2 atomics that bound it.
static bool backwardVectorReductions(const KernelOptions &options) {
  return options.backward && options.arch == fagpu::Target::sm_90a;
}

/// The emission half of the back end's pipeline on `module` (its kernels
/// already in NVVM): the PTX of its gpu.module into `result`.
static LogicalResult emitPtx(ModuleOp module, const KernelOptions &options,
                             CompiledKernel &result) {
  MLIRContext &context = *module.getContext();
  Location loc = module.getLoc();
  {
    PassManager pm(&context);
    if (usesTcgen05(options)) {
      buildSM100EmissionPipeline(pm);
    } else if (usesWgmma(options)) {
      buildSM90EmissionPipeline(pm);
    } else {
      SM80PipelineOptions pipeline;
      pipeline.chip = fagpu::stringifyTarget(options.arch).str();
      pipeline.vectorReductions = backwardVectorReductions(options);
      buildSM80EmissionPipeline(pm, pipeline);
    }
    if (failed(pm.run(module)))
      return failure();
  }
  auto binary = module.lookupSymbol<gpu::BinaryOp>("fa_kernels");
  if (!binary || binary.getObjects().empty())
    return emitError(loc) << "fa-compile: no PTX was produced";
  result.ptx = cast<gpu::ObjectAttr>(binary.getObjects()[0])
                   .getObject()
                   .getValue()
                   .str();
  return success();
}

/// ptxas on `result`'s PTX (unless the options skip it): its cubin, the
/// assembler's log and each launch's code bytes.
static LogicalResult assemble(Location loc, const KernelOptions &options,
                              CompiledKernel &result) {
  if (!options.runPtxas)
    return success();
  // PTX -> cubin with the toolkit's assembler.
  FailureOr<std::string> ptxas = findPtxas(options);
  if (failed(ptxas))
    return emitError(loc)
           << "fa-compile: ptxas not found"
           << (options.ptxas.empty()
                   ? " (looked in $CUDA_HOME/bin, /usr/local/cuda/bin and "
                     "PATH; pass --ptxas or --no-cubin)"
                   : " at '" + options.ptxas + "'");
  SmallString<128> ptxPath, cubinPath, logPath;
  if (llvm::sys::fs::createTemporaryFile("fa", "ptx", ptxPath) ||
      llvm::sys::fs::createTemporaryFile("fa", "cubin", cubinPath) ||
      llvm::sys::fs::createTemporaryFile("fa", "log", logPath))
    return emitError(loc) << "fa-compile: cannot create temporary files";
  llvm::scope_exit cleanup([&] {
    llvm::sys::fs::remove(ptxPath);
    llvm::sys::fs::remove(cubinPath);
    llvm::sys::fs::remove(logPath);
  });
  {
    std::error_code ec;
    llvm::raw_fd_ostream os(ptxPath, ec);
    if (ec)
      return emitError(loc) << "fa-compile: cannot write " << ptxPath;
    os << result.ptx;
  }
  SmallVector<StringRef> args = {
      *ptxas, "-arch",  fagpu::stringifyTarget(options.arch),
      "-O3",  "-v",     ptxPath,
      "-o",   cubinPath};
  std::optional<StringRef> redirects[] = {std::nullopt, StringRef(logPath),
                                          StringRef(logPath)};
  std::string errMsg;
  int rc = llvm::sys::ExecuteAndWait(*ptxas, args, std::nullopt, redirects, 0,
                                     0, &errMsg);
  if (auto log = llvm::MemoryBuffer::getFile(logPath))
    result.ptxasLog = (*log)->getBuffer().str();
  if (rc != 0)
    return emitError(loc) << "fa-compile: ptxas failed (exit " << rc
                          << (errMsg.empty() ? "" : ", " + errMsg) << "):\n"
                          << result.ptxasLog;
  auto cubin = llvm::MemoryBuffer::getFile(cubinPath, /*IsText=*/false);
  if (!cubin)
    return emitError(loc) << "fa-compile: ptxas wrote no cubin";
  result.cubin = (*cubin)->getBuffer().str();
  recordCodeBytes(result);
  return success();
}

/// The end of a compilation once the back end built the kernels (`built`,
/// one per launch in program order): the kernel and host IR as text, the
/// PTX, each launch's metadata (`metadataOf(launch, kernel, facts)`) and
/// the cubin.
static FailureOr<CompiledKernel>
finishCompile(ModuleOp module, gpu::GPUModuleOp gpuModule,
              ArrayRef<std::string> hostNames,
              ArrayRef<std::pair<std::string, BuiltKernel>> built,
              const KernelOptions &options,
              function_ref<std::string(size_t, StringRef, const BuiltKernel &)>
                  metadataOf) {
  CompiledKernel result;
  result.name = built.front().first;
  {
    llvm::raw_string_ostream os(result.kernelIR);
    gpuModule.print(os);
  }
  {
    llvm::raw_string_ostream os(result.hostIR);
    for (const std::string &name : hostNames)
      module.lookupSymbol(name)->print(os);
  }
  if (failed(emitPtx(module, options, result)))
    return failure();
  for (auto [i, entry] : llvm::enumerate(built))
    result.launches.push_back(
        {entry.first, metadataOf(i, entry.first, entry.second)});
  result.metadata = result.launches.front().metadata;
  if (failed(assemble(module.getLoc(), options, result)))
    return failure();
  return result;
}

/// One of the backward's kernels on query rows (the preprocess, dQ's
/// conversion), as its launch metadata lists it.
static llvm::json::Object rowsKernelJson(StringRef name,
                                         ArrayRef<fagpu::KernelParam> params,
                                         DictionaryAttr grid) {
  return llvm::json::Object{
      {"kernel", name},
      {"block", llvm::json::Array{fagpu::kBackwardRowsThreads, 1, 1}},
      {"grid", jsonOf(grid)},
      {"params", paramsJson(params)}};
}

/// A backward kernel's launch metadata: its own format, so that a
/// forward launcher refuses it by name.
static std::string backwardMetadataJson(StringRef kernelName,
                                        const KernelOptions &options,
                                        const BuiltKernel &built) {
  llvm::json::Object root{
      {"format", "flash-mlir-backward-2"},
      {"kernel", kernelName},
      {"arch", fagpu::stringifyTarget(options.arch)},
      {"head_dim", options.headDim},
      {"dtype", fagpu::choiceName(options.dtype)},
      {"causal", options.causal},
      {"window", options.window},
      {"bottom_right", options.bottomRight},
      {"diagonal_offset", options.diagonalOffset},
      // dQ's adds in the order of the key blocks (dq_semaphores, zeroed
      // by the preprocess like dq_accum).
      {"deterministic", options.deterministic},
      {"layout", "contiguous [B, H, N, D] for q, k, v, o, do, dq, dk, dv "
                 "and dq_accum; [B, H, N] for lse and row_dots"},
      // The backward is three launches on one stream, all kernels of this
      // cubin: the preprocess, this kernel, then dQ's conversion.
      {"preprocess",
       rowsKernelJson(built.backwardPreprocess, built.backwardPreprocessParams,
                      built.backwardPreprocessGrid)},
      {"convert",
       rowsKernelJson(built.backwardConvert, built.backwardConvertParams,
                      built.backwardConvertGrid)},
      {"block", llvm::json::Array{built.threads, 1, 1}},
      {"grid", jsonOf(built.grid)},
      {"block_r", built.schedule.getBlockR()},
      {"block_c", built.schedule.getBlockC()},
      {"shared_memory_bytes", built.sharedBytes},
      {"scale", double(built.scale)},
      {"params", paramsJson(built.params)},
  };
  std::string out;
  llvm::raw_string_ostream os(out);
  os << llvm::formatv("{0:2}", llvm::json::Value(std::move(root))) << "\n";
  return out;
}

/// compileModule for a module of fa.attention_backward ops: each becomes a
/// launch of the mma.sync backward kernel (its main loop; the preprocess
/// and dQ's conversion are the caller's, as the metadata says).
static FailureOr<CompiledKernel>
compileBackward(ModuleOp module, const KernelOptions &requested,
                ArrayRef<AttentionBackwardOp> ops) {
  MLIRContext &context = *module.getContext();
  Location loc = module.getLoc();
  struct Launch {
    KernelOptions options;
    float scale;
  };
  std::vector<Launch> launches;
  SmallVector<std::string> hostNames;
  for (AttentionBackwardOp op : ops) {
    Location opLoc = op.getLoc();
    KernelOptions options = requested;
    options.backward = true;
    // The one backward kernel is mma.sync's, on sm_90a too.
    options.sm90Kernel = fagpu::SM90Kernel::MmaSync;
    MemRefType q = op.getQueryType();
    options.headDim = q.getDimSize(3);
    options.valueHeadDim = op.getValueType().getDimSize(3);
    Type elt = q.getElementType();
    if (!elt.isF16() && !elt.isBF16())
      return emitError(opLoc) << "fa-compile: the backward kernel takes f16 "
                                 "or bf16, got '"
                              << elt << "'";
    options.dtype =
        elt.isF16() ? fagpu::ElementType::F16 : fagpu::ElementType::BF16;
    options.causal = op.getCausal();
    options.bottomRight = op.getBottomRight();
    options.window = op.getWindow().value_or(0);
    options.diagonalOffset = op.getDiagonalOffset().value_or(0);
    options.softcap =
        op.getSoftcap() ? op.getSoftcap()->convertToDouble() : 0.0;
    options.varlen = static_cast<bool>(op.getCuSeqlensQ());
    if (op.getSinks() || op.hasModifications())
      return emitError(opLoc)
             << "fa-compile: attention sinks, score_mod and mask_mod have no "
                "backward kernel yet (the CPU path runs them: fa-run "
                "--backward)";
    if (failed(checkBackward(opLoc, options)))
      return failure();
    auto hostFunc = op->getParentOfType<func::FuncOp>();
    if (!hostFunc)
      return emitError(opLoc)
             << "fa-compile: fa.attention_backward must be in a func.func";
    if (!llvm::is_contained(hostNames, hostFunc.getName().str()))
      hostNames.push_back(hostFunc.getName().str());
    launches.push_back({options, float(op.getEffectiveScale())});
  }
  const KernelOptions &options = launches.front().options;
  useShortSharedPointers();
  {
    PassManager pm(&context);
    SM80PipelineOptions pipeline;
    pipeline.chip = fagpu::stringifyTarget(options.arch).str();
    pipeline.deterministicBackward = options.deterministic;
    pipeline.vectorReductions = backwardVectorReductions(options);
    buildSM80KernelPipeline(pm, pipeline);
    if (failed(pm.run(module)))
      return failure();
  }
  auto gpuModule = module.lookupSymbol<gpu::GPUModuleOp>("fa_kernels");
  if (!gpuModule)
    return emitError(loc) << "fa-compile: the back end built no kernel";
  std::vector<std::pair<std::string, BuiltKernel>> built;
  module.walk([&](gpu::LaunchFuncOp op) {
    auto callee = gpuModule.lookupSymbol<LLVM::LLVMFuncOp>(op.getKernelName());
    if (!callee || !callee->hasAttr("fagpu.backward"))
      return;
    FailureOr<BuiltKernel> facts = builtKernelOf(callee);
    if (succeeded(facts))
      built.push_back({op.getKernelName().str(), *facts});
  });
  if (built.size() != launches.size())
    return emitError(loc) << "fa-compile: " << launches.size()
                          << " backward attentions became " << built.size()
                          << " kernel launches";
  for (auto [entry, launch] : llvm::zip(built, launches))
    entry.second.scale = launch.scale;
  return finishCompile(module, gpuModule, hostNames, built, options,
                       [&](size_t i, StringRef name, const BuiltKernel &k) {
                         return backwardMetadataJson(name, launches[i].options,
                                                     k);
                       });
}

FailureOr<CompiledKernel>
mlir::fa::compileKernel(MLIRContext &context, const KernelOptions &options) {
  if (failed(checkTarget(UnknownLoc::get(&context), options)))
    return failure();
  OwningOpRef<ModuleOp> module = buildAttentionModule(context, options);
  if (!module)
    return failure();
  return compileModule(*module, options);
}

FailureOr<CompiledKernel>
mlir::fa::compileModule(ModuleOp module, const KernelOptions &requested) {
  MLIRContext &context = *module.getContext();
  Location loc = module.getLoc();
  // A refusal names the op's location; the op itself, printed in generic
  // form mid-pipeline (operands as <<UNKNOWN SSA VALUE>>), tells a user of
  // fa-compile, compile() or the C API nothing more. The caller's setting
  // comes back on return.
  bool printedOp = context.shouldPrintOpOnDiagnostic();
  context.printOpOnDiagnostic(false);
  auto restore =
      llvm::make_scope_exit([&] { context.printOpOnDiagnostic(printedOp); });
  // Regions that spell a built-in (the causal mask, a softcap) are the
  // built-in from here on: the options, the heuristics and the launch
  // metadata below read the attributes.
  PassManager fold(&context);
  fold.addNestedPass<func::FuncOp>(createFAFoldModifications());
  if (failed(fold.run(module)))
    return failure();
  // Every attention of the module becomes a kernel launch; each fixes its
  // own head dim, dtype, mask and scale.
  SmallVector<AttentionOp> attentions;
  module.walk([&](AttentionOp op) { attentions.push_back(op); });
  SmallVector<AttentionBackwardOp> backwards;
  module.walk([&](AttentionBackwardOp op) { backwards.push_back(op); });
  if (!backwards.empty()) {
    if (!attentions.empty())
      return emitError(attentions.front().getLoc())
             << "fa-compile: the module holds forward and backward "
                "attentions; compile them as two modules";
    return compileBackward(module, requested, backwards);
  }
  if (attentions.empty())
    return emitError(loc) << "fa-compile: the module holds no fa.attention";
  // One entry per attention, in program order: the options its kernel is
  // compiled with (the FA4 choices resolved from the table) and its scale.
  struct Launch {
    KernelOptions options;
    float scale;
  };
  std::vector<Launch> launches;
  SmallVector<std::string> hostNames;
  for (AttentionOp attention : attentions) {
    Location opLoc = attention.getLoc();
    KernelOptions options = requested;
    options.headDim = attention.getHeadDim();
    options.valueHeadDim = attention.getValueHeadDim();
    // The element types the kernels take; any other is refused here, at
    // the attention.
    auto elementType = [](Type t) -> std::optional<fagpu::ElementType> {
      if (t.isF16())
        return fagpu::ElementType::F16;
      if (t.isBF16())
        return fagpu::ElementType::BF16;
      if (isa<Float8E4M3FNType>(t))
        return fagpu::ElementType::E4M3;
      return std::nullopt;
    };
    Type elt = attention.getQueryType().getElementType();
    std::optional<fagpu::ElementType> dtype = elementType(elt);
    if (!dtype)
      return emitError(opLoc)
             << "fa-compile: dtype must be f16, bf16 or e4m3 (sm_90a) on "
             << fagpu::stringifyTarget(options.arch) << ", got '" << elt << "'";
    options.dtype = *dtype;
    if (options.dtype == fagpu::ElementType::E4M3) {
      Type out = cast<ShapedType>(attention.hasBufferSemantics()
                                      ? attention.getOuts().front().getType()
                                      : attention->getResult(0).getType())
                     .getElementType();
      options.outDtype = elementType(out);
      if (!options.outDtype || options.outDtype == fagpu::ElementType::E4M3)
        return emitError(opLoc) << "fa-compile: an e4m3 kernel writes O in "
                                   "f16 or bf16, got '"
                                << out << "'";
    }
    options.causal = attention.getCausal();
    options.window = attention.getWindow().value_or(0);
    options.bottomRight = attention.getBottomRight();
    options.diagonalOffset = attention.getDiagonalOffset().value_or(0);
    options.kvLengths = static_cast<bool>(attention.getKvLengths());
    options.pageSize = attention.isPaged() ? attention.getPageSize() : 0;
    options.varlen = attention.isVarlen();
    options.softcap = attention.getSoftcap()
                          ? attention.getSoftcap()->convertToDouble()
                          : 0.0;
    if (failed(checkTarget(opLoc, options)))
      return failure();
    auto hostFunc = attention->getParentOfType<func::FuncOp>();
    if (!hostFunc)
      return emitError(opLoc)
             << "fa-compile: fa.attention must be in a func.func";
    if (!llvm::is_contained(hostNames, hostFunc.getName().str()))
      hostNames.push_back(hostFunc.getName().str());
    // The FA4 defaults of the kernel's target, from the heuristics table.
    fagpu::Target target = usesTcgen05(options) ? fagpu::Target::sm_100a
                           : usesWgmma(options) ? fagpu::Target::sm_90a
                                                : fagpu::Target::sm_80;
    const fagpu::KernelDefaults *defaults =
        fagpu::defaultsFor(target, options.headDim, options.causal);
    if (std::isnan(options.rescaleThreshold))
      options.rescaleThreshold = defaults ? defaults->rescaleThreshold : -1.0;
    // e4m3: P is cast as 2^8 P, which conditional rescaling's P <= 2^tau
    // must leave below 448: tau = 0 (fa-quantize-probs checks a given one).
    if (options.dtype == fagpu::ElementType::E4M3 &&
        options.rescaleThreshold > 0 && std::isnan(requested.rescaleThreshold))
      options.rescaleThreshold = 0.0;
    if (options.polyExp2Degree < 0)
      options.polyExp2Degree = defaults ? defaults->polyExp2Degree : 0;
    // The scale the launch metadata carries, so that a runtime driven by
    // the compiled artefacts alone applies the attention's own.
    launches.push_back({options, float(attention.getEffectiveScale())});
  }
  // The FA4 passes run once on the tile level, with one threshold and one
  // exp2 choice for the module.
  const KernelOptions &first = launches.front().options;
  for (const Launch &launch : launches)
    if (launch.options.rescaleThreshold != first.rescaleThreshold ||
        launch.options.polyExp2Degree != first.polyExp2Degree)
      return emitError(attentions[&launch - launches.data()].getLoc())
             << "fa-compile: the attentions' measured FA4 defaults differ "
                "(conditional rescaling threshold "
             << launch.options.rescaleThreshold << " vs "
             << first.rescaleThreshold << ", software exp2 degree "
             << launch.options.polyExp2Degree << " vs " << first.polyExp2Degree
             << "); give the rescale threshold and exp2 degree explicitly";
  const KernelOptions &options = first;

  useShortSharedPointers();
  // The back end's pipeline in its two halves, keeping the kernel IR in
  // between.
  {
    PassManager pm(&context);
    // The FA4 choices every back end's pipeline takes.
    auto setFA4 = [&](auto &pipeline) {
      pipeline.rescaleThreshold = options.rescaleThreshold;
      pipeline.polyExp2Degree = options.polyExp2Degree;
      pipeline.polyExp2Period = options.polyExp2Period;
    };
    if (usesTcgen05(options)) {
      SM100PipelineOptions pipeline;
      pipeline.stages = options.stages;
      setFA4(pipeline);
      buildSM100KernelPipeline(pm, pipeline);
    } else if (usesWgmma(options)) {
      SM90PipelineOptions pipeline;
      pipeline.stages = options.stages;
      pipeline.pingPong = options.pingPong;
      pipeline.intraOverlap = options.intraOverlap;
      pipeline.rowSumMma = options.rowSumMma;
      pipeline.queryGroup = options.queryGroup;
      pipeline.maxRows = options.maxRows;
      pipeline.persistent = options.persistent < 0   ? fagpu::Switch::Auto
                            : options.persistent > 0 ? fagpu::Switch::On
                                                     : fagpu::Switch::Off;
      pipeline.epilogue = options.epilogue;
      pipeline.ctasPerSm = options.ctasPerSM;
      setFA4(pipeline);
      buildSM90KernelPipeline(pm, pipeline);
    } else {
      SM80PipelineOptions pipeline;
      pipeline.chip = fagpu::stringifyTarget(options.arch).str();
      setFA4(pipeline);
      pipeline.queryInRegisters = options.queryInRegisters;
      buildSM80KernelPipeline(pm, pipeline);
    }
    if (failed(pm.run(module)))
      return failure();
  }
  auto gpuModule = module.lookupSymbol<gpu::GPUModuleOp>("fa_kernels");
  if (!gpuModule)
    return emitError(loc) << "fa-compile: the back end built no kernel";
  // Each attention became one launch, in program order: its kernel's
  // schedule and sizes, read before the emission replaces the gpu.module.
  // (An e4m3 attention's V layout launch comes with it; the metadata
  // describes it under its attention's kernel.)
  SmallVector<gpu::LaunchFuncOp> launchOps;
  module.walk([&](gpu::LaunchFuncOp op) {
    auto callee = gpuModule.lookupSymbol<LLVM::LLVMFuncOp>(op.getKernelName());
    if (!callee || callee->hasAttr("fagpu.schedule"))
      launchOps.push_back(op);
  });
  if (launchOps.size() != launches.size())
    return emitError(loc) << "fa-compile: " << launches.size()
                          << " attentions became " << launchOps.size()
                          << " kernel launches";
  // (BuiltKernel holds three parameter lists: too big for SmallVector's
  // inline storage.)
  std::vector<std::pair<std::string, BuiltKernel>> built;
  for (auto [launchOp, launch] : llvm::zip(launchOps, launches)) {
    auto kernel =
        gpuModule.lookupSymbol<LLVM::LLVMFuncOp>(launchOp.getKernelName());
    FailureOr<BuiltKernel> facts =
        kernel ? builtKernelOf(kernel) : FailureOr<BuiltKernel>(failure());
    if (failed(facts))
      return emitError(loc)
             << "fa-compile: the kernel " << launchOp.getKernelName()
             << " carries no fagpu schedule";
    facts->scale = launch.scale;
    built.push_back({launchOp.getKernelName().str(), *facts});
  }
  return finishCompile(module, gpuModule, hostNames, built, options,
                       [&](size_t i, StringRef name, const BuiltKernel &k) {
                         return metadataJson(name, launches[i].options, k);
                       });
}
