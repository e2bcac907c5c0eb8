//===- Kernel.cpp - loading a kernel and reading its metadata ---------------===//
//
// faKernelLoad checks the metadata and the image before the driver sees
// them; the accessors answer from the metadata.
//
//===----------------------------------------------------------------------===//

#include "RuntimeImpl.h"

#include <cmath>
#include <fstream>
#include <sstream>

using namespace flashmlir::runtime;

int flashmlir::runtime::moduleFunction(void *module, const std::string &name,
                                       const std::string &from,
                                       void **function) {
  CUresult status = driver.cuModuleGetFunction(function, module, name.c_str());
  if (status != 0)
    return fail("the cubin has no kernel named '" + name + "' (" + from +
                "): cuModuleGetFunction failed: " + driver.describe(status));
  return 0;
}

int flashmlir::runtime::allowSharedBytes(void *function, long bytes) {
  // Above 48 KiB, dynamic shared memory must be opted into per function.
  if (bytes <= 48 * 1024)
    return 0;
  return check(driver.cuFuncSetAttribute(function,
                                         /*MAX_DYNAMIC_SHARED_SIZE_BYTES=*/8,
                                         (int)bytes),
               "cuFuncSetAttribute(CU_FUNC_ATTRIBUTE_MAX_DYNAMIC_SHARED_SIZE_"
               "BYTES)");
}

int flashmlir::runtime::loadFunctions(void *module,
                                      std::initializer_list<FunctionSlot> slots,
                                      void **main, long sharedBytes) {
  for (const FunctionSlot &slot : slots)
    if (!slot.name->empty() &&
        moduleFunction(module, *slot.name, slot.from, slot.function)) {
      driver.cuModuleUnload(module);
      return 1;
    }
  if (allowSharedBytes(*main, sharedBytes)) {
    driver.cuModuleUnload(module);
    return 1;
  }
  return 0;
}

int flashmlir::runtime::readKernelFiles(const char *prefix, std::string &cubin,
                                        std::string &json) {
  auto readAll = [](const std::string &path, std::string &out) {
    std::ifstream f(path, std::ios::binary);
    if (!f)
      return false;
    std::ostringstream ss;
    ss << f.rdbuf();
    out = ss.str();
    return true;
  };
  if (!readAll(std::string(prefix) + ".json", json))
    return fail(std::string("cannot read ") + prefix + ".json");
  if (!readAll(std::string(prefix) + ".cubin", cubin))
    return fail(std::string("cannot read ") + prefix + ".cubin");
  return 0;
}

extern "C" {

int faKernelLoad(const void *cubin, size_t cubinSize, const char *metadataJson,
                 int device, FaKernel **kernel) {
  if (!kernel)
    return fail("faKernelLoad: kernel must not be null");
  *kernel = nullptr;
  if (!cubin || cubinSize == 0)
    return fail("faKernelLoad: the cubin is empty");
  if (!metadataJson)
    return fail("faKernelLoad: the metadata is null");
  auto k = new FaKernel();
  std::string text(metadataJson);
  if (parseMetadata(text, k->meta)) {
    delete k;
    return 1;
  }
  if (checkImage(cubin, cubinSize) || faDeviceInit(device) ||
      check(driver.cuModuleLoadData(&k->module, cubin), "cuModuleLoadData")) {
    delete k;
    return 1;
  }
  // The attention, then the auxiliary kernels the metadata names beside
  // it: the e4m3 V layout kernel, a KV cache's append kernel.
  if (loadFunctions(k->module,
                    {{&k->function, &k->meta.kernel, "from the metadata"},
                     {&k->layoutFunction, &k->meta.valueLayoutKernel,
                      "the metadata's value_layout"},
                     {&k->appendFunction, &k->meta.kvAppendKernel,
                      "the metadata's kv_append"}},
                    &k->function, k->meta.sharedBytes)) {
    delete k;
    return 1;
  }
  *kernel = k;
  return 0;
}

int faKernelLoadFiles(const char *prefix, int device, FaKernel **kernel) {
  if (!prefix)
    return fail("faKernelLoadFiles: prefix must not be null");
  std::string cubin, json;
  if (readKernelFiles(prefix, cubin, json))
    return 1;
  return faKernelLoad(cubin.data(), cubin.size(), json.c_str(), device, kernel);
}

const char *faKernelName(const FaKernel *k) {
  return k ? k->meta.kernel.c_str() : "";
}
int faKernelHeadDim(const FaKernel *k) { return k ? (int)k->meta.headDim : 0; }
int faKernelValueHeadDim(const FaKernel *k) {
  return k ? (int)k->meta.valueColumns() : 0;
}
int faKernelIsCausal(const FaKernel *k) { return k && k->meta.causal; }
const char *faKernelDType(const FaKernel *k) {
  return k ? k->meta.dtype.c_str() : "";
}
int faKernelMasks(const FaKernel *k, int *bottomRight, long long *window,
                  float *softcap) {
  if (!k)
    return fail("faKernelMasks: kernel must not be null");
  if (bottomRight)
    *bottomRight = k->meta.bottomRight;
  if (window)
    *window = k->meta.window;
  if (softcap)
    *softcap = k->meta.softcap;
  return 0;
}
int faKernelTiles(const FaKernel *k, int *blockR, int *blockC) {
  if (!k)
    return fail("faKernelTiles: kernel must not be null");
  if (blockR)
    *blockR = static_cast<int>(k->meta.blockR);
  if (blockC)
    *blockC = static_cast<int>(k->meta.blockC);
  return 0;
}
long long faKernelDiagonalOffset(const FaKernel *k) {
  return k ? k->meta.diagonalOffset : 0;
}

const char *faKernelOutDType(const FaKernel *k) {
  if (!k)
    return "";
  return k->meta.outDtype.empty() ? k->meta.dtype.c_str()
                                  : k->meta.outDtype.c_str();
}

float faKernelScale(const FaKernel *k) {
  if (!k)
    return 0.0f;
  if (k->meta.scale > 0.0f)
    return k->meta.scale;
  return 1.0f / std::sqrt(static_cast<float>(k->meta.headDim));
}

void faKernelDestroy(FaKernel *k) {
  if (!k)
    return;
  if (driverLoaded) {
    for (auto &entry : k->counters)
      driver.cuMemFree(entry.second);
    for (auto &entry : k->splitScratch) {
      if (entry.second.partials)
        driver.cuMemFree(entry.second.partials);
      if (entry.second.arrivals)
        driver.cuMemFree(entry.second.arrivals);
    }
    for (auto &entry : k->valueWorkspace)
      if (entry.second.ptr)
        driver.cuMemFree(entry.second.ptr);
    if (k->module)
      driver.cuModuleUnload(k->module);
  }
  delete k;
}

} // extern "C"
