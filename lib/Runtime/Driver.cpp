//===- Driver.cpp - the CUDA driver, opened with dlopen ---------------------===//
//
// libcuda is opened with dlopen so that the library also loads (and reports
// a clear error) where there is no driver. The device-memory calls of the
// C API are here too.
//
//===----------------------------------------------------------------------===//

#include "RuntimeImpl.h"

#include <dlfcn.h>

#include <cstdlib>
#include <vector>

namespace flashmlir::runtime {

namespace {
thread_local std::string lastError;
} // namespace

int fail(const std::string &message) {
  lastError = message;
  return 1;
}

const char *lastErrorText() { return lastError.c_str(); }

Driver driver;
// Set once, under driverLock, after every entry point is resolved: launches
// on other threads read it without the lock.
std::atomic<bool> driverLoaded{false};
namespace {
std::mutex driverLock;
} // namespace

/// Fails with "<call> failed: <name>: <description>".
int check(CUresult status, const char *call) {
  if (status == 0)
    return 0;
  return fail(std::string(call) + " failed: " + driver.describe(status));
}

int loadDriver() {
  if (driverLoaded)
    return 0;
  std::lock_guard<std::mutex> lock(driverLock);
  if (driverLoaded)
    return 0;
  // FLASHMLIR_LIBCUDA, when set, is the only library tried.
  const char *path = std::getenv("FLASHMLIR_LIBCUDA");
  const char *candidates[] = {path, path ? nullptr : "libcuda.so.1",
                              path ? nullptr : "libcuda.so"};
  std::string tried;
  for (const char *c : candidates) {
    if (!c)
      continue;
    driver.handle = dlopen(c, RTLD_NOW | RTLD_LOCAL);
    if (driver.handle)
      break;
    tried += std::string(tried.empty() ? "" : "; ") + dlerror();
  }
  if (!driver.handle)
    return fail("cannot load the CUDA driver library (libcuda.so.1); the "
                "runtime needs an NVIDIA driver: " +
                tried);
  struct Entry {
    const char *name;
    void **slot;
  } entries[] = {
      {"cuInit", (void **)&driver.cuInit},
      {"cuDeviceGet", (void **)&driver.cuDeviceGet},
      {"cuDevicePrimaryCtxRetain", (void **)&driver.cuDevicePrimaryCtxRetain},
      {"cuCtxSetCurrent", (void **)&driver.cuCtxSetCurrent},
      {"cuCtxSynchronize", (void **)&driver.cuCtxSynchronize},
      {"cuModuleLoadData", (void **)&driver.cuModuleLoadData},
      {"cuModuleUnload", (void **)&driver.cuModuleUnload},
      {"cuModuleGetFunction", (void **)&driver.cuModuleGetFunction},
      {"cuFuncSetAttribute", (void **)&driver.cuFuncSetAttribute},
      {"cuLaunchKernel", (void **)&driver.cuLaunchKernel},
      {"cuMemAlloc_v2", (void **)&driver.cuMemAlloc},
      {"cuMemFree_v2", (void **)&driver.cuMemFree},
      {"cuMemcpyHtoD_v2", (void **)&driver.cuMemcpyHtoD},
      {"cuMemcpyDtoH_v2", (void **)&driver.cuMemcpyDtoH},
      {"cuCtxGetDevice", (void **)&driver.cuCtxGetDevice},
      {"cuDeviceGetAttribute", (void **)&driver.cuDeviceGetAttribute},
      {"cuTensorMapEncodeTiled", (void **)&driver.cuTensorMapEncodeTiled},
      {"cuGetErrorName", (void **)&driver.cuGetErrorName},
      {"cuGetErrorString", (void **)&driver.cuGetErrorString},
  };
  for (Entry &e : entries) {
    *e.slot = dlsym(driver.handle, e.name);
    if (!*e.slot)
      return fail(std::string("the CUDA driver lacks ") + e.name);
  }
  if (check(driver.cuInit(0), "cuInit"))
    return 1;
  driverLoaded = true;
  return 0;
}

/// The current context's device's SM count, in `sms`.
int currentDeviceSMs(int &sms) {
  CUdevice dev;
  return check(driver.cuCtxGetDevice(&dev), "cuCtxGetDevice") ||
         check(driver.cuDeviceGetAttribute(&sms, 16 /*MULTIPROCESSOR_COUNT*/,
                                           dev),
               "cuDeviceGetAttribute(multiprocessor count)");
}

/// The current context's device's peak DRAM bandwidth in GB/s, in `gbps`:
/// the memory clock (kHz) times the bus width (bits) times two transfers a
/// clock (DDR and HBM alike), in bytes.
int currentDeviceDramGBps(int &gbps) {
  CUdevice dev;
  int clockKHz = 0, busBits = 0;
  if (check(driver.cuCtxGetDevice(&dev), "cuCtxGetDevice") ||
      check(
          driver.cuDeviceGetAttribute(&clockKHz, 36 /*MEMORY_CLOCK_RATE*/, dev),
          "cuDeviceGetAttribute(memory clock rate)") ||
      check(driver.cuDeviceGetAttribute(&busBits,
                                        37 /*GLOBAL_MEMORY_BUS_WIDTH*/, dev),
            "cuDeviceGetAttribute(memory bus width)"))
    return 1;
  gbps = (int)((long long)clockKHz * 2 * (busBits / 8) / 1000000);
  return 0;
}

/// `bytes` of device memory in `ptr`, reallocated when smaller; zeroed when
/// `zero` (then kept zero by the kernels).
int ensureDeviceBytes(CUdeviceptr &ptr, size_t &have, size_t bytes, bool zero,
                      const char *what) {
  if (have >= bytes)
    return 0;
  if (ptr)
    driver.cuMemFree(ptr);
  ptr = 0;
  have = 0;
  if (check(driver.cuMemAlloc(&ptr, bytes), what))
    return 1;
  if (zero) {
    std::vector<unsigned char> zeros(bytes, 0);
    if (check(driver.cuMemcpyHtoD(ptr, zeros.data(), bytes), what)) {
      driver.cuMemFree(ptr);
      ptr = 0;
      return 1;
    }
  }
  have = bytes;
  return 0;
}

} // namespace flashmlir::runtime

using namespace flashmlir::runtime;

extern "C" {

const char *faRuntimeLastError(void) { return lastErrorText(); }

int faDeviceInit(int device) {
  if (loadDriver())
    return 1;
  CUdevice dev;
  void *ctx = nullptr;
  if (check(driver.cuDeviceGet(&dev, device), "cuDeviceGet") ||
      check(driver.cuDevicePrimaryCtxRetain(&ctx, dev),
            "cuDevicePrimaryCtxRetain") ||
      check(driver.cuCtxSetCurrent(ctx), "cuCtxSetCurrent"))
    return 1;
  return 0;
}

int faDeviceAlloc(size_t bytes, void **ptr) {
  if (!ptr)
    return fail("faDeviceAlloc: ptr must not be null");
  if (loadDriver())
    return 1;
  CUdeviceptr p = 0;
  if (check(driver.cuMemAlloc(&p, bytes), "cuMemAlloc"))
    return 1;
  *ptr = reinterpret_cast<void *>(p);
  return 0;
}

int faDeviceFree(void *ptr) {
  if (!ptr)
    return 0; // as free(NULL)
  if (loadDriver())
    return 1;
  return check(driver.cuMemFree(reinterpret_cast<CUdeviceptr>(ptr)),
               "cuMemFree");
}

int faCopyToDevice(void *dst, const void *src, size_t bytes) {
  if (bytes && (!dst || !src))
    return fail("faCopyToDevice: dst and src must not be null");
  if (loadDriver())
    return 1;
  return check(
      driver.cuMemcpyHtoD(reinterpret_cast<CUdeviceptr>(dst), src, bytes),
      "cuMemcpyHtoD");
}

int faCopyToHost(void *dst, const void *src, size_t bytes) {
  if (bytes && (!dst || !src))
    return fail("faCopyToHost: dst and src must not be null");
  if (loadDriver())
    return 1;
  return check(
      driver.cuMemcpyDtoH(dst, reinterpret_cast<CUdeviceptr>(src), bytes),
      "cuMemcpyDtoH");
}

int faDeviceSynchronize(void) {
  if (loadDriver())
    return 1;
  return check(driver.cuCtxSynchronize(), "cuCtxSynchronize");
}

} // extern "C"
