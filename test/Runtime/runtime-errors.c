/* The C runtime's error paths, without a GPU: every failure returns
 * non-zero and faRuntimeLastError() names the call or argument. */
#include "fa-c/Runtime.h"

#include <stdio.h>
#include <string.h>

/* Metadata pieces: the start of a metadata object, and the parameter list
 * up to scale_log2 (without its closing bracket). */
#define META_HEAD                                                              \
  "{\"format\": \"flash-mlir-kernel-1\", \"kernel\": \"x\", "                  \
  "\"arch\": \"sm_90a\", \"causal\": false, \"grid\": {\"x\": 1, \"y\": 1, "   \
  "\"z\": 1}, "                                                                \
  "\"dtype\": \"f16\", \"head_dim\": 64, "
#define LAUNCHER_PARAMS                                                        \
  "\"params\": [{\"name\": \"q\"}, {\"name\": \"k\"}, {\"name\": \"v\"}, "     \
  "{\"name\": \"o\"}, {\"name\": \"lse\"}, {\"name\": \"Nq\"}, "               \
  "{\"name\": \"Nk\"}, {\"name\": \"Hq\"}, {\"name\": \"Hkv\"}, "              \
  "{\"name\": \"scale_log2\"}"

static void report(const char *what, int rc) {
  printf("%s: rc=%d%s%s\n", what, rc, rc ? ": " : "",
         rc ? faRuntimeLastError() : "");
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
  /* Strided tensor maps (sm_90a): the stride rule is checked before the
   * driver is needed. The base is never read. */
  {
    static _Alignas(64) unsigned char map[128];
    const void *base = (const void *)(unsigned long)0x1000;
    report("strided map, row stride not a multiple of 8",
           faEncodeStridedTensorMap(map, base, 2, 4, 100, 64, 4 * 100 * 68,
                                    100 * 68, 68, 128, 0));
    report("strided map, zero head stride",
           faEncodeStridedTensorMap(map, base, 2, 4, 100, 64, 25600, 0, 64,
                                    128, 0));
    report("strided map, negative batch stride",
           faEncodeStridedTensorMap(map, base, 2, 4, 100, 64, -25600, 6400,
                                    64, 128, 0));
    report("strided map, stride past 2^39",
           faEncodeStridedTensorMap(map, base, 2, 4, 100, 64, 1LL << 39,
                                    6400, 64, 128, 0));
    /* A length-1 dimension takes any stride: then the driver is needed. */
    report("strided map, length-1 batch with stride 0, no driver",
           faEncodeStridedTensorMap(map, base, 1, 4, 100, 64, 0, 64, 256, 128,
                                    1));
    report("strided map, unaligned base",
           faEncodeStridedTensorMap(map, (const void *)(unsigned long)0x1008,
                                    1, 1, 1, 64, 64, 64, 64, 128, 0));
    report("strided map, L2 promotion of 100 bytes",
           faEncodeStridedTensorMapL2(map, base, 2, 4, 100, 64, 25600, 6400,
                                      64, 128, 0, 100));
  }
#define TMA_KERNEL(params)                                                     \
  META_HEAD "\"block_r\": 128, \"shared_memory_bytes\": 0, "                \
            "\"block\": [384, 1, 1], \"tile_grid\": true, "                 \
            "\"tma_box_cols\": 64, \"tma_box_rows_kv\": 128, "              \
            "\"params\": [" params "]}"
#define MAP_OF(name, fields)                                                   \
  "{\"name\": \"" name "\", \"kind\": \"tensormap\", " fields "}, "
#define MAP(name, rank) MAP_OF(name, "\"box\": [64, 128], \"rank\": " rank)
#define SCALARS_AFTER_O                                                        \
  "{\"name\": \"lse\"}, {\"name\": \"Nq\"}, "                                 \
  "{\"name\": \"Nk\"}, {\"name\": \"Hq\"}, {\"name\": \"Hkv\"}, "          \
  "{\"name\": \"scale_log2\"}, {\"name\": \"B\"}"
#define SCALARS "{\"name\": \"o\"}, " SCALARS_AFTER_O
  report("strided kernel without o strides",
         faKernelLoad(cubin, 4,
                      TMA_KERNEL(MAP("q", "4") MAP("k", "4") MAP("v", "4")
                                     SCALARS),
                      0, &k));
  report("tensor maps of two ranks",
         faKernelLoad(cubin, 4,
                      TMA_KERNEL(MAP("q", "4") MAP("k", "3") MAP("v", "4")
                                     SCALARS),
                      0, &k));
  report("tensor map of rank 5",
         faKernelLoad(cubin, 4,
                      TMA_KERNEL(MAP("q", "5") MAP("k", "5") MAP("v", "5")
                                     SCALARS),
                      0, &k));
  report("tensor map of an L2 promotion of 32 bytes",
         faKernelLoad(cubin, 4,
                      TMA_KERNEL(MAP("q", "4") MAP("k", "4 , \"l2_promotion\": 32")
                                     MAP("v", "4") SCALARS),
                      0, &k));
  report("rank-3 tensor map with a 64-byte L2 promotion",
         faKernelLoad(cubin, 4,
                      TMA_KERNEL(MAP("q", "3") MAP("k", "3 , \"l2_promotion\": 64")
                                     MAP("v", "3") SCALARS),
                      0, &k));
  /* A box row is the swizzle span: an e4m3 V^T map of 32-key boxes comes
     with the 32-byte swizzle, not the 64-byte one. */
  report("tensor map whose box row is not its swizzle",
         faKernelLoad(cubin, 4,
                      TMA_KERNEL(MAP("q", "4") MAP_OF("k", "\"rank\": 4, "
                                                      "\"dtype\": \"e4m3\", "
                                                      "\"box\": [32, 128], "
                                                      "\"swizzle\": \"64B\"")
                                     MAP("v", "4") SCALARS),
                      0, &k));
  report("tensor map of a 16-byte swizzle",
         faKernelLoad(cubin, 4,
                      TMA_KERNEL(MAP("q", "4") MAP("k", "4 , \"swizzle\": "
                                                   "\"16B\"")
                                     MAP("v", "4") SCALARS),
                      0, &k));
  /* The launcher encodes q, k and v (and o with tma_box_rows_o) as tensor
     maps from their boxes: a map without a box, or q as a pointer, was
     accepted. */
  report("tensor map without a box",
         faKernelLoad(cubin, 4,
                      TMA_KERNEL(MAP_OF("q", "\"rank\": 3") MAP("k", "3")
                                     MAP("v", "3") SCALARS),
                      0, &k));
  report("q as a pointer in a tensor-map kernel",
         faKernelLoad(cubin, 4,
                      TMA_KERNEL("{\"name\": \"q\", \"kind\": \"pointer\"}, "
                                 MAP("k", "3") MAP("v", "3") SCALARS),
                      0, &k));
  report("launch without kernel",
         faKernelLaunch(NULL, 0, 0, 0, 0, 0, 1, 1, 1, 1, 1, 1.0f, NULL));
  report("device alloc, no driver", faDeviceAlloc(16, (void **)&k));

  /* Hardening (issue 16): the metadata reader gives a status and a message
   * for every input; before, std::stol threw on the first three (terminate:
   * SIGABRT in the embedding process, Python included). */
#define BODY(fields)                                                           \
  META_HEAD "\"block_r\": 64, \"shared_memory_bytes\": 0, " fields          \
            LAUNCHER_PARAMS "]}"
#define BLOCK "\"block\": [128, 1, 1], "
  static const struct {
    const char *what, *json;
  } metadata[] = {
      {"valid", BODY(BLOCK)},
      {"huge integer", META_HEAD "\"block_r\": 99999999999999999999999}"},
      {"lone minus", META_HEAD "\"block_r\": -}"},
      {"lone minus in block", META_HEAD "\"block\": [-]}"},
      {"fraction", META_HEAD "\"block_r\": 64.5}"},
      {"exponent", META_HEAD "\"block_r\": 1e3}"},
      {"head dim that narrows to 64 as an int",
       "{\"format\": \"flash-mlir-kernel-1\", \"kernel\": \"x\", "
       "\"dtype\": \"f16\", \"head_dim\": 4294967360}"},
      {"negative shared memory",
       META_HEAD "\"block_r\": 64, \"shared_memory_bytes\": -1}"},
      {"shared memory past int",
       META_HEAD "\"block_r\": 64, \"shared_memory_bytes\": 2147483648}"},
      {"too many threads", BODY("\"block\": [1024, 2, 1], ")},
      {"four block dims", BODY("\"block\": [128, 1, 1, 1], ")},
      {"duplicate key", BODY(BLOCK "\"block_r\": 128, ")},
      {"text after the object", BODY(BLOCK) " trailing"},
      {"unterminated string", META_HEAD "\"kernel"},
      {"unterminated array", META_HEAD "\"block\": [128, 1"},
      {"empty", ""},
      {"compiled scale", BODY(BLOCK "\"scale\": 0.5, ")},
      {"negative scale", BODY(BLOCK "\"scale\": -0.5, ")},
      {"scale as text", BODY(BLOCK "\"scale\": \"0.5\", ")},
      {"scale past 2^64", BODY(BLOCK "\"scale\": 1e30, ")},
      /* Strict JSON, as Python's reader (issue 46): each was accepted. */
      {"missing comma", BODY("\"block\": [128, 1, 1] ")},
      {"trailing comma", BODY("\"block\": [128, 1, 1,], ")},
      {"leading zero", BODY(BLOCK "\"block_c\": 0128, ")},
      {"NaN in an unknown field", BODY(BLOCK "\"rescale_threshold\": NaN, ")},
      {"-Infinity in an unknown field",
       BODY(BLOCK "\"rescale_threshold\": -Infinity, ")},
      {"a bare word in an unknown field", BODY(BLOCK "\"note\": fast, ")},
      {"a raw tab in a string", BODY(BLOCK "\"note\": \"a\tb\", ")},
      {"duplicate key in a nested object",
       BODY(BLOCK "\"note\": {\"a\": 1, \"a\": 2}, ")},
      {"nested past 32 levels",
       BODY(BLOCK "\"note\": [[[[[[[[[[[[[[[[[[[[[[[[[[[[[[[[[["
                  "]]]]]]]]]]]]]]]]]]]]]]]]]]]]]]]]], ")},
      {"a number past a double", BODY(BLOCK "\"note\": 1e999, ")},
      /* What the Python launcher reads: given, of its type. */
      {"no arch",
       "{\"format\": \"flash-mlir-kernel-1\", \"kernel\": \"x\", "
       "\"causal\": false, \"grid\": {\"x\": 1, \"y\": 1, \"z\": 1}, "
       "\"dtype\": \"f16\", "
       "\"head_dim\": 64, \"block_r\": 64, "
       "\"shared_memory_bytes\": 0, " BLOCK LAUNCHER_PARAMS "]}"},
      {"grid as text", "{\"format\": \"flash-mlir-kernel-1\", \"kernel\": "
                       "\"x\", \"arch\": \"sm_80\", \"causal\": false, "
                       "\"grid\": \"x\"}"},
      {"duplicate key in a parameter",
       META_HEAD "\"block_r\": 64, \"shared_memory_bytes\": 0, " BLOCK
                 "\"params\": [{\"name\": \"q\", \"name\": \"k\"}]}"},
  };
  for (size_t i = 0; i < sizeof(metadata) / sizeof(metadata[0]); ++i)
    report(metadata[i].what, faKernelMetadataCheck(metadata[i].json));
  report("null metadata", faKernelMetadataCheck(NULL));

  /* Split-KV metadata: its four parameters after B, one tile per CTA. */
#define SPLIT_HEAD                                                             \
  META_HEAD "\"block_r\": 128, \"shared_memory_bytes\": 0, "                  \
            "\"block\": [384, 1, 1], \"tile_grid\": true, \"split_kv\": true, "
#define SPLIT_PARAMS                                                           \
  LAUNCHER_PARAMS ", {\"name\": \"B\"}, {\"name\": \"kv_splits\"}, "          \
                  "{\"name\": \"o_partial\"}, {\"name\": \"lse_partial\"}, "  \
                  "{\"name\": \"split_arrivals\"}]}"
  report("split-KV", faKernelMetadataCheck(SPLIT_HEAD "\"kv_splits\": 4, "
                                                      SPLIT_PARAMS));
  report("split-KV without its parameters",
         faKernelMetadataCheck(SPLIT_HEAD LAUNCHER_PARAMS
                               ", {\"name\": \"B\"}]}"));
  report("split-KV, dynamic scheduler",
         faKernelMetadataCheck(SPLIT_HEAD "\"persistent\": true, "
                                          "\"tile_scheduler\": \"dynamic\", "
                                          SPLIT_PARAMS));
  report("split-KV chunk count past 1024",
         faKernelMetadataCheck(SPLIT_HEAD "\"kv_splits\": 1025, "
                                          SPLIT_PARAMS));
  report("launch with kv_splits past 1024",
         faKernelLaunchSplit(NULL, 0, 0, 0, 0, 0, 1, 1, 1, 1, 1, 1.0f, 2000,
                             NULL));
  /* A KV cache's kernel: kv_lengths, then a paged cache's block table and
   * max_pages and num_pages after o's strides; pages need rank-4 maps. */
#define CACHE_HEAD                                                             \
  META_HEAD "\"block_r\": 128, \"shared_memory_bytes\": 0, "                  \
            "\"block\": [384, 1, 1], \"tile_grid\": true, "                   \
            "\"tma_box_cols\": 64, \"tma_box_rows_kv\": 64, "
#define CACHE_PARAMS(rank, extra)                                              \
  "\"params\": [" MAP("q", rank) MAP("k", rank) MAP("v", rank) SCALARS     \
  ", {\"name\": \"o_stride_b\"}, {\"name\": \"o_stride_h\"}, "              \
  "{\"name\": \"o_stride_n\"}" extra "]}"
  report("paged cache",
         faKernelMetadataCheck(CACHE_HEAD
                               "\"kv_lengths\": true, \"page_size\": 64, "
                               CACHE_PARAMS("4", ", {\"name\": \"kv_lengths\"}, "
                                                 "{\"name\": \"block_table\"}, "
                                                 "{\"name\": \"max_pages\"}, "
                                                 "{\"name\": \"num_pages\"}")));
  report("paged cache without its table",
         faKernelMetadataCheck(CACHE_HEAD
                               "\"kv_lengths\": true, \"page_size\": 64, "
                               CACHE_PARAMS("4", ", {\"name\": \"kv_lengths\"}")));
  report("page size past 2^20",
         faKernelMetadataCheck(CACHE_HEAD "\"page_size\": 2000000, "
                               CACHE_PARAMS("4", "")));
  report("kv_lengths as a number",
         faKernelMetadataCheck(CACHE_HEAD "\"kv_lengths\": 1, "
                               CACHE_PARAMS("4", "")));
  /* A varlen kernel whose O map stores whole blocks: o_rows (O's data) and
   * o's strides for the rows its threads copy. */
#define VARLEN_PARAMS(rows)                                                    \
  "\"params\": [" MAP("q", "4") MAP("k", "4") MAP("v", "4") MAP("o", "4")  \
  SCALARS_AFTER_O rows                                                         \
  ", {\"name\": \"o_stride_b\"}, {\"name\": \"o_stride_h\"}, "              \
  "{\"name\": \"o_stride_n\"}, {\"name\": \"cu_seqlens_q\"}, "              \
  "{\"name\": \"cu_seqlens_k\"}, {\"name\": \"total_q\"}, "              \
  "{\"name\": \"total_k\"}]}"
  report("varlen, whole blocks by TMA",
         faKernelMetadataCheck(CACHE_HEAD
                               "\"varlen\": true, \"tma_box_rows_o\": 64, "
                               VARLEN_PARAMS(", {\"name\": \"o_rows\"}")));
  report("varlen, whole blocks by TMA without o_rows",
         faKernelMetadataCheck(CACHE_HEAD
                               "\"varlen\": true, \"tma_box_rows_o\": 64, "
                               VARLEN_PARAMS("")));
  report("varlen launch without kernel",
         faKernelLaunchVarlen(NULL, 0, 0, 0, 0, 0, 0, 0, 0, 0, 1, 1, 1, 1, 1,
                              1, 0, 0, 1.0f, NULL));
  report("KV-cache launch without kernel",
         faKernelLaunchKVCache(NULL, 0, 0, 0, 0, 0, 0, 0, 0, 0, 1, 1, 1, 1, 1,
                               64, 0, 0, 1, 1.0f, -1, NULL));
  report("KV append without kernel",
         faKernelAppendKV(NULL, 0, 0, 0, 0, 0, 0, 0, 0, 1, 1, 1, 1, 64, 0, 0,
                          0, 1, NULL, NULL, FA_DESCALE_PER_TENSOR, NULL));
  {
    /* An e4m3 KV cache's launch: the descale layout (per tensor or per
     * (sequence, K/V head), not per block), then the descales, then the
     * kernel. */
    static float descale[4];
    report("e4m3 cache launch, per-block descales",
           faKernelLaunchKVCacheE4M3(NULL, 0, 0, 0, 0, 0, 0, 0, 0, 0, 1, 1, 1,
                                     1, 1, 64, 0, 0, 1, 1.0f, -1, descale,
                                     descale, FA_DESCALE_PER_BLOCK, NULL));
    report("e4m3 cache launch without descales",
           faKernelLaunchKVCacheE4M3(NULL, 0, 0, 0, 0, 0, 0, 0, 0, 0, 1, 1, 1,
                                     1, 1, 64, 0, 0, 1, 1.0f, -1, descale,
                                     NULL, FA_DESCALE_PER_TENSOR, NULL));
    report("e4m3 cache launch without kernel",
           faKernelLaunchKVCacheE4M3(NULL, 0, 0, 0, 0, 0, 0, 0, 0, 0, 1, 1, 1,
                                     1, 1, 64, 0, 0, 1, 1.0f, -1, descale,
                                     descale, FA_DESCALE_PER_HEAD, NULL));
  }
  report("e4m3 launch, descale layout 3",
         faKernelLaunchE4M3(NULL, 0, 0, 0, 0, 0, 0, 0, 0, 0, 1, 1, 1, 1, 1,
                            1.0f, 0, 0, 0, 3, NULL));
  report("e4m3 launch, descale layout -1",
         faKernelLaunchE4M3(NULL, 0, 0, 0, 0, 0, 0, 0, 0, 0, 1, 1, 1, 1, 1,
                            1.0f, 0, 0, 0, -1, NULL));
  report("e4m3 launch per block without kernel",
         faKernelLaunchE4M3(NULL, 0, 0, 0, 0, 0, 0, 0, 0, 0, 1, 1, 1, 1, 1,
                            1.0f, 0, 0, 0, FA_DESCALE_PER_BLOCK, NULL));
  report("tiles of no kernel", faKernelTiles(NULL, NULL, NULL));
  report("e4m3 launch without kernel",
         faKernelLaunchE4M3(NULL, 0, 0, 0, 0, 0, 0, 0, 0, 0, 1, 1, 1, 1, 1,
                            1.0f, 0, 0, 0, 1, NULL));
  /* The auto rule (fa::autoKVSplits) on the decode rows, 132 SMs
   * and the H200's 4,800 GB/s: B 1 H 32 (32 tiles of 256 blocks), B 1 H 8
   * (8 of 1024), B 4 H 32 (128 decode tiles: a wave, two chunks), the same
   * tiles of prefill (two query blocks each: no split), one tile of 3 blocks
   * (no chunk of 2); then the 128 decode tiles on the H100's 3,352 GB/s
   * (25 per SM: one chunk) and on a GPU of unknown bandwidth (one). */
  printf("auto splits: %d %d %d %d %d %d %d\n",
         faAutoKVSplits(32, 1, 256, 132, 4800),
         faAutoKVSplits(8, 1, 1024, 132, 4800),
         faAutoKVSplits(128, 1, 64, 132, 4800),
         faAutoKVSplits(128, 2, 64, 132, 4800),
         faAutoKVSplits(1, 1, 3, 132, 4800),
         faAutoKVSplits(128, 1, 64, 132, 3352),
         faAutoKVSplits(128, 1, 64, 132, 0));

  /* Images the driver would read past: checked before the driver loads. */
  static const unsigned char shortElf[16] = {0x7f, 'E', 'L', 'F', 2, 1};
  unsigned char badTables[64] = {0x7f, 'E', 'L', 'F', 2, 1};
  badTables[40] = 0xff; /* e_shoff far past the image */
  badTables[58] = 64;   /* e_shentsize */
  badTables[60] = 1;    /* e_shnum */
  const char ptx[4] = {'.', 'v', 'e', 'r'}; /* no NUL within 4 bytes */
  report("truncated cubin", faKernelLoad(shortElf, sizeof(shortElf),
                                         BODY(BLOCK), 0, &k));
  report("cubin header tables past the end",
         faKernelLoad(badTables, sizeof(badTables), BODY(BLOCK), 0, &k));
  report("ptx without its NUL", faKernelLoad(ptx, 4, BODY(BLOCK), 0, &k));
  report("ptx with its NUL, no driver",
         faKernelLoad(".version 8.0\n", 14, BODY(BLOCK), 0, &k));

  /* Every pointer is checked before the driver is needed. */
  report("copy to device from null", faCopyToDevice(&k, NULL, 16));
  report("copy to host into null", faCopyToHost(NULL, &k, 16));
  report("free null", faDeviceFree(NULL));
  report("load files, null prefix", faKernelLoadFiles(NULL, 0, &k));
  report("load, null metadata", faKernelLoad(cubin, 4, NULL, 0, &k));

  /* The launch grid the metadata's formulas give, without a driver: the
   * persistent sm_90a kernel's (at most SMs x ctas_per_sm CTAs) and the
   * sm_80 kernel's (query blocks, heads, batch), then the refusals. */
  if (argc > 2) {
    for (int i = 1; i <= 2; ++i) {
      char path[4096], json[65536];
      snprintf(path, sizeof(path), "%s.json", argv[i]);
      FILE *f = fopen(path, "rb");
      size_t n = f ? fread(json, 1, sizeof(json) - 1, f) : 0;
      if (f)
        fclose(f);
      json[n] = 0;
      const char *names[] = {"B", "Hq", "Nq", "SMs"};
      long long small[] = {2, 8, 1000, 132}, large[] = {4, 32, 4096, 132};
      unsigned grid[3] = {0, 0, 0};
      int rc =
          faMetadataLaunchGrid(json, FA_GRID_KERNEL, names, small, 4, grid);
      printf("grid %d small: rc=%d %u %u %u\n", i, rc, grid[0], grid[1],
             grid[2]);
      rc = faMetadataLaunchGrid(json, FA_GRID_KERNEL, names, large, 4, grid);
      printf("grid %d large: rc=%d %u %u %u\n", i, rc, grid[0], grid[1],
             grid[2]);
      report("grid without Nq",
             faMetadataLaunchGrid(json, FA_GRID_KERNEL, names, small, 2, grid));
      long long heads[] = {1, 70000, 128, 132};
      report("grid of 70000 heads",
             faMetadataLaunchGrid(json, FA_GRID_KERNEL, names, heads, 4, grid));
      report(
          "grid of no append kernel",
          faMetadataLaunchGrid(json, FA_GRID_KV_APPEND, names, small, 4, grid));
    }
    report("grid, which 7",
           faMetadataLaunchGrid("{}", 7, NULL, NULL, 0, (unsigned[3]){0}));
    report("grid, null metadata",
           faMetadataLaunchGrid(NULL, FA_GRID_KERNEL, NULL, NULL, 0,
                                (unsigned[3]){0}));
    report("grid, null name",
           faMetadataLaunchGrid("{}", FA_GRID_KERNEL, (const char *[]){NULL},
                                (long long[]){1}, 1, (unsigned[3]){0}));
  }
  return 0;
}
