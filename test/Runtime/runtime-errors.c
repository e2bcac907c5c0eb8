/* The C runtime's error paths, without a GPU: every failure returns
 * non-zero and faRuntimeLastError() names the call or argument. */
#include "fa-c/Runtime.h"

#include <stdio.h>
#include <string.h>

static void report(const char *what, int rc) {
  printf("%s: rc=%d: %s\n", what, rc, faRuntimeLastError());
}

int main(int argc, char **argv) {
  FaKernel *k = NULL;
  const char cubin[] = "\x7f" "ELF";
  report("null kernel out", faKernelLoad(cubin, 4, "{}", 0, NULL));
  report("empty cubin", faKernelLoad(cubin, 0, "{}", 0, &k));
  report("not json", faKernelLoad(cubin, 4, "[1, 2]", 0, &k));
  report("wrong format",
         faKernelLoad(cubin, 4, "{\"format\": \"other\"}", 0, &k));
  report("no kernel name",
         faKernelLoad(cubin, 4, "{\"format\": \"flash-mlir-kernel-1\"}", 0,
                      &k));
  report("missing files", faKernelLoadFiles("/nonexistent/kernel", 0, &k));
  /* A real fa-compile output: metadata parses, then the driver is needed. */
  if (argc > 1)
    report("real kernel, no driver", faKernelLoadFiles(argv[1], 0, &k));
  report("launch without kernel",
         faKernelLaunch(NULL, 0, 0, 0, 0, 0, 1, 1, 1, 1, 1, 1.0f, NULL));
  report("device alloc, no driver", faDeviceAlloc(16, (void **)&k));
  return 0;
}
