//===- fa-fuzz-metadata.cpp - libFuzzer harness for the runtime's reader --===//
//
// The C runtime reads fa-compile's JSON launch metadata and the kernel image
// in the embedding process (a Python interpreter, a serving binary): any
// crash, exception or out-of-bounds read there takes that process down. The
// input is tried both as metadata (faKernelMetadataCheck, and
// faBackwardMetadataCheck for a backward kernel's) and as a kernel
// image behind valid metadata (faKernelLoad, which checks the image before
// it would need a driver; FLASHMLIR_LIBCUDA points nowhere, so no driver is
// ever loaded). Findings: crashes, sanitizer reports, uncaught exceptions
// (terminate), hangs. Seeds: scripts/fuzz.sh writes fa-compile's metadata
// and the runtime-errors cases.
//
//===----------------------------------------------------------------------===//

#include "fa-c/Runtime.h"

#include <cstdint>
#include <cstdlib>
#include <string>
#include <vector>

static const char kValidMetadata[] =
    "{\"format\": \"flash-mlir-kernel-1\", \"kernel\": \"x\", \"dtype\": "
    "\"f16\", \"head_dim\": 64, \"block_r\": 64, \"shared_memory_bytes\": 0, "
    "\"block\": [128, 1, 1], \"params\": [{\"name\": \"q\"}, {\"name\": "
    "\"k\"}, {\"name\": \"v\"}, {\"name\": \"o\"}, {\"name\": \"lse\"}, "
    "{\"name\": \"Nq\"}, {\"name\": \"Nk\"}, {\"name\": \"Hq\"}, {\"name\": "
    "\"Hkv\"}, {\"name\": \"scale_log2\"}]}";

extern "C" int LLVMFuzzerInitialize(int *, char ***) {
  // Never reach a real driver with a fuzzed image.
  setenv("FLASHMLIR_LIBCUDA", "/nonexistent/fa-fuzz/libcuda.so.1", 1);
  return 0;
}

extern "C" int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size) {
  // As metadata: a C string (up to the first NUL, as the API reads it).
  std::string text(reinterpret_cast<const char *>(data), size);
  (void)faKernelMetadataCheck(text.c_str());
  // And as a backward kernel's metadata (its own validation).
  (void)faBackwardMetadataCheck(text.c_str());
  // As an image, in a buffer of exactly `size` bytes so that AddressSanitizer
  // sees any read past it.
  if (size > 0) {
    std::vector<uint8_t> image(data, data + size);
    FaKernel *kernel = nullptr;
    if (faKernelLoad(image.data(), image.size(), kValidMetadata, 0, &kernel) ==
        0)
      faKernelDestroy(kernel);
  }
  return 0;
}
