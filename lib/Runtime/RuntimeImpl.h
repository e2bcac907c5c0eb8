//===- RuntimeImpl.h - the C runtime's shared internals ---------------------===//
//
// What the runtime's parts share: the error slot, the CUDA driver entry
// points (opened with dlopen), the parsed launch metadata and the loaded
// kernel. Private to lib/Runtime; free of MLIR and LLVM, as the whole
// library is: a machine with a driver and this one library can run
// kernels compiled elsewhere.
//
//===----------------------------------------------------------------------===//

#ifndef FA_LIB_RUNTIME_RUNTIMEIMPL_H
#define FA_LIB_RUNTIME_RUNTIMEIMPL_H

#include "fa-c/Runtime.h"

#include <array>
#include <atomic>
#include <cstddef>
#include <initializer_list>
#include <map>
#include <mutex>
#include <string>
#include <vector>

// The C API (fa-c/Runtime.h) is the library's only interface: what follows
// stays inside it.
#pragma GCC visibility push(hidden)

namespace flashmlir::runtime {

/// Records `message` as faRuntimeLastError()'s (per thread); returns 1.
int fail(const std::string &message);
/// The calling thread's last message.
const char *lastErrorText();

//===----------------------------------------------------------------------===//
// The driver entry points we use (types as in cuda.h; handles are pointers).
//===----------------------------------------------------------------------===//

using CUresult = int;
using CUdevice = int;
using CUdeviceptr = unsigned long long;

struct Driver {
  void *handle = nullptr;
  CUresult (*cuInit)(unsigned);
  CUresult (*cuDeviceGet)(CUdevice *, int);
  CUresult (*cuDevicePrimaryCtxRetain)(void **, CUdevice);
  CUresult (*cuCtxSetCurrent)(void *);
  CUresult (*cuCtxSynchronize)();
  CUresult (*cuModuleLoadData)(void **, const void *);
  CUresult (*cuModuleUnload)(void *);
  CUresult (*cuModuleGetFunction)(void **, void *, const char *);
  CUresult (*cuFuncSetAttribute)(void *, int, int);
  CUresult (*cuLaunchKernel)(void *, unsigned, unsigned, unsigned, unsigned,
                             unsigned, unsigned, unsigned, void *, void **,
                             void **);
  CUresult (*cuMemAlloc)(CUdeviceptr *, size_t);
  CUresult (*cuMemFree)(CUdeviceptr);
  CUresult (*cuMemcpyHtoD)(CUdeviceptr, const void *, size_t);
  CUresult (*cuMemcpyDtoH)(void *, CUdeviceptr, size_t);
  CUresult (*cuCtxGetDevice)(CUdevice *);
  CUresult (*cuDeviceGetAttribute)(int *, int, CUdevice);
  CUresult (*cuTensorMapEncodeTiled)(void *, int, unsigned, void *,
                                     const unsigned long long *,
                                     const unsigned long long *,
                                     const unsigned *, const unsigned *, int,
                                     int, int, int);
  CUresult (*cuGetErrorName)(CUresult, const char **);
  CUresult (*cuGetErrorString)(CUresult, const char **);

  std::string describe(CUresult status) const {
    const char *name = nullptr, *text = nullptr;
    if (cuGetErrorName)
      cuGetErrorName(status, &name);
    if (cuGetErrorString)
      cuGetErrorString(status, &text);
    std::string s = name ? name : "CUDA error " + std::to_string(status);
    if (text)
      s += std::string(": ") + text;
    return s;
  }
};

extern Driver driver;
/// Set once, after every entry point is resolved: launches on other threads
/// read it without a lock.
extern std::atomic<bool> driverLoaded;

/// Fails with "<call> failed: <name>: <description>".
int check(CUresult status, const char *call);
/// Opens libcuda (FLASHMLIR_LIBCUDA when set) and resolves the entry points.
int loadDriver();
/// The current context's device's SM count, in `sms`.
int currentDeviceSMs(int &sms);
/// The current context's device's peak DRAM bandwidth in GB/s, in `gbps`
/// (memory clock x bus width x 2 transfers per clock).
int currentDeviceDramGBps(int &gbps);
/// `bytes` of device memory in `ptr`, reallocated when smaller; zeroed when
/// `zero` (then kept zero by the kernels).
int ensureDeviceBytes(CUdeviceptr &ptr, size_t &have, size_t bytes, bool zero,
                      const char *what);

//===----------------------------------------------------------------------===//
// Launch metadata (Metadata.cpp)
//===----------------------------------------------------------------------===//

/// A launch grid as the metadata gives it ("grid": {"x", "y", "z"}): each
/// dimension an integer's digits or a formula in the launch's sizes and the
/// kernel's fields (mlir::fa::model::GridFormula; kGridNames), which the
/// launchers evaluate (evaluateGrid).
using GridFormulas = std::array<std::string, 3>;

/// The names a grid formula may use: the launch's sizes, then the kernel's
/// fields (block_r, block_c, ctas_per_sm), as fagpu::launchGrid,
/// valueLayoutGrid and kvAppendGrid write them. flashmlir.runtime's
/// _GRID_NAMES is the same list.
inline constexpr const char *kGridNames[] = {
    "B",         "Hq",   "Hkv",    "Nq",      "Nk",      "D",          "SMs",
    "kv_splits", "Nnew", "Nk_128", "block_r", "block_c", "ctas_per_sm"};

struct Metadata {
  std::string format, kernel, dtype;
  // The launch grids of the kernel and of its auxiliary kernels.
  GridFormulas grid, valueLayoutGrid, kvAppendGrid;
  // O's element type: the inputs' for f16/bf16, f16 or bf16 for e4m3.
  std::string outDtype;
  // K's and V's: the inputs' (empty), or e4m3 for an e4m3 KV cache beside
  // a 16-bit Q (with K's and V's descales).
  std::string kvDtype;
  // How the CTAs find their tiles: "grid", "one tile per CTA", "static"
  // (persistent, fixed stride) or "dynamic" (persistent, from a counter the
  // runtime passes as the last parameter).
  std::string tileScheduler;
  long headDim = -1, blockR = -1, sharedBytes = -1;
  // V's and O's head dim (0: absent, the head dim's).
  long valueHeadDim = 0;
  long valueColumns() const { return valueHeadDim ? valueHeadDim : headDim; }
  long ctasPerSM = 1; // resident CTAs per SM; a persistent grid is SMs x this
  long tmaBoxCols = 0, tmaBoxRowsKV = 0; // sm_90a: q, k, v as tensor maps
  long tmaBoxRowsO = 0;                  // > 0: o as a tensor map too
  bool causal = false;
  // What the traffic prediction needs (faMetadataPredictedBytes); absent in
  // metadata that predates them.
  std::string arch;
  long blockC = 0, window = 0, diagonalOffset = 0;
  bool bottomRight = false, writesLse = true;
  // The softmax scale the kernel was compiled for (the attention's own, or
  // 1/sqrt(D)); 0 in metadata that predates it.
  float scale = 0.0f;
  // Scores c tanh(s / c) (0: none).
  float softcap = 0.0f;
  bool tileGrid = false;   // one CTA per (query block, head) tile, B param
  bool persistent = false; // at most one CTA per SM strides the tiles
  // Split-KV: grid y = chunks; the launch default (0:
  // mlir::fa::model::autoKVSplits).
  bool splitKV = false;
  long kvSplits = 0;
  // A KV cache: kv_lengths [B] and a paged K/V's block table (page_size
  // rows per page; 0: contiguous).
  bool kvLengths = false;
  long pageSize = 0;
  // A varlen batch: cu_seqlens_q/k [B + 1] and the packed rows of Q.
  bool varlen = false;
  // Pack-GQA beyond one query: the kernel takes Q, O and the LSE packed
  // [B, Hkv, Nq G, D] (row r query r / G of head h G + r mod G); 0: not.
  long queryGroup = 0;
  long maxRows = 0; // 8: each tile at most 8 real rows (fagpu's max_rows)
  std::vector<long> block;
  std::vector<std::string> params;
  // Each parameter's tensor-map box rows ("box": [cols, rows]), 0 where
  // it has none; in the order of `params`.
  std::vector<long> paramBoxRows;
  // Each parameter's tensor-map box row in bytes, the map's swizzle span
  // ("swizzle": "128B", "64B" or "32B"; 128 where absent). An e4m3 V^T of
  // B_c = 192 or 224 keys comes in boxes of 64 or 32 keys.
  std::vector<long> paramSwizzle;
  // Each parameter's tensor-map L2 promotion in bytes ("l2_promotion": 0,
  // 64, 128 or 256; 256 where absent, as before the key existed).
  std::vector<long> paramL2Promotion;
  // e4m3: the V layout kernel of the same cubin ("value_layout"): its name,
  // threads per block and parameter names.
  std::string valueLayoutKernel;
  std::vector<long> valueLayoutBlock;
  std::vector<std::string> valueLayoutParams;
  // The keys of a V^T row, padded to a multiple of this ("key_alignment":
  // 16 or 128; 16 where absent, as the layout kernels wrote before the key
  // existed).
  long valueLayoutKeyAlign = 16;
  // V columns a layout thread transposes ("columns_per_thread": 16, or 1
  // where absent -- kernels before it): the launch's thread count.
  long valueLayoutColumns = 1;
  // A KV cache: the append kernel of the same cubin ("kv_append"): whether
  // the entry is there, the kernel's name, threads per block, columns a
  // thread (fagpu::kKVAppendColumnsPerThread, 0 where absent) and its
  // parameter names, which the launcher binds by name.
  bool hasKvAppend = false;
  std::string kvAppendKernel;
  std::vector<long> kvAppendBlock;
  std::vector<std::string> kvAppendParams;
  long kvAppendColumns = 0;
  // The rank of the tensor maps (every "tensormap" parameter's "rank"): 4
  // reads strided [B, H, N, D] tensors, 3 (or absent) contiguous ones.
  long mapRank = 0;
  bool strided() const { return mapRank == 4; }
  // Each parameter's "kind" ("tensormap", "pointer", "int32", ...; empty
  // where absent), in the order of `params`.
  std::vector<std::string> paramKinds;
  // Whether "tma_box_cols" was given (0 or not): the parameters' kinds are
  // then checked against the boxes.
  bool hasTmaBoxCols = false;
  // The fields the Python launcher needs that this reader would otherwise
  // default ("arch", "causal", "grid"), as they were given.
  std::vector<std::string> given;

  // A backward kernel's ("flash-mlir-backward-2", fa-compile --backward):
  // dQ's adds in key-block order (the dq_semaphores parameter), and the
  // kernels of the same cubin launched before it ("preprocess") and after
  // it ("convert"), each with its block, grid and parameter names.
  bool deterministic = false;
  struct RowsKernel {
    bool given = false;
    std::string kernel;
    std::vector<long> block;
    GridFormulas grid;
    std::vector<std::string> params, paramKinds;
  } preprocess, convert;
  // Whether "value_layout" was given (a backward kernel has none).
  bool hasValueLayout = false;
  bool backward() const { return format == kBackwardFormat; }
  static constexpr const char *kBackwardFormat = "flash-mlir-backward-2";
};

/// Evaluates `grid` for a launch: `sizes` the launch's sizes by name, the
/// kernel's fields from `m`, SMs (the current device's) where a formula
/// reads it. Each dimension must come out at least 1 (x at most 2^31 - 1,
/// y and z at most 65535); `where` starts a failure's message.
int evaluateGrid(
    const Metadata &m, const GridFormulas &grid,
    std::initializer_list<std::pair<const char *, long long>> sizes,
    const std::string &where, unsigned out[3]);

/// Columns of a row one append thread moves (fagpu::kKVAppendColumnsPerThread:
/// 16 bytes of a 16-bit row).
inline constexpr long kKVAppendColumns = 8;

/// The parameters of a KV cache's append kernel (fagpu::kvAppendParams),
/// as a set: the launcher binds them by name, in the metadata's order.
std::vector<std::string> kvAppendParamNames(bool e4m3Cache);

/// Kernel `name` of a loaded `module` in `function`; the failure names it
/// and where it was named (`from`).
int moduleFunction(void *module, const std::string &name,
                   const std::string &from, void **function);
/// Opts `function` into `bytes` of dynamic shared memory (above 48 KiB the
/// driver wants it per function).
int allowSharedBytes(void *function, long bytes);
/// A kernel a loader looks up: where it goes, its name (none: skipped) and
/// where the name came from.
struct FunctionSlot {
  void **function;
  const std::string *name;
  const char *from;
};
/// Looks up each of `slots` in `module`, then opts `*main` into
/// `sharedBytes`; on a failure unloads the module (the loaders' one exit).
int loadFunctions(void *module, std::initializer_list<FunctionSlot> slots,
                  void **main, long sharedBytes);
/// <prefix>.cubin and <prefix>.json, as fa-compile -o <prefix> wrote them.
int readKernelFiles(const char *prefix, std::string &cubin, std::string &json);

/// Reads `text` (strict JSON) into `m` and validates what the fields say
/// together, as a forward kernel's metadata or, with `backward`, a
/// backward kernel's; 1 with the message on anything else.
int parseMetadata(const std::string &text, Metadata &m, bool backward = false);
/// cuModuleLoadData reads the image without a size: it must be a cubin
/// whose ELF header and header tables lie inside the buffer, or text (PTX)
/// that ends within it.
int checkImage(const void *image, size_t size);

//===----------------------------------------------------------------------===//
// Tensor maps (TensorMap.cpp)
//===----------------------------------------------------------------------===//

/// A swizzled tiled map (dtype 0 f16, 1 bf16, 2 e4m3) with boxes of
/// `boxBytes` (128, 64 or 32: the swizzle span) by `boxRows` rows of one
/// matrix; rows past the last read as zeros. `dims` innermost first,
/// `byteStrides` of the outer dimensions.
int encodeTiledMap(void *map, const void *base, unsigned rank,
                   const unsigned long long *dims,
                   const unsigned long long *byteStrides, int boxRows,
                   int dtype, int l2PromotionBytes, int boxBytes = 128);
/// The one rule for a strided [B, H, N, D] tensor's strides (elements; D's
/// is 1): a dimension longer than 1 needs a positive multiple of 8 (16
/// bytes: the TMA's stride unit, and the register epilogue's 16-byte
/// stores) below 2^39 (2^40 bytes, the TMA's limit). A dimension of length
/// 1 is never stepped: its stride becomes the contiguous one, so callers
/// may pass whatever their framework reports for it. Writes the strides to
/// use to `out`.
int checkStrides(const char *where, const char *name, const FaStrides &given,
                 long long batch, long long heads, long long rows,
                 long long headDim, FaStrides &out,
                 long long elementBytes = 2);
/// faEncodeStridedTensorMapL2 with boxes of `boxBytes` (the swizzle span).
int encodeStridedMap(void *map, const void *base, long long batch,
                     long long heads, long long rows, long long headDim,
                     long long strideB, long long strideH, long long strideN,
                     int boxRows, int dtype, int l2PromotionBytes,
                     int boxBytes);

} // namespace flashmlir::runtime

#pragma GCC visibility pop

/// A loaded kernel (fa-c/Runtime.h's opaque handle).
struct FaKernel {
  flashmlir::runtime::Metadata meta;
  void *module = nullptr;
  void *function = nullptr;
  // The dynamic tile scheduler's counters, one per stream: a launch finds
  // its counter zero and leaves it zero, so the launches of one stream
  // (ordered) share one, while two streams' launches may overlap.
  std::mutex countersLock;
  std::map<void *, flashmlir::runtime::CUdeviceptr> counters;
  // Split-KV's scratch, one per stream for the same reason, grown on
  // demand: partial O and LSE (f32), and the arrival counters (zeroed when
  // allocated, left zero by every launch).
  struct SplitScratch {
    flashmlir::runtime::CUdeviceptr partials = 0, arrivals = 0;
    size_t partialBytes = 0, arrivalBytes = 0;
  };
  std::map<void *, SplitScratch> splitScratch;
  // e4m3: the V layout kernel, and its V^T workspace per stream (the
  // attention of a launch reads it after the layout kernel, in stream
  // order; another stream's launch may overlap).
  void *layoutFunction = nullptr;
  struct Workspace {
    flashmlir::runtime::CUdeviceptr ptr = 0;
    size_t bytes = 0;
  };
  std::map<void *, Workspace> valueWorkspace;
  // A KV cache: the append kernel (faKernelAppendKV), null where the
  // metadata names none.
  void *appendFunction = nullptr;
};

/// A loaded backward kernel (fa-c/Runtime.h's opaque handle): the main
/// kernel and the two around it, from one module.
struct FaBackwardKernel {
  flashmlir::runtime::Metadata meta;
  void *module = nullptr;
  void *preprocess = nullptr, *function = nullptr, *convert = nullptr;
};

#endif // FA_LIB_RUNTIME_RUNTIMEIMPL_H
