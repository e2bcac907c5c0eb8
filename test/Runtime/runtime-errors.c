/* The C runtime's error paths, without a GPU: every failure returns
 * non-zero and faRuntimeLastError() names the call or argument. */
#include "fa-c/Runtime.h"

#include <stdio.h>
#include <string.h>

/* Metadata pieces: the start of a metadata object, and the parameter list
 * up to scale_log2 (without its closing bracket). */
#define META_HEAD                                                              \
  "{\"format\": \"flash-mlir-kernel-1\", \"kernel\": \"x\", "                  \
  "\"dtype\": \"f16\", \"head_dim\": 64, "
#define LAUNCHER_PARAMS                                                        \
  "\"params\": [{\"name\": \"q\"}, {\"name\": \"k\"}, {\"name\": \"v\"}, "     \
  "{\"name\": \"o\"}, {\"name\": \"lse\"}, {\"name\": \"Nq\"}, "               \
  "{\"name\": \"Nk\"}, {\"name\": \"Hq\"}, {\"name\": \"Hkv\"}, "              \
  "{\"name\": \"scale_log2\"}"

static void report(const char *what, int rc) {
  printf("%s: rc=%d: %s\n", what, rc, faRuntimeLastError());
}

int main(int argc, char **argv) {
  FaKernel *k = NULL;
  const char cubin[] = "\x7f"
                       "ELF";
  report("null kernel out", faKernelLoad(cubin, 4, "{}", 0, NULL));
  report("empty cubin", faKernelLoad(cubin, 0, "{}", 0, &k));
  report("not json", faKernelLoad(cubin, 4, "[1, 2]", 0, &k));
  report("wrong format",
         faKernelLoad(cubin, 4, "{\"format\": \"other\"}", 0, &k));
  report(
      "no kernel name",
      faKernelLoad(cubin, 4, "{\"format\": \"flash-mlir-kernel-1\"}", 0, &k));
  report("missing files", faKernelLoadFiles("/nonexistent/kernel", 0, &k));
  /* A real fa-compile output: metadata parses, then the driver is needed. */
  if (argc > 1)
    report("real kernel, no driver", faKernelLoadFiles(argv[1], 0, &k));
  /* The sm_90a kernel's metadata (tensor maps, tile grid, B) validates too. */
  if (argc > 2)
    report("sm_90a kernel, no driver", faKernelLoadFiles(argv[2], 0, &k));
  /* A causal sm_90a kernel: the dynamic tile scheduler's counter param. */
  if (argc > 3)
    report("dynamic scheduler kernel, no driver",
           faKernelLoadFiles(argv[3], 0, &k));
  report("dynamic scheduler without counter",
         faKernelLoad(cubin, 4,
                      META_HEAD "\"block_r\": 128, \"shared_memory_bytes\": 0, "
                                "\"block\": [384, 1, 1], \"tile_grid\": true, "
                                "\"persistent\": true, \"tile_scheduler\": "
                                "\"dynamic\", " LAUNCHER_PARAMS
                                ", {\"name\": \"B\"}]}",
                      0, &k));
  report("dynamic scheduler, not persistent",
         faKernelLoad(cubin, 4,
                      META_HEAD "\"block_r\": 128, \"shared_memory_bytes\": 0, "
                                "\"block\": [384, 1, 1], \"tile_grid\": true, "
                                "\"tile_scheduler\": \"dynamic\"}",
                      0, &k));
  report("unknown tile scheduler",
         faKernelLoad(cubin, 4,
                      META_HEAD
                      "\"block_r\": 128, \"shared_memory_bytes\": 0, "
                      "\"block\": [384, 1, 1], \"tile_scheduler\": \"lifo\"}",
                      0, &k));
  report("o tensor map without q, k, v maps",
         faKernelLoad(
             cubin, 4,
             META_HEAD
             "\"block_r\": 128, \"shared_memory_bytes\": 0, "
             "\"block\": [128, 1, 1], \"tma_box_rows_o\": 64, " LAUNCHER_PARAMS
             "]}",
             0, &k));
  report("bad tensor-map box",
         faKernelLoad(
             cubin, 4,
             META_HEAD
             "\"block_r\": 128, \"shared_memory_bytes\": 0, "
             "\"block\": [384, 1, 1], \"tile_grid\": true, "
             "\"tma_box_cols\": 32, \"tma_box_rows_kv\": 128, " LAUNCHER_PARAMS
             ", {\"name\": \"B\"}]}",
             0, &k));
  report("tile grid without B",
         faKernelLoad(cubin, 4,
                      META_HEAD "\"block_r\": 128, \"shared_memory_bytes\": 0, "
                                "\"block\": [384, 1, 1], \"tile_grid\": true, "
                                "\"params\": [{\"name\": \"q\"}]}",
                      0, &k));
  report("bad ctas_per_sm",
         faKernelLoad(cubin, 4,
                      META_HEAD "\"block_r\": 64, \"shared_memory_bytes\": 0, "
                                "\"block\": [256, 1, 1], \"ctas_per_sm\": 0}",
                      0, &k));
  report("encode tensor map, no driver",
         faEncodeTensorMap(NULL, NULL, 1, 1, 64, 16, 128, 0));
  report("launch without kernel",
         faKernelLaunch(NULL, 0, 0, 0, 0, 0, 1, 1, 1, 1, 1, 1.0f, NULL));
  report("device alloc, no driver", faDeviceAlloc(16, (void **)&k));
  return 0;
}
