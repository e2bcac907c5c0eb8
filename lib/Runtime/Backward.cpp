//===- Backward.cpp - loading and launching a backward kernel
//--------------===//
//
// fa-compile --backward's artefacts: a cubin of three kernels and the
// "flash-mlir-backward-2" metadata that names them. A launch runs them in
// stream order -- the preprocess (row_dots = rowsum(dO o O), dQ's f32
// accumulator zeroed, a deterministic kernel's turn counters zeroed), the
// main kernel, dQ's conversion -- each with its parameters bound by name
// and its grid from the metadata's formulas. The intermediates live in a
// workspace the caller owns (faBackwardWorkspaceBytes), as cuDNN's and
// FlashAttention's C++ APIs take one.
//
//===----------------------------------------------------------------------===//

#include "RuntimeImpl.h"

#include "fa/Model/Positions.h"

#include <cmath>
#include <cstdint>

using namespace flashmlir::runtime;

namespace {

/// Workspace pieces start on 256-byte boundaries (the alignment of
/// cuMemAlloc's allocations, which the kernels' vector accesses need at
/// most 16 of).
constexpr size_t kWorkspaceAlign = 256;

size_t alignUp(size_t bytes) {
  return (bytes + kWorkspaceAlign - 1) / kWorkspaceAlign * kWorkspaceAlign;
}

/// The workspace's pieces for a launch of this shape: row_dots [B, Hq, Nq]
/// f32, dq_accum [B, Hq, Nq, D] f32, and (deterministic) one i32 turn
/// counter per 64-row query block.
struct WorkspaceLayout {
  size_t rowDots = 0, dqAccum = 0, semaphores = 0, total = 0;
};

WorkspaceLayout layoutOf(const Metadata &m, long long batch, long long heads,
                         long long rows) {
  WorkspaceLayout w;
  size_t matrices = (size_t)batch * (size_t)heads;
  w.dqAccum = alignUp(matrices * (size_t)rows * sizeof(float));
  size_t dqBytes =
      alignUp(matrices * (size_t)rows * (size_t)m.headDim * sizeof(float));
  w.semaphores = w.dqAccum + dqBytes;
  size_t semaphoreBytes =
      m.deterministic ? alignUp(matrices * (size_t)((rows + 63) / 64) * 4) : 0;
  w.total = w.semaphores + semaphoreBytes;
  return w;
}

/// Launches `fn` with `params` (names) bound from `values`.
int launchRows(const std::string &where, void *fn, const Metadata &m,
               const std::string &kernel, const std::vector<long> &block,
               const GridFormulas &gridFormulas,
               const std::vector<std::string> &params,
               const std::vector<std::pair<std::string, void *>> &values,
               std::initializer_list<std::pair<const char *, long long>> sizes,
               unsigned sharedBytes, void *stream) {
  unsigned grid[3];
  if (evaluateGrid(m, gridFormulas, sizes, where + kernel + "'s ", grid))
    return 1;
  std::vector<void *> args;
  for (const std::string &name : params) {
    void *arg = nullptr;
    for (const auto &[valueName, value] : values)
      if (name == valueName)
        arg = value;
    if (!arg)
      return fail(where + "no launch value for " + kernel + "'s parameter '" +
                  name + "'");
    args.push_back(arg);
  }
  return check(driver.cuLaunchKernel(fn, grid[0], grid[1], grid[2],
                                     (unsigned)block[0], (unsigned)block[1],
                                     (unsigned)block[2], sharedBytes, stream,
                                     args.data(), nullptr),
               ("cuLaunchKernel(" + kernel + ")").c_str());
}

} // namespace

extern "C" {

int faBackwardKernelLoad(const void *cubin, size_t cubinSize,
                         const char *metadataJson, int device,
                         FaBackwardKernel **kernel) {
  const std::string where = "faBackwardKernelLoad: ";
  if (!kernel)
    return fail(where + "kernel must not be null");
  *kernel = nullptr;
  if (!cubin || cubinSize == 0)
    return fail(where + "the cubin is empty");
  if (!metadataJson)
    return fail(where + "the metadata is null");
  auto k = new FaBackwardKernel();
  if (parseMetadata(metadataJson, k->meta, /*backward=*/true) ||
      checkImage(cubin, cubinSize) || faDeviceInit(device) ||
      check(driver.cuModuleLoadData(&k->module, cubin), "cuModuleLoadData")) {
    delete k;
    return 1;
  }
  // validateBackward has made sure each of the three is named.
  if (loadFunctions(
          k->module,
          {{&k->preprocess, &k->meta.preprocess.kernel, "from the metadata"},
           {&k->function, &k->meta.kernel, "from the metadata"},
           {&k->convert, &k->meta.convert.kernel, "from the metadata"}},
          &k->function, k->meta.sharedBytes)) {
    delete k;
    return 1;
  }
  *kernel = k;
  return 0;
}

int faBackwardKernelLoadFiles(const char *prefix, int device,
                              FaBackwardKernel **kernel) {
  if (!prefix)
    return fail("faBackwardKernelLoadFiles: prefix must not be null");
  std::string cubin, json;
  if (readKernelFiles(prefix, cubin, json))
    return 1;
  return faBackwardKernelLoad(cubin.data(), cubin.size(), json.c_str(), device,
                              kernel);
}

int faBackwardMetadataCheck(const char *metadataJson) {
  if (!metadataJson)
    return fail("faBackwardMetadataCheck: the metadata is null");
  Metadata meta;
  return parseMetadata(metadataJson, meta, /*backward=*/true);
}

const char *faBackwardKernelName(const FaBackwardKernel *k) {
  return k ? k->meta.kernel.c_str() : "";
}

int faBackwardWorkspaceBytes(const FaBackwardKernel *k, int batch, int qHeads,
                             int qLen, size_t *bytes) {
  const std::string where = "faBackwardWorkspaceBytes: ";
  if (!k || !bytes)
    return fail(where + "kernel and bytes must not be null");
  if (batch <= 0 || qHeads <= 0 || qLen <= 0)
    return fail(where +
                "batch, query heads and query length must be "
                "positive, got " +
                std::to_string(batch) + ", " + std::to_string(qHeads) + ", " +
                std::to_string(qLen));
  *bytes = layoutOf(k->meta, batch, qHeads, qLen).total;
  return 0;
}

int faBackwardKernelLaunch(FaBackwardKernel *k, const void *q, const void *kp,
                           const void *v, const void *o, const float *lse,
                           const void *dO, void *dq, void *dk, void *dv,
                           void *workspace, size_t workspaceBytes, int batch,
                           int qHeads, int kvHeads, int qLen, int kvLen,
                           float scale, void *stream) {
  const std::string where = "faBackwardKernelLaunch: ";
  if (!k)
    return fail(where + "kernel must not be null");
  const Metadata &m = k->meta;
  const void *tensors[] = {q, kp, v, o, dO, dq, dk, dv};
  for (const void *p : tensors)
    if (!p || reinterpret_cast<uintptr_t>(p) % 16 != 0)
      return fail(where + "q, k, v, o, dO, dq, dk and dv must be non-null, "
                          "16-byte aligned device buffers");
  if (!lse || reinterpret_cast<uintptr_t>(lse) % 4 != 0)
    return fail(where + "lse must be a non-null, 4-byte aligned f32 buffer");
  if (batch <= 0 || qHeads <= 0 || kvHeads <= 0 || qLen <= 0 || kvLen <= 0)
    return fail(where + "batch, heads and lengths must be positive, got B " +
                std::to_string(batch) + ", Hq " + std::to_string(qHeads) +
                ", Hkv " + std::to_string(kvHeads) + ", Nq " +
                std::to_string(qLen) + ", Nk " + std::to_string(kvLen));
  if (qHeads % kvHeads)
    return fail(where + "query heads (" + std::to_string(qHeads) +
                ") must be a multiple of K/V heads (" +
                std::to_string(kvHeads) + ")");
  // The kernels' positions are 32-bit and kept below 2^30.
  if (qLen > mlir::fa::model::kMaxKernelPosition ||
      kvLen > mlir::fa::model::kMaxKernelPosition)
    return fail(where + "lengths must be at most " +
                std::to_string(mlir::fa::model::kMaxKernelPosition));
  if (!std::isfinite(scale) || scale <= 0.0f)
    return fail(where + "scale must be positive and finite");
  WorkspaceLayout layout = layoutOf(m, batch, qHeads, qLen);
  if (!workspace || reinterpret_cast<uintptr_t>(workspace) % kWorkspaceAlign)
    return fail(where + "workspace must be a non-null, 256-byte aligned "
                        "device buffer");
  if (workspaceBytes < layout.total)
    return fail(where + "workspace has " + std::to_string(workspaceBytes) +
                " bytes, this launch needs " + std::to_string(layout.total) +
                " (faBackwardWorkspaceBytes)");
  auto *base = static_cast<char *>(workspace);
  void *rowDots = base + layout.rowDots, *dqAccum = base + layout.dqAccum,
       *semaphores = base + layout.semaphores;
  int hq = qHeads, hkv = kvHeads, nq = qLen, nk = kvLen;
  float s = scale;
  const void *pointers[] = {q,  kp, v,  o,       lse,     dO,
                            dq, dk, dv, rowDots, dqAccum, semaphores};
  const std::vector<std::pair<std::string, void *>> values = {
      {"q", (void *)&pointers[0]},
      {"k", (void *)&pointers[1]},
      {"v", (void *)&pointers[2]},
      {"o", (void *)&pointers[3]},
      {"lse", (void *)&pointers[4]},
      {"do", (void *)&pointers[5]},
      {"dq", (void *)&pointers[6]},
      {"dk", (void *)&pointers[7]},
      {"dv", (void *)&pointers[8]},
      {"row_dots", (void *)&pointers[9]},
      {"dq_accum", (void *)&pointers[10]},
      {"dq_semaphores", (void *)&pointers[11]},
      {"Hq", &hq},
      {"Hkv", &hkv},
      {"Nq", &nq},
      {"Nk", &nk},
      {"scale", &s}};
  auto sizes = {std::pair<const char *, long long>{"B", batch},
                {"Hq", qHeads},
                {"Hkv", kvHeads},
                {"Nq", qLen},
                {"Nk", kvLen},
                {"D", m.headDim}};
  return launchRows(where, k->preprocess, m, m.preprocess.kernel,
                    m.preprocess.block, m.preprocess.grid, m.preprocess.params,
                    values, sizes, 0, stream) ||
         launchRows(where, k->function, m, m.kernel, m.block, m.grid, m.params,
                    values, sizes, (unsigned)m.sharedBytes, stream) ||
         launchRows(where, k->convert, m, m.convert.kernel, m.convert.block,
                    m.convert.grid, m.convert.params, values, sizes, 0, stream);
}

void faBackwardKernelDestroy(FaBackwardKernel *k) {
  if (!k)
    return;
  if (driverLoaded && k->module)
    driver.cuModuleUnload(k->module);
  delete k;
}

} // extern "C"
