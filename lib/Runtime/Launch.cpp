//===- Launch.cpp - launching attention kernels -----------------------------===//
//
// The launchers of the C API: the arguments checked against the kernel's
// metadata, the parameters bound in its order (tensor maps, pointers,
// scalars; split-KV's scratch, the dynamic scheduler's counter, e4m3's V
// layout kernel), then cuLaunchKernel.
//
//===----------------------------------------------------------------------===//

#include "RuntimeImpl.h"

#include "fa/Model/GridFormula.h"
#include "fa/Model/KVChunk.h"
#include "fa/Model/PackGQA.h"
#include "fa/Model/Positions.h"

#include <cmath>
#include <cstdint>
#include <cstring>
#include <functional>
#include <optional>
#include <string_view>

using namespace flashmlir::runtime;

/// The grid of `grid` for these sizes (`size`: a launch size by name) and
/// the kernel's fields (`m`), each dimension in its CUDA range.
static int
gridOf(const Metadata &m, const GridFormulas &grid,
       const std::function<std::optional<long long>(std::string_view)> &size,
       const std::string &where, unsigned out[3]) {
  auto lookup = [&](std::string_view name) -> std::optional<int64_t> {
    if (std::optional<long long> value = size(name))
      return *value;
    if (name == "block_r")
      return m.blockR;
    if (name == "block_c")
      return m.blockC;
    if (name == "ctas_per_sm")
      return m.ctasPerSM;
    return std::nullopt;
  };
  // CUDA's grid: x up to 2^31 - 1, y and z up to 65535.
  const long long limits[3] = {0x7fffffffLL, 65535, 65535};
  for (int i = 0; i < 3; ++i) {
    std::string error;
    std::optional<int64_t> value =
        mlir::fa::model::GridFormula::evaluate(grid[i], lookup, error);
    if (!value)
      return fail(where + error);
    if (*value < 1 || *value > limits[i])
      return fail(where + "grid " + std::string(1, char('x' + i)) + " = " +
                  grid[i] + " is " + std::to_string(*value) +
                  " for these sizes, outside CUDA's [1, " +
                  std::to_string(limits[i]) + "]");
    out[i] = (unsigned)*value;
  }
  return 0;
}

int flashmlir::runtime::evaluateGrid(
    const Metadata &m, const GridFormulas &grid,
    std::initializer_list<std::pair<const char *, long long>> sizes,
    const std::string &where, unsigned out[3]) {
  // The SM count only where a formula reads it (a persistent grid): it is
  // a driver call.
  int sms = 0;
  for (const std::string &dim : grid)
    if (dim.find("SMs") != std::string::npos) {
      if (currentDeviceSMs(sms))
        return 1;
      break;
    }
  return gridOf(
      m, grid,
      [&](std::string_view name) -> std::optional<long long> {
        for (const auto &[sizeName, value] : sizes)
          if (name == sizeName)
            return value;
        if (name == "SMs")
          return sms;
        return std::nullopt;
      },
      where, out);
}

extern "C" {

int faAutoKVSplits(long long tiles, long long queryBlocks, long long kvBlocks,
                   int sms, int dramGBps) {
  return (int)mlir::fa::model::autoKVSplits(tiles, queryBlocks, kvBlocks, sms,
                                            dramGBps);
}

int faMetadataLaunchGrid(const char *metadataJson, int which,
                         const char *const *names, const long long *values,
                         int count, unsigned grid[3]) {
  if (!metadataJson || !grid || count < 0 || (count && (!names || !values)))
    return fail("faMetadataLaunchGrid: null metadata, sizes or result");
  if (which < FA_GRID_KERNEL || which > FA_GRID_KV_APPEND)
    return fail("faMetadataLaunchGrid: which must be FA_GRID_KERNEL, "
                "FA_GRID_VALUE_LAYOUT or FA_GRID_KV_APPEND, got " +
                std::to_string(which));
  for (int i = 0; i < count; ++i)
    if (!names[i])
      return fail("faMetadataLaunchGrid: names[" + std::to_string(i) +
                  "] is null");
  Metadata m;
  if (parseMetadata(metadataJson, m))
    return 1;
  if ((which == FA_GRID_VALUE_LAYOUT && m.valueLayoutKernel.empty()) ||
      (which == FA_GRID_KV_APPEND && !m.hasKvAppend))
    return fail("faMetadataLaunchGrid: " + m.kernel + " has no " +
                (which == FA_GRID_KV_APPEND ? "append" : "V layout") +
                " kernel");
  const GridFormulas &formulas = which == FA_GRID_KERNEL ? m.grid
                                 : which == FA_GRID_VALUE_LAYOUT
                                     ? m.valueLayoutGrid
                                     : m.kvAppendGrid;
  return gridOf(
      m, formulas,
      [&](std::string_view name) -> std::optional<long long> {
        for (int i = 0; i < count; ++i)
          if (name == names[i])
            return values[i];
        return std::nullopt;
      },
      "faMetadataLaunchGrid: ", grid);
}

int faQueryGroupFor(long long queries, long long qHeads, long long kvHeads,
                    int masked, long long kvBytes) {
  return (int)mlir::fa::model::queryGroupFor(queries, qHeads, kvHeads,
                                             masked != 0, kvBytes);
}

int faDecodeHeadsPerTile(long long queries, long long qHeads,
                         long long kvHeads, int masked) {
  return (int)mlir::fa::model::decodeHeadsPerTile(queries, qHeads, kvHeads,
                                            masked != 0);
}

int faKernelLaunch(FaKernel *k, const void *q, const void *kp, const void *v,
                   void *o, float *lse, int batch, int qHeads, int kvHeads,
                   int qLen, int kvLen, float scale, void *stream) {
  return faKernelLaunchSplit(k, q, kp, v, o, lse, batch, qHeads, kvHeads, qLen,
                             kvLen, scale, /*kvSplits=*/-1, stream);
}

int faKernelLaunchSplit(FaKernel *k, const void *q, const void *kp,
                        const void *v, void *o, float *lse, int batch,
                        int qHeads, int kvHeads, int qLen, int kvLen,
                        float scale, int kvSplits, void *stream) {
  return faKernelLaunchStrided(k, q, nullptr, kp, nullptr, v, nullptr, o,
                               nullptr, lse, batch, qHeads, kvHeads, qLen,
                               kvLen, scale, kvSplits, stream);
}

} // extern "C"

namespace {
/// A KV cache's part of a launch: K/V are [entries, Hkv, rows, D] (entries
/// the batch, or the pages of a paged cache; rows Nk, or the page size),
/// with the kernel's kv_lengths and block table (device pointers).
struct KVCache {
  long long entries = 0;
  int rows = 0;
  const int *lengths = nullptr;
  const int *table = nullptr;
  int maxPages = 0;
  // A varlen batch: q, o are [1, Hq, qRows, D] (qRows the packed total)
  // and the prefix sums [B + 1] on the device; the kernel's B and Nq are
  // the sequences and the longest one's queries.
  const int *cuQ = nullptr, *cuK = nullptr;
  int qRows = 0;
  // An e4m3 launch: the descales, f32 on the device, laid out as
  // descaleLayout (FA_DESCALE_*) says.
  const float *qDescale = nullptr, *kDescale = nullptr, *vDescale = nullptr;
  int descaleLayout = FA_DESCALE_PER_TENSOR;
};

/// The keys of each row of an e4m3 kernel's V^T: Nk rounded up to the
/// metadata's key alignment (the layout kernel writes the padding as zero).
long long valueTransposedKeys(const FaKernel *k, long long kvLen) {
  const long long align = k->meta.valueLayoutKeyAlign;
  return (kvLen + align - 1) / align * align;
}

/// Runs an e4m3 kernel's V layout kernel on `stream`: V [B, Hkv, Nk, D]
/// (strided) to V^T [B, Hkv, D, keys] in the stream's workspace (keys:
/// valueTransposedKeys), permuted in 16s for P's register layout; the
/// workspace in `valueT`.
int runValueLayout(FaKernel *k, const void *v, const FaStrides &vStrides,
                   int batch, int kvHeads, int kvLen, void *stream,
                   CUdeviceptr &valueT) {
  const long long d = k->meta.headDim, keys = valueTransposedKeys(k, kvLen);
  // The grid the lowering wrote (fagpu::valueLayoutGrid); Nk_128: V^T's
  // keys, Nk rounded up to the metadata's key alignment.
  unsigned grid[3];
  if (evaluateGrid(k->meta, k->meta.valueLayoutGrid,
                   {{"B", batch}, {"Hkv", kvHeads}, {"D", d}, {"Nk_128", keys}},
                   "faKernelLaunchE4M3: the V layout kernel's ", grid))
    return 1;
  {
    std::lock_guard<std::mutex> lock(k->countersLock);
    FaKernel::Workspace &space = k->valueWorkspace[stream];
    if (ensureDeviceBytes(space.ptr, space.bytes,
                          (size_t)batch * kvHeads * d * keys, false,
                          "cuMemAlloc(V^T workspace)"))
      return 1;
    valueT = space.ptr;
  }
  long long strideB = vStrides.batch, strideH = vStrides.head,
            strideN = vStrides.row;
  void *args[] = {&v,      &valueT,  &batch,   &kvHeads,
                  &kvLen,  &strideB, &strideH, &strideN};
  return check(driver.cuLaunchKernel(k->layoutFunction, grid[0], grid[1],
                                     grid[2],
                                     (unsigned)k->meta.valueLayoutBlock[0], 1,
                                     1, 0, stream, args, nullptr),
               "cuLaunchKernel(V layout)");
}

/// faKernelLaunchStrided and faKernelLaunchKVCache: `cache` gives K/V's
/// outer and row extents and the cache's operands.
int launchKernel(FaKernel *k, const void *q, const FaStrides *qStrides,
                 const void *kp, const FaStrides *kStrides, const void *v,
                 const FaStrides *vStrides, void *o, const FaStrides *oStrides,
                 float *lse, int batch, int qHeads, int kvHeads, int qLen,
                 const KVCache &cache, float scale, int kvSplits,
                 void *stream) {
  // The kernel's Nk: a paged sequence's capacity, else K/V's rows.
  int kvLen = cache.table ? cache.maxPages * cache.rows : cache.rows;
  const int *kvLengths = cache.lengths, *blockTable = cache.table;
  const int *cuQ = cache.cuQ, *cuK = cache.cuK;
  int maxPages = cache.maxPages;
  // What the kernel asserts its device-side inputs against: K's packed rows
  // (cu_seqlens_k ends within them) and the cache's pages (block-table
  // entries are below it).
  int keyRows = cache.rows, pages = (int)cache.entries;
  // Q's and O's outer extent and rows: the batch and Nq, or one batch row
  // of the packed queries.
  int qRows = cache.cuQ ? cache.qRows : qLen;
  long long qEntries = cache.cuQ ? 1 : batch;
  if (kvSplits < -1 || kvSplits > 1024)
    return fail("faKernelLaunch: kv_splits must be -1 (the metadata's "
                "default), 0 (auto) or a chunk count up to 1024, got " +
                std::to_string(kvSplits));
  if (!k)
    return fail("faKernelLaunch: kernel must not be null");
  if (!k->meta.splitKV && kvSplits > 1)
    return fail("faKernelLaunch: kv_splits = " + std::to_string(kvSplits) +
                " needs a split-KV kernel (fa-compile --split-kv); " +
                k->meta.kernel + " is not one");
  const char *names[] = {"q", "k", "v", "o", "lse"};
  const void *ptrs[] = {q, kp, v, o, lse};
  for (int i = 0; i < 5; ++i) {
    if (!ptrs[i])
      return fail(std::string("faKernelLaunch: ") + names[i] +
                  " must not be null");
    if (reinterpret_cast<uintptr_t>(ptrs[i]) % 16 != 0)
      return fail(std::string("faKernelLaunch: ") + names[i] +
                  " must be 16-byte aligned");
  }
  if (batch <= 0 || qHeads <= 0 || kvHeads <= 0 || qLen <= 0 || kvLen <= 0)
    return fail("faKernelLaunch: batch, heads and lengths must be positive");
  // The kernels add positions in 32 bits (fa/Model/Positions.h).
  if (qLen > mlir::fa::model::kMaxKernelPosition ||
      kvLen > mlir::fa::model::kMaxKernelPosition ||
      qRows > mlir::fa::model::kMaxKernelPosition)
    return fail("faKernelLaunch: sequence lengths must be at most 2^30 (the "
                "kernels' 32-bit positions), got Nq " +
                std::to_string(qLen) + ", Nk " + std::to_string(kvLen));
  if (long group = k->meta.queryGroup) {
    // The caller packs: the kernel sees Hkv matrices of Nq G rows.
    if (qHeads != kvHeads || qLen % group != 0)
      return fail("faKernelLaunch: " + k->meta.kernel +
                  " takes Q, O and the LSE packed [B, Hkv, Nq G, D] (G = " +
                  std::to_string(group) +
                  " query heads a K/V head, row r query r / G): launch it "
                  "with Hq = Hkv and Nq G rows, got Hq " +
                  std::to_string(qHeads) + ", Hkv " + std::to_string(kvHeads) +
                  ", " + std::to_string(qLen) + " rows");
  }
  if (k->meta.maxRows && qLen > k->meta.maxRows)
    return fail("faKernelLaunch: " + k->meta.kernel + " steps at most " +
                std::to_string(k->meta.maxRows) +
                " rows a tile (built with max_rows): a launch of " +
                std::to_string(qLen) +
                " query rows needs a kernel without max_rows");
  if (qHeads % kvHeads != 0)
    return fail("faKernelLaunch: query heads (" + std::to_string(qHeads) +
                ") must be a multiple of key/value heads (" +
                std::to_string(kvHeads) + ")");
  if (batch > 65535 || qHeads > 65535)
    return fail("faKernelLaunch: batch and heads must be at most 65535");
  // The dialect's range (fa/Dialect/FA/IR/Validation.h): log2(e) * scale
  // must be a normal f32 and the scores finite.
  if (!(scale >= 0x1p-64f && scale <= 0x1p64f))
  {
    char text[32];
    std::snprintf(text, sizeof(text), "%.9g", scale); // round-trips an f32
    return fail(std::string("faKernelLaunch: scale must be in [2^-64, 2^64], "
                            "got ") +
                text);
  }
  // The tensors' strides (faKernelLaunchStrided's rule); contiguous ones
  // where none are given. Kernels without rank-4 maps take only those.
  // Q's and K's columns, and V's and O's (fewer where the kernel pads V).
  const long long d = k->meta.headDim, dv = k->meta.valueColumns();
  const bool fp8 = k->meta.dtype == "e4m3";
  // An e4m3 KV cache beside a 16-bit Q: K and V are one-byte codes, and the
  // kernel takes their descales (faKernelLaunchKVCacheE4M3), never
  // launched without them.
  const bool e4m3Cache =
      !k->meta.kvDtype.empty() && k->meta.kvDtype != k->meta.dtype;
  if (e4m3Cache != (!fp8 && cache.kDescale != nullptr))
    return fail("faKernelLaunch: " + k->meta.kernel +
                (e4m3Cache ? " reads an e4m3 KV cache: launch it with "
                             "faKernelLaunchKVCacheE4M3 and its descales"
                           : " reads a 16-bit K and V: "
                             "faKernelLaunchKVCacheE4M3 is for kernels that "
                             "read an e4m3 KV cache (fa-compile --kv-dtype "
                             "e4m3)"));
  if (fp8 != (cache.qDescale != nullptr))
    return fail("faKernelLaunch: " + k->meta.kernel +
                (fp8 ? " is an e4m3 kernel: launch it with faKernelLaunchE4M3"
                     : " takes 16-bit inputs: faKernelLaunchE4M3 is for "
                       "e4m3 kernels"));
  // Pack-GQA at decode (fa::model::decodeHeadsPerTile): one query a
  // sequence and a kernel without masks read Q and O [B, Hq, 1, D] as the
  // views [B, Hkv, G, D] and write the LSE [B, Hq, 1] as [B, Hkv, G], so
  // every K/V block is read once per K/V head instead of once per query
  // head.
  FaStrides packed[2];
  if (!cache.cuQ && !fp8 && k->meta.strided()) {
    int64_t group = mlir::fa::model::decodeHeadsPerTile(
        qLen, qHeads, kvHeads, k->meta.causal || k->meta.window > 0);
    if (group > 1) {
      const FaStrides *views[2] = {qStrides, oStrides};
      const long long cols[2] = {d, dv};
      for (int i = 0; i < 2; ++i) {
        FaStrides view =
            views[i] ? *views[i] : FaStrides{qHeads * cols[i], cols[i], cols[i]};
        packed[i] = {view.batch, group * view.head, view.head};
      }
      qStrides = &packed[0];
      oStrides = &packed[1];
      qHeads = kvHeads;
      qLen = qRows = (int)group;
    }
  }
  const FaStrides *given[4] = {qStrides, kStrides, vStrides, oStrides};
  const long long heads[4] = {qHeads, kvHeads, kvHeads, qHeads};
  const long long rows[4] = {qRows, cache.rows, cache.rows, qRows};
  const long long batches[4] = {qEntries, cache.entries, cache.entries,
                                qEntries};
  const long long columns[4] = {d, d, dv, dv};
  FaStrides strides[4];
  for (int i = 0; i < 4; ++i) {
    FaStrides contiguous = {heads[i] * rows[i] * columns[i],
                            rows[i] * columns[i], columns[i]};
    // e4m3 q, k, v (or an e4m3 cache's k and v) are one byte; O is 16-bit.
    const bool codes = (fp8 && i < 3) || (e4m3Cache && (i == 1 || i == 2));
    if (checkStrides("faKernelLaunch", names[i],
                     given[i] ? *given[i] : contiguous, batches[i], heads[i],
                     rows[i], columns[i], strides[i], codes ? 1 : 2))
      return 1;
    if (!k->meta.strided() &&
        (strides[i].batch != contiguous.batch ||
         strides[i].head != contiguous.head || strides[i].row != columns[i]))
      return fail(std::string("faKernelLaunch: ") + k->meta.kernel +
                  " takes contiguous [B, H, N, D] tensors (its tensor maps "
                  "are not rank 4: strided tensors need an sm_90a kernel); " +
                  names[i] + " has strides {" +
                  std::to_string(strides[i].batch) + ", " +
                  std::to_string(strides[i].head) + ", " +
                  std::to_string(strides[i].row) + "}");
  }
  if (!driverLoaded)
    return fail("faKernelLaunch: no driver (load the kernel first)");
  float scaleLog2 = scale * 1.4426950408889634f;
  // The slots after B are split-KV's (chunks, partials, arrivals) or the
  // dynamic tile scheduler's counter; the driver reads as many parameters
  // as the kernel takes.
  CUdeviceptr counter = 0;
  int splits = 1;
  CUdeviceptr oPartial = 0, lsePartial = 0, arrivals = 0;
  if (k->meta.splitKV) {
    splits = kvSplits >= 0 ? kvSplits : (int)k->meta.kvSplits;
    if (splits == 0) {
      int sms = 0, dramGBps = 0;
      if (currentDeviceSMs(sms) || currentDeviceDramGBps(dramGBps))
        return 1;
      long long queryBlocks =
          (long long)((qLen + k->meta.blockR - 1) / k->meta.blockR);
      long long tiles = queryBlocks * qHeads * batch;
      long blockC = k->meta.blockC > 0 ? k->meta.blockC : 128;
      splits = (int)mlir::fa::model::autoKVSplits(
          tiles, queryBlocks, (kvLen + blockC - 1) / blockC, sms, dramGBps);
    }
    // Partial O [S, B, Hq, Nq, D] and LSE [S, B, Hq, Nq] in f32; an
    // arrival counter per query row.
    size_t rows = (size_t)batch * (size_t)qHeads * (size_t)qLen;
    size_t partialBytes = 4 * (size_t)splits * rows * (dv + 1);
    std::lock_guard<std::mutex> lock(k->countersLock);
    FaKernel::SplitScratch &scratch = k->splitScratch[stream];
    if (ensureDeviceBytes(scratch.partials, scratch.partialBytes, partialBytes,
                          false, "cuMemAlloc(split-KV partials)") ||
        ensureDeviceBytes(scratch.arrivals, scratch.arrivalBytes, 4 * rows,
                          true, "cuMemAlloc(split-KV arrivals)"))
      return 1;
    oPartial = scratch.partials;
    lsePartial = scratch.partials + 4 * (size_t)splits * rows * dv;
    arrivals = scratch.arrivals;
  }
  // The wgmma and tcgen05 kernels read q, k, v (and write o, with a TMA
  // store) through TMA tensor maps, passed by value.
  alignas(64) unsigned char maps[4][128];
  const void *bases[] = {q, kp, v, o};
  void *tensorArgs[4] = {&q, &kp, &v, &o};
  CUdeviceptr valueT = 0;
  long long keys = fp8 ? valueTransposedKeys(k, kvLen) : 0;
  if (fp8 && runValueLayout(k, v, strides[2], batch, kvHeads, kvLen, stream,
                            valueT))
    return 1;
  if (k->meta.tmaBoxCols) {
    const int wide = fp8 ? 2 : k->meta.dtype == "bf16" ? 1 : 0;
    long box[] = {k->meta.blockR, k->meta.tmaBoxRowsKV, k->meta.tmaBoxRowsKV,
                  k->meta.tmaBoxRowsO};
    for (int i = 0; i < (k->meta.tmaBoxRowsO ? 4 : 3); ++i) {
      // An e4m3 cache's K and V maps read codes (128-byte boxes of 128
      // columns, as the metadata's boxes say).
      const int dtype = e4m3Cache && (i == 1 || i == 2) ? 2 : wide;
      if (fp8 && i == 2) {
        // V^T [B, Hkv, D, keys], contiguous: rows of D, keys innermost.
        if (encodeStridedMap(maps[2], (const void *)valueT, batch, kvHeads,
                             d, keys, kvHeads * d * keys, d * keys, keys,
                             (int)k->meta.paramBoxRows[2], dtype,
                             (int)k->meta.paramL2Promotion[2],
                             (int)k->meta.paramSwizzle[2]))
          return 1;
        tensorArgs[2] = maps[2];
        continue;
      }
      if (k->meta.strided()
              ? faEncodeStridedTensorMapL2(
                    maps[i], bases[i], batches[i], heads[i], rows[i],
                    columns[i], strides[i].batch, strides[i].head,
                    strides[i].row, (int)box[i], dtype,
                    (int)k->meta.paramL2Promotion[i])
              : faEncodeTensorMap(maps[i], bases[i],
                                  batches[i] * heads[i], rows[i], columns[i],
                                  16, (int)box[i], dtype))
        return 1;
      tensorArgs[i] = maps[i];
    }
  }
  if (k->meta.tileScheduler == "dynamic") {
    std::lock_guard<std::mutex> lock(k->countersLock);
    auto it = k->counters.find(stream);
    if (it == k->counters.end()) {
      const unsigned zero = 0;
      if (check(driver.cuMemAlloc(&counter, sizeof(zero)),
                "cuMemAlloc(tile counter)"))
        return 1;
      if (check(driver.cuMemcpyHtoD(counter, &zero, sizeof(zero)),
                "cuMemcpyHtoD(tile counter)")) {
        driver.cuMemFree(counter);
        return 1;
      }
      it = k->counters.emplace(stream, counter).first;
    }
    counter = it->second;
  }
  // The grid the lowering wrote (fagpu::launchGrid).
  unsigned grid[3];
  if (evaluateGrid(k->meta, k->meta.grid,
                   {{"B", batch},
                    {"Hq", qHeads},
                    {"Hkv", kvHeads},
                    {"Nq", qLen},
                    {"Nk", kvLen},
                    {"D", d},
                    {"kv_splits", splits}},
                   "faKernelLaunch: ", grid))
    return 1;
  // One argument per parameter of the metadata, by name: the kernel's ABI
  // (fagpu::kernelParams) is the one description of their order.
  long long oStrideB = strides[3].batch, oStrideH = strides[3].head,
            oStrideN = strides[3].row;
  // A mask_mod's key ranges are optional: null reads every K/V block.
  CUdeviceptr noKeyRanges = 0;
  std::vector<void *> args;
  for (const std::string &name : k->meta.params) {
    void *arg = name == "q"                ? tensorArgs[0]
                : name == "k"              ? tensorArgs[1]
                : name == "v"              ? tensorArgs[2]
                : name == "o"              ? tensorArgs[3]
                : name == "lse"            ? (void *)&lse
                : name == "Nq"             ? (void *)&qLen
                : name == "Nk"             ? (void *)&kvLen
                : name == "Hq"             ? (void *)&qHeads
                : name == "Hkv"            ? (void *)&kvHeads
                : name == "scale_log2"     ? (void *)&scaleLog2
                : name == "B"              ? (void *)&batch
                : name == "o_rows"         ? (void *)&o
                : name == "o_stride_b"     ? (void *)&oStrideB
                : name == "o_stride_h"     ? (void *)&oStrideH
                : name == "o_stride_n"     ? (void *)&oStrideN
                : name == "kv_splits"      ? (void *)&splits
                : name == "o_partial"      ? (void *)&oPartial
                : name == "lse_partial"    ? (void *)&lsePartial
                : name == "split_arrivals" ? (void *)&arrivals
                : name == "tile_counter"   ? (void *)&counter
                : name == "kv_lengths"     ? (void *)&kvLengths
                : name == "block_table"    ? (void *)&blockTable
                : name == "max_pages"      ? (void *)&maxPages
                : name == "cu_seqlens_q"   ? (void *)&cuQ
                : name == "cu_seqlens_k"   ? (void *)&cuK
                : name == "total_q"        ? (void *)&qRows
                : name == "total_k"        ? (void *)&keyRows
                : name == "num_pages"      ? (void *)&pages
                : name == "v_t"            ? tensorArgs[2]
                : name == "q_descale"      ? (void *)&cache.qDescale
                : name == "k_descale"      ? (void *)&cache.kDescale
                : name == "v_descale"      ? (void *)&cache.vDescale
                : name == "descale_layout" ? (void *)&cache.descaleLayout
                : name == "key_ranges"     ? (void *)&noKeyRanges
                                           : nullptr;
    if (!arg && (name.rfind("capture", 0) == 0 || name == "sinks"))
      return fail("faKernelLaunch: " + k->meta.kernel +
                  " reads attention sinks or captured tensors (score_mod / "
                  "mask_mod), which this launcher does not pass: launch it "
                  "with flashmlir.Kernel(..., sinks=, captures=) from Python");
    if (!arg) // validate() admits only the names above
      return fail("faKernelLaunch: unknown kernel parameter '" + name + "'");
    args.push_back(arg);
  }
  return check(driver.cuLaunchKernel(
                   k->function, grid[0], grid[1], grid[2],
                   (unsigned)k->meta.block[0], (unsigned)k->meta.block[1],
                   (unsigned)k->meta.block[2], (unsigned)k->meta.sharedBytes,
                   stream, args.data(), nullptr),
               "cuLaunchKernel");
}

} // namespace

extern "C" {

int faKernelLaunchStrided(FaKernel *k, const void *q,
                          const FaStrides *qStrides, const void *kp,
                          const FaStrides *kStrides, const void *v,
                          const FaStrides *vStrides, void *o,
                          const FaStrides *oStrides, float *lse, int batch,
                          int qHeads, int kvHeads, int qLen, int kvLen,
                          float scale, int kvSplits, void *stream) {
  if (k && k->meta.varlen)
    return fail("faKernelLaunch: " + k->meta.kernel +
                " runs a varlen batch (cu_seqlens): launch it with "
                "faKernelLaunchVarlen");
  if (k && (k->meta.kvLengths || k->meta.pageSize))
    return fail("faKernelLaunch: " + k->meta.kernel +
                " reads a KV cache (kv_lengths" +
                (k->meta.pageSize ? ", block table" : "") +
                "): launch it with faKernelLaunchKVCache");
  KVCache cache;
  cache.entries = batch;
  cache.rows = kvLen;
  return launchKernel(k, q, qStrides, kp, kStrides, v, vStrides, o, oStrides,
                      lse, batch, qHeads, kvHeads, qLen, cache, scale,
                      kvSplits, stream);
}

int faKernelLaunchE4M3(FaKernel *k, const void *q, const FaStrides *qStrides,
                       const void *kp, const FaStrides *kStrides,
                       const void *v, const FaStrides *vStrides, void *o,
                       const FaStrides *oStrides, float *lse, int batch,
                       int qHeads, int kvHeads, int qLen, int kvLen,
                       float scale, const float *qDescale,
                       const float *kDescale, const float *vDescale,
                       int descaleLayout, void *stream) {
  // The layout first: a bad value is refused without a kernel or a driver.
  if (descaleLayout != FA_DESCALE_PER_TENSOR &&
      descaleLayout != FA_DESCALE_PER_HEAD &&
      descaleLayout != FA_DESCALE_PER_BLOCK)
    return fail("faKernelLaunchE4M3: descaleLayout must be "
                "FA_DESCALE_PER_TENSOR (0), FA_DESCALE_PER_HEAD (1, [B, Hkv]) "
                "or FA_DESCALE_PER_BLOCK (2, per tile), got " +
                std::to_string(descaleLayout));
  if (!k)
    return fail("faKernelLaunchE4M3: kernel must not be null");
  if (k->meta.dtype != "e4m3")
    return fail("faKernelLaunchE4M3: " + k->meta.kernel + " takes " +
                k->meta.dtype + " inputs: launch it with "
                "faKernelLaunchStrided");
  for (const float *p : {qDescale, kDescale, vDescale})
    if (!p || reinterpret_cast<uintptr_t>(p) % 4 != 0)
      return fail("faKernelLaunchE4M3: q_descale, k_descale and v_descale "
                  "must be 4-byte aligned f32 scalars on the device (1.0 "
                  "for unscaled codes)");
  KVCache cache;
  cache.entries = batch;
  cache.rows = kvLen;
  cache.qDescale = qDescale;
  cache.kDescale = kDescale;
  cache.vDescale = vDescale;
  cache.descaleLayout = descaleLayout;
  return launchKernel(k, q, qStrides, kp, kStrides, v, vStrides, o, oStrides,
                      lse, batch, qHeads, kvHeads, qLen, cache, scale,
                      /*kvSplits=*/-1, stream);
}

int faKernelLaunchVarlen(FaKernel *k, const void *q,
                         const FaStrides *qStrides, const void *kp,
                         const FaStrides *kStrides, const void *v,
                         const FaStrides *vStrides, void *o,
                         const FaStrides *oStrides, float *lse, int sequences,
                         int qHeads, int kvHeads, int totalQ, int totalK,
                         int maxSeqlenQ, const int *cuSeqlensQ,
                         const int *cuSeqlensK, float scale, void *stream) {
  if (!k)
    return fail("faKernelLaunchVarlen: kernel must not be null");
  if (!k->meta.varlen)
    return fail("faKernelLaunchVarlen: " + k->meta.kernel +
                " runs no varlen batch (compile one with --varlen); launch "
                "it with faKernelLaunchStrided");
  for (const int *p : {cuSeqlensQ, cuSeqlensK})
    if (!p || reinterpret_cast<uintptr_t>(p) % 4 != 0)
      return fail("faKernelLaunchVarlen: cu_seqlens_q and cu_seqlens_k must "
                  "be 4-byte aligned int32 arrays [B + 1] on the device");
  if (sequences <= 0 || totalQ <= 0 || totalK <= 0 || maxSeqlenQ <= 0 ||
      maxSeqlenQ > totalQ)
    return fail("faKernelLaunchVarlen: the sequences, the packed totals and "
                "the longest sequence's queries (at most the total) must be "
                "positive, got " +
                std::to_string(sequences) + ", " + std::to_string(totalQ) +
                ", " + std::to_string(totalK) + ", " +
                std::to_string(maxSeqlenQ));
  KVCache cache;
  cache.entries = 1;
  cache.rows = totalK;
  cache.cuQ = cuSeqlensQ;
  cache.cuK = cuSeqlensK;
  cache.qRows = totalQ;
  return launchKernel(k, q, qStrides, kp, kStrides, v, vStrides, o, oStrides,
                      lse, sequences, qHeads, kvHeads, maxSeqlenQ, cache, scale,
                      /*kvSplits=*/-1, stream);
}

} // extern "C"

/// The cache arguments a KV-cache kernel takes (faKernelLaunchKVCache,
/// faKernelAppendKV; `where` names the entry point, `access` says "reads"
/// or "writes"): a block table exactly for a paged kernel, entries (the
/// sequences, or the pages) and rows (the capacity, or the page size) as
/// the kernel's paging says, and max_pages within a 32-bit capacity; a
/// contiguous cache's max_pages becomes 0.
static int checkCacheShape(const std::string &where, const Metadata &m,
                           const char *access, int batch,
                           long long cacheEntries, int cacheRows,
                           const int *blockTable, int &maxPages) {
  if ((m.pageSize != 0) != (blockTable != nullptr))
    return fail(where + m.kernel + " " + access +
                (m.pageSize ? " a paged cache: give its block table [B, "
                              "max_pages] (int32)"
                            : " a contiguous cache: pass a NULL block table"));
  if (cacheEntries <= 0 || cacheEntries > 0x7fffffffLL || cacheRows <= 0)
    return fail(where + "the cache's entries (" + std::to_string(cacheEntries) +
                ") and rows (" + std::to_string(cacheRows) +
                ") must be positive");
  if (!m.pageSize) {
    if (cacheEntries != batch)
      return fail(where + "a contiguous cache has one entry per sequence (" +
                  std::to_string(batch) + "), got " +
                  std::to_string(cacheEntries));
    maxPages = 0;
    return 0;
  }
  if (cacheRows != m.pageSize)
    return fail(where + m.kernel + " " + access + " pages of " +
                std::to_string(m.pageSize) + " rows, got a cache of " +
                std::to_string(cacheRows) + "-row pages");
  if (maxPages <= 0 || (long long)maxPages * cacheRows > 0x7fffffffLL)
    return fail(where + "max_pages must be in [1, " +
                std::to_string(0x7fffffffLL / cacheRows) + "], got " +
                std::to_string(maxPages));
  return 0;
}

/// faKernelLaunchKVCache and faKernelLaunchKVCacheE4M3: the cache's checks
/// (`api` names the entry point in the messages), then the launch; the
/// descales are null for a 16-bit cache.
static int launchKVCache(
    const char *api, FaKernel *k, const void *q, const FaStrides *qStrides,
    const void *kCache, const FaStrides *kStrides, const void *vCache,
    const FaStrides *vStrides, void *o, const FaStrides *oStrides, float *lse,
    int batch, int qHeads, int kvHeads, int qLen, long long cacheEntries,
    int cacheRows, const int *kvLengths, const int *blockTable, int maxPages,
    float scale, int kvSplits, const float *kDescale, const float *vDescale,
    int descaleLayout, void *stream) {
  const std::string where = std::string(api) + ": ";
  if (!k)
    return fail(where + "kernel must not be null");
  const Metadata &m = k->meta;
  if (m.varlen)
    return fail(where + m.kernel + " runs a varlen batch, not a KV cache");
  if (!m.kvLengths && !m.pageSize)
    return fail(where + m.kernel +
                " reads no KV cache (compile one with --kv-lengths or "
                "--page-size); launch it with faKernelLaunchStrided");
  if (m.kvLengths != (kvLengths != nullptr))
    return fail(std::string(where + "") + m.kernel +
                (m.kvLengths ? " takes kv_lengths [B] (int32): give them"
                             : " takes no kv_lengths: pass NULL"));
  if (checkCacheShape(where, m, "reads", batch, cacheEntries, cacheRows,
                      blockTable, maxPages))
    return 1;
  for (const void *p : {(const void *)kvLengths, (const void *)blockTable})
    if (p && reinterpret_cast<uintptr_t>(p) % 4 != 0)
      return fail(where + "kv_lengths and the block table "
                          "must be 4-byte aligned int32 arrays");
  KVCache cache;
  cache.entries = cacheEntries;
  cache.rows = cacheRows;
  cache.lengths = kvLengths;
  cache.table = blockTable;
  cache.maxPages = maxPages;
  cache.kDescale = kDescale;
  cache.vDescale = vDescale;
  cache.descaleLayout = descaleLayout;
  return launchKernel(k, q, qStrides, kCache, kStrides, vCache, vStrides, o,
                      oStrides, lse, batch, qHeads, kvHeads, qLen, cache, scale,
                      kvSplits, stream);
}

extern "C" {

int faKernelLaunchKVCache(FaKernel *k, const void *q,
                          const FaStrides *qStrides, const void *kCache,
                          const FaStrides *kStrides, const void *vCache,
                          const FaStrides *vStrides, void *o,
                          const FaStrides *oStrides, float *lse, int batch,
                          int qHeads, int kvHeads, int qLen,
                          long long cacheEntries, int cacheRows,
                          const int *kvLengths, const int *blockTable,
                          int maxPages, float scale, int kvSplits,
                          void *stream) {
  return launchKVCache("faKernelLaunchKVCache", k, q, qStrides, kCache,
                       kStrides, vCache, vStrides, o, oStrides, lse, batch,
                       qHeads, kvHeads, qLen, cacheEntries, cacheRows,
                       kvLengths, blockTable, maxPages, scale, kvSplits,
                       nullptr, nullptr, FA_DESCALE_PER_TENSOR, stream);
}

int faKernelLaunchKVCacheE4M3(
    FaKernel *k, const void *q, const FaStrides *qStrides, const void *kCache,
    const FaStrides *kStrides, const void *vCache, const FaStrides *vStrides,
    void *o, const FaStrides *oStrides, float *lse, int batch, int qHeads,
    int kvHeads, int qLen, long long cacheEntries, int cacheRows,
    const int *kvLengths, const int *blockTable, int maxPages, float scale,
    int kvSplits, const float *kDescale, const float *vDescale,
    int descaleLayout, void *stream) {
  // The layout first: a bad value is refused without a kernel or a driver.
  // An e4m3 cache's descales are per tensor or per (sequence, K/V head).
  if (descaleLayout != FA_DESCALE_PER_TENSOR &&
      descaleLayout != FA_DESCALE_PER_HEAD)
    return fail("faKernelLaunchKVCacheE4M3: descaleLayout must be "
                "FA_DESCALE_PER_TENSOR (0) or FA_DESCALE_PER_HEAD (1, [B, "
                "Hkv]), got " +
                std::to_string(descaleLayout));
  for (const float *p : {kDescale, vDescale})
    if (!p || reinterpret_cast<uintptr_t>(p) % 4 != 0)
      return fail("faKernelLaunchKVCacheE4M3: k_descale and v_descale must "
                  "be 4-byte aligned f32 arrays on the device (one element, "
                  "or [B, Hkv] with FA_DESCALE_PER_HEAD)");
  return launchKVCache("faKernelLaunchKVCacheE4M3", k, q, qStrides, kCache,
                       kStrides, vCache, vStrides, o, oStrides, lse, batch,
                       qHeads, kvHeads, qLen, cacheEntries, cacheRows,
                       kvLengths, blockTable, maxPages, scale, kvSplits,
                       kDescale, vDescale, descaleLayout, stream);
}

int faKernelAppendKV(FaKernel *k, const void *kNew,
                     const FaStrides *kNewStrides, const void *vNew,
                     const FaStrides *vNewStrides, void *kCache,
                     const FaStrides *kStrides, void *vCache,
                     const FaStrides *vStrides, int batch, int newRows,
                     int kvHeads, long long cacheEntries, int cacheRows,
                     const int *kvLengths, int *seen, const int *blockTable,
                     int maxPages, const float *kDescale, const float *vDescale,
                     int descaleLayout, void *stream) {
  const std::string where = "faKernelAppendKV: ";
  if (!k)
    return fail(where + "kernel must not be null");
  const Metadata &m = k->meta;
  if (!m.hasKvAppend)
    return fail(where + m.kernel +
                " has no append kernel (metadata 'kv_append'; fa-compile "
                "--kv-lengths builds one)");
  const bool e4m3Cache = m.kvDtype == "e4m3" && m.dtype != "e4m3";
  if (e4m3Cache) {
    if (descaleLayout != FA_DESCALE_PER_TENSOR &&
        descaleLayout != FA_DESCALE_PER_HEAD)
      return fail(where +
                  "descaleLayout must be FA_DESCALE_PER_TENSOR (0) "
                  "or FA_DESCALE_PER_HEAD (1, [B, Hkv]), got " +
                  std::to_string(descaleLayout));
    for (const float *p : {kDescale, vDescale})
      if (!p || reinterpret_cast<uintptr_t>(p) % 4 != 0)
        return fail(where + m.kernel +
                    " writes an e4m3 cache: k_descale and v_descale must be "
                    "4-byte aligned f32 arrays on the device");
  } else if (kDescale || vDescale) {
    return fail(where + m.kernel +
                " writes a 16-bit cache: pass NULL descales");
  }
  if (!kNew || !vNew || !kCache || !vCache || !kvLengths || !seen ||
      !kNewStrides || !vNewStrides || !kStrides || !vStrides)
    return fail(where + "the tensors, their strides, kv_lengths and seen "
                        "must not be null");
  if (batch <= 0 || newRows <= 0 || kvHeads <= 0)
    return fail(where +
                "batch, new rows and K/V heads must be positive, "
                "got " +
                std::to_string(batch) + ", " + std::to_string(newRows) + ", " +
                std::to_string(kvHeads));
  if (checkCacheShape(where, m, "writes", batch, cacheEntries, cacheRows,
                      blockTable, maxPages))
    return 1;
  for (const void *p :
       {(const void *)kvLengths, (const void *)seen, (const void *)blockTable})
    if (p && reinterpret_cast<uintptr_t>(p) % 4 != 0)
      return fail(where + "kv_lengths, seen and the block table must be "
                          "4-byte aligned int32 arrays");
  const long long capacity =
      m.pageSize ? (long long)maxPages * cacheRows : cacheRows;
  // 16 bytes of a row a thread: the strides must keep every piece whole.
  const long long columns = m.kvAppendColumns;
  const long long bytes = e4m3Cache ? 1 : 2;
  for (const FaStrides *t : {kNewStrides, vNewStrides, kStrides, vStrides})
    if (t->batch % columns || t->head % columns || t->row % columns)
      return fail(where + "strides must be multiples of " +
                  std::to_string(columns) +
                  " elements (whole 16-byte pieces of a row)");
  for (const void *p : {kNew, vNew})
    if (reinterpret_cast<uintptr_t>(p) % 16 != 0)
      return fail(where + "k and v must be 16-byte aligned");
  for (const void *p : {(const void *)kCache, (const void *)vCache})
    if (reinterpret_cast<uintptr_t>(p) % (columns * bytes) != 0)
      return fail(where + "the caches must be " +
                  std::to_string(columns * bytes) + "-byte aligned");
  if (m.headDim % columns)
    return fail(where + "the head dim must be a multiple of " +
                std::to_string(columns));
  // The grid the lowering wrote (fagpu::kvAppendGrid).
  unsigned grid[3];
  if (evaluateGrid(
          m, m.kvAppendGrid,
          {{"B", batch}, {"Nnew", newRows}, {"Hkv", kvHeads}, {"D", m.headDim}},
          where + "the append kernel's ", grid))
    return 1;
  // Every parameter by name, in the metadata's order.
  int b = batch, rows = newRows, heads = kvHeads, page = (int)m.pageSize,
      pages = maxPages, entries = (int)(m.pageSize ? cacheEntries : 0),
      cap = (int)capacity;
  long long strides[4][3] = {
      {kNewStrides->batch, kNewStrides->row, kNewStrides->head},
      {vNewStrides->batch, vNewStrides->row, vNewStrides->head},
      {kStrides->batch, kStrides->row, kStrides->head},
      {vStrides->batch, vStrides->row, vStrides->head}};
  const void *pointers[] = {kNew, vNew,       kCache,   vCache,  kvLengths,
                            seen, blockTable, kDescale, vDescale};
  const char *pointerNames[] = {"k_new",       "v_new",         "k_cache",
                                "v_cache",     "cache_seqlens", "seen",
                                "block_table", "k_descale",     "v_descale"};
  std::vector<void *> args;
  for (const std::string &name : m.kvAppendParams) {
    void *arg = nullptr;
    for (int i = 0; i < 9 && !arg; ++i)
      if (name == pointerNames[i])
        arg = (void *)&pointers[i];
    const std::pair<const char *, int *> scalars[] = {
        {"B", &b},
        {"Nnew", &rows},
        {"Hkv", &heads},
        {"page_size", &page},
        {"max_pages", &pages},
        {"num_pages", &entries},
        {"capacity", &cap},
        {"descale_layout", &descaleLayout}};
    for (const auto &[scalar, value] : scalars)
      if (!arg && name == scalar)
        arg = value;
    const char *tensors[] = {"k_new", "v_new", "k_cache", "v_cache"};
    for (int t = 0; t < 4 && !arg; ++t)
      for (int d = 0; d < 3 && !arg; ++d)
        if (name == std::string(tensors[t]) + "_stride_" + "bnh"[d])
          arg = &strides[t][d];
    if (!arg)
      return fail(where +
                  "no launch value for the append kernel's "
                  "parameter '" +
                  name + "'");
    args.push_back(arg);
  }
  return check(driver.cuLaunchKernel(k->appendFunction, grid[0], grid[1],
                                     grid[2], (unsigned)m.kvAppendBlock[0], 1,
                                     1, 0, stream, args.data(), nullptr),
               "cuLaunchKernel(KV append)");
}

} // extern "C"
