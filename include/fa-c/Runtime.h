/*===- fa-c/Runtime.h - launch flash-mlir kernels (C API) --------*- C -*-===*\
|*                                                                            *|
|* A small runtime over the CUDA driver API for kernels compiled by           *|
|* fa-compile (.cubin + .json). It needs no MLIR: libFARuntime.so depends on  *|
|* libc and libdl only and loads libcuda.so.1 when the first kernel loads.    *|
|* Every function returns 0 on success; on failure, faRuntimeLastError()      *|
|* gives a message that names the failing call or argument.                   *|
|*                                                                            *|
\*===----------------------------------------------------------------------===*/

#ifndef FA_C_RUNTIME_H
#define FA_C_RUNTIME_H

#include <stddef.h>

#ifdef __cplusplus
extern "C" {
#endif

typedef struct FaKernel FaKernel;

/** The message of the last failure on this thread ("" if none). */
const char *faRuntimeLastError(void);

/** Loads a kernel from a cubin image and its JSON launch metadata on CUDA
 *  device `device` (its primary context). The image is a cubin (ELF, its
 *  header tables within `cubinSize`) or PTX text with its NUL byte within
 *  `cubinSize`. */
int faKernelLoad(const void *cubin, size_t cubinSize, const char *metadataJson,
                 int device, FaKernel **kernel);

/** Parses and validates launch metadata exactly as faKernelLoad does,
 *  without a driver or an image: 0 when faKernelLoad would accept it, else
 *  1 with the reason in faRuntimeLastError(). Each integer field has a
 *  range (head_dim [1, 65536], block_r [1, 1048576], shared_memory_bytes
 *  [0, 2^31 - 1], block: three values of at most 1024 threads in all,
 *  ctas_per_sm [1, 32], tensor-map boxes [0, 256]). The text must be
 *  strict JSON (RFC 8259: no NaN, leading zeros, bare words or trailing
 *  commas; a duplicate key in any object and text after the object are
 *  refused), as Python's reader takes it; "arch", "causal" and "grid" must
 *  be given, and the tensor maps (kind "tensormap", each with its "box")
 *  must be the ones the boxes describe. */
int faKernelMetadataCheck(const char *metadataJson);

/** The global-memory traffic the kernel described by `metadataJson` moves
 *  for an attention of this shape, as the compiler's fagpu-io-report counts
 *  it (L2 -> SM reads: Q once per query tile, K and V of every block each
 *  tile visits under its masks, whole TMA boxes, the dynamic scheduler's
 *  atomics; SM -> L2 writes: O and LSE payload). Needs no driver. Checked
 *  against ncu on the H200 (bench/results/2026-12-01-io-check.md). */
int faMetadataPredictedBytes(const char *metadataJson, long batch,
                             long queryHeads, long kvHeads, long queryLen,
                             long keyLen, unsigned long long *readBytes,
                             unsigned long long *writeBytes);

/** faMetadataPredictedBytes for a batch whose sequences have lengths of
 *  their own: a KV cache's kernel (queryLens all Nq, keyLens the
 *  kv_lengths, or a paged sequence's capacity without them) or a varlen
 *  kernel's (the differences of cu_seqlens_q and cu_seqlens_k). Each
 *  sequence counts as a batch of one: whole boxes of its tiles (a varlen
 *  sequence's Q box reaches into the next sequence's rows), the blocks its
 *  masks leave; the dynamic scheduler's atomics once. */
int faMetadataPredictedSequenceBytes(const char *metadataJson,
                                     long queryHeads, long kvHeads,
                                     long sequences, const long *queryLens,
                                     const long *keyLens,
                                     unsigned long long *readBytes,
                                     unsigned long long *writeBytes);

/** Which grid of a kernel's metadata faMetadataLaunchGrid evaluates: the
 *  attention's ("grid"), its e4m3 V layout kernel's or its KV-cache append
 *  kernel's. */
enum { FA_GRID_KERNEL = 0, FA_GRID_VALUE_LAYOUT = 1, FA_GRID_KV_APPEND = 2 };

/** The launch grid of the kernel `metadataJson` describes (`which`, an
 *  FA_GRID_*), as the launchers compute it: the metadata's formulas
 *  (e.g. "min(ceil(Nq / block_r) * Hq * B, SMs * ctas_per_sm)") evaluated
 *  with the `count` launch sizes `names`[i] = `values`[i] (B, Hq, Hkv, Nq,
 *  Nk, D, SMs, kv_splits, Nnew, Nk_128: those the formulas read) and the
 *  kernel's own fields. For a runtime that launches the cubin itself.
 *  Needs no driver; 1 with the reason where a formula reads a size not
 *  given or a dimension falls outside CUDA's range. */
int faMetadataLaunchGrid(const char *metadataJson, int which,
                         const char *const *names, const long long *values,
                         int count, unsigned grid[3]);

/** Loads `prefix.cubin` and `prefix.json`. */
int faKernelLoadFiles(const char *prefix, int device, FaKernel **kernel);

/** The kernel's name, head dim (Q's and K's), value head dim (V's and
 *  O's: the head dim, or fewer columns on sm_90a), inputs' element type
 *  ("f16", "bf16" or "e4m3") and O's ("f16" or "bf16"). */
const char *faKernelName(const FaKernel *kernel);
int faKernelHeadDim(const FaKernel *kernel);
int faKernelValueHeadDim(const FaKernel *kernel);
int faKernelIsCausal(const FaKernel *kernel);
const char *faKernelDType(const FaKernel *kernel);
/** The kernel's masks besides causal: whether the causal/window diagonal is
 *  bottom-right aligned (query i at key position i + Nk - Nq), the window
 *  (|i - j| < window; 0: none) and the softcap (scores c tanh(s / c); 0:
 *  none); any pointer may be NULL. Returns 0, or 1 for a NULL kernel. */
int faKernelMasks(const FaKernel *kernel, int *bottomRight,
                  long long *window, float *softcap);
/** How many keys the causal/window diagonal is moved right (query i at key
 *  position i + offset, plus Nk - Nq when bottom-right); 0 for none or for
 *  NULL. */
long long faKernelDiagonalOffset(const FaKernel *kernel);
const char *faKernelOutDType(const FaKernel *kernel);
/* The softmax scale the kernel was compiled for (the attention's `scale`,
 * else 1/sqrt(D)): what faKernelLaunch should get unless the caller means
 * another; 0 for NULL. */
float faKernelScale(const FaKernel *kernel);

/** Launches O, LSE = attention(Q, K, V) on contiguous device buffers
 *  Q [B, Hq, Nq, D], K, V [B, Hkv, Nk, D], O like Q, LSE [B, Hq, Nq] f32,
 *  on `stream` (a CUstream, NULL for the default stream). */
int faKernelLaunch(FaKernel *kernel, const void *q, const void *k,
                   const void *v, void *o, float *lse, int batch, int qHeads,
                   int kvHeads, int qLen, int kvLen, float scale,
                   void *stream);

/** The same for a split-KV kernel (fa-compile --split-kv), with the K/V
 *  chunk count: -1 the metadata's default, 0 the auto rule
 *  (faAutoKVSplits on this launch's shapes and the device's SMs), or 1 to
 *  1024. The runtime keeps the partial results' scratch per stream. For
 *  other kernels only -1, 0 and 1 are accepted. */
int faKernelLaunchSplit(FaKernel *kernel, const void *q, const void *k,
                        const void *v, void *o, float *lse, int batch,
                        int qHeads, int kvHeads, int qLen, int kvLen,
                        float scale, int kvSplits, void *stream);

/** Element strides of a [B, H, N, D] tensor; D's stride is 1. */
typedef struct FaStrides {
  long long batch, head, row;
} FaStrides;

/** faKernelLaunchSplit on strided tensors: q, k, v, o are [B, H, N, D]
 *  views with the given element strides (NULL: contiguous), e.g. a
 *  [B, N, H, D] tensor as {N*H*D, D, H*D}. Every stride of a dimension
 *  longer than 1 must be a positive multiple of 8 elements (16 bytes, the
 *  TMA's rule) below 2^39 elements; a dimension of length 1 takes any
 *  stride. Kernels whose tensor maps have rank 4 (sm_90a) read and write
 *  any such strides without a copy; the others take contiguous tensors
 *  only and refuse other strides. The LSE stays contiguous [B, Hq, Nq]. */
int faKernelLaunchStrided(FaKernel *kernel, const void *q,
                          const FaStrides *qStrides, const void *k,
                          const FaStrides *kStrides, const void *v,
                          const FaStrides *vStrides, void *o,
                          const FaStrides *oStrides, float *lse, int batch,
                          int qHeads, int kvHeads, int qLen, int kvLen,
                          float scale, int kvSplits, void *stream);

/** The query rows (blockR) and keys (blockC) of the kernel's tiles; either
 *  pointer may be NULL. Returns 0, or 1 for a NULL kernel. */
int faKernelTiles(const FaKernel *kernel, int *blockR, int *blockC);

/** How faKernelLaunchE4M3's three descale arrays (f32 on the device,
 *  contiguous) are laid out. */
enum {
  /** One each, for the whole tensor. */
  FA_DESCALE_PER_TENSOR = 0,
  /** [B, Hkv] each (FlashAttention-3's shape): a (batch, K/V head)'s, which
   *  its query heads take too. */
  FA_DESCALE_PER_HEAD = 1,
  /** Block quantisation: q's [B, Hq, ceil(Nq / blockR)], one per query
   *  tile; k's [B, Hkv, ceil(Nk / blockC)], one per K/V tile (the tiles of
   *  faKernelTiles); v's one for the tensor. */
  FA_DESCALE_PER_BLOCK = 2,
};

/** faKernelLaunchStrided for an e4m3 kernel (fa-compile --dtype e4m3;
 *  metadata "dtype": "e4m3"): q [B, Hq, Nq, D], k and v [B, Hkv, Nk, D] of
 *  one-byte e4m3 codes with element strides (NULL: contiguous; multiples of
 *  16 elements), o [B, Hq, Nq, D] in the kernel's "out_dtype" (f16 or bf16,
 *  strides in multiples of 8), LSE as in faKernelLaunch. qDescale,
 *  kDescale, vDescale: FlashAttention-3's descales (the factor the codes
 *  are multiplied by; 1.0 for unscaled codes), f32 on the device, laid out
 *  as descaleLayout (an FA_DESCALE_* value) says. On `stream` the runtime
 *  first runs the kernel's V layout kernel (metadata "value_layout") into a
 *  V^T workspace it keeps per stream, then the attention. Other launchers
 *  refuse e4m3 kernels, and this one the others. */
int faKernelLaunchE4M3(FaKernel *kernel, const void *q,
                       const FaStrides *qStrides, const void *k,
                       const FaStrides *kStrides, const void *v,
                       const FaStrides *vStrides, void *o,
                       const FaStrides *oStrides, float *lse, int batch,
                       int qHeads, int kvHeads, int qLen, int kvLen,
                       float scale, const float *qDescale,
                       const float *kDescale, const float *vDescale,
                       int descaleLayout, void *stream);

/** faKernelLaunchStrided for a kernel that reads a KV cache (fa-compile
 *  --kv-lengths, --page-size; metadata "kv_lengths", "page_size"): k and v
 *  are the cache [cacheEntries, Hkv, cacheRows, D] with the given strides
 *  (NULL: contiguous) -- contiguous per sequence (cacheEntries = B,
 *  cacheRows = its capacity) or paged (cacheEntries = the pages, cacheRows =
 *  the kernel's page size; flash-attn's [pages, page_size, Hkv, D] is
 *  strides {page_size*Hkv*D, D, Hkv*D}). kvLengths: [B] int32 on the device,
 *  each in [0, capacity], for kernels that take lengths, else NULL;
 *  blockTable: [B, maxPages] int32 on the device, the entries a sequence
 *  reads in [0, cacheEntries), for paged kernels, else NULL. The kernel
 *  checks both on the device (the launch reads nothing back): a length or
 *  page outside them stops it with a trap (the launch, and the context,
 *  fail with CUDA_ERROR_LAUNCH_FAILED; no message: a kernel that calls
 *  __assertfail has its wgmmas serialised by ptxas, docs/serving.md). A sequence without lengths has maxPages * page_size keys
 *  (paged) or cacheRows. Bottom-right masks align with each sequence's
 *  length. kvSplits as in faKernelLaunchSplit. */
int faKernelLaunchKVCache(FaKernel *kernel, const void *q,
                          const FaStrides *qStrides, const void *kCache,
                          const FaStrides *kStrides, const void *vCache,
                          const FaStrides *vStrides, void *o,
                          const FaStrides *oStrides, float *lse, int batch,
                          int qHeads, int kvHeads, int qLen,
                          long long cacheEntries, int cacheRows,
                          const int *kvLengths, const int *blockTable,
                          int maxPages, float scale, int kvSplits,
                          void *stream);

/** faKernelLaunchKVCache for a kernel that reads an e4m3 KV cache beside a
 *  16-bit Q (fa-compile --kv-dtype e4m3; metadata "kv_dtype": "e4m3"): k
 *  and v are the cache's one-byte e4m3 codes (strides in elements, i.e.
 *  bytes, multiples of 16), q and o in the kernel's "dtype" as there.
 *  kDescale, vDescale: f32 on the device, the factors the codes are
 *  multiplied by (vLLM's k_scale / v_scale): one element each
 *  (FA_DESCALE_PER_TENSOR) or [B, Hkv] each, (sequence b, K/V head h)'s at
 *  b * Hkv + h (FA_DESCALE_PER_HEAD). The other launchers refuse such
 *  kernels, and this one the others. */
int faKernelLaunchKVCacheE4M3(
    FaKernel *kernel, const void *q, const FaStrides *qStrides,
    const void *kCache, const FaStrides *kStrides, const void *vCache,
    const FaStrides *vStrides, void *o, const FaStrides *oStrides, float *lse,
    int batch, int qHeads, int kvHeads, int qLen, long long cacheEntries,
    int cacheRows, const int *kvLengths, const int *blockTable, int maxPages,
    float scale, int kvSplits, const float *kDescale, const float *vDescale,
    int descaleLayout, void *stream);

/** Writes new keys and values into a KV cache with the kernel's append
 *  kernel (metadata "kv_append": fa-compile --kv-lengths builds it into the
 *  cubin), as flash_attn_with_kvcache does with its k and v: kNew and vNew
 *  [B, newRows, Hkv, D] in the kernel's dtype (f16/bf16; strides in
 *  elements, multiples of 8, 16-byte aligned pointers, unit stride on D)
 *  go to rows kvLengths[b] .. kvLengths[b] + newRows - 1 of each sequence
 *  of the cache (kCache/vCache and their strides as faKernelLaunchKVCache
 *  takes them: cacheEntries sequences of cacheRows rows, or through
 *  blockTable [B, maxPages] pages of cacheRows rows for a paged kernel).
 *  An e4m3 cache (metadata "kv_dtype": "e4m3") gets the codes of
 *  x / descale rounded to nearest and saturated at +-448, with kDescale and
 *  vDescale laid out as descaleLayout says (faKernelLaunchKVCacheE4M3);
 *  a 16-bit cache takes NULL descales. seen [B] (int32, device) receives
 *  kvLengths + newRows: the lengths to launch the attention with on the
 *  same stream. The lengths and the table stay on the device: the kernel
 *  traps on a position at or past the capacity or a page outside [0,
 *  cacheEntries), as the attention does. */
int faKernelAppendKV(FaKernel *kernel, const void *kNew,
                     const FaStrides *kNewStrides, const void *vNew,
                     const FaStrides *vNewStrides, void *kCache,
                     const FaStrides *kStrides, void *vCache,
                     const FaStrides *vStrides, int batch, int newRows,
                     int kvHeads, long long cacheEntries, int cacheRows,
                     const int *kvLengths, int *seen, const int *blockTable,
                     int maxPages, const float *kDescale, const float *vDescale,
                     int descaleLayout, void *stream);

/** faKernelLaunchStrided for a kernel compiled for a varlen batch
 *  (fa-compile --varlen; metadata "varlen"): q and o are [1, Hq, totalQ, D],
 *  k and v [1, Hkv, totalK, D] holding `sequences` sequences packed along N
 *  (strides as in faKernelLaunchStrided; flash-attn's [total, H, D] is
 *  {0, D, H*D} with any batch stride); cuSeqlensQ and cuSeqlensK are their
 *  [sequences + 1] int32 prefix sums on the device (from 0, not
 *  decreasing, within the totals) and maxSeqlenQ the longest sequence's
 *  queries (the grid). The kernel checks the sums and maxSeqlenQ on the
 *  device: sums that break these rules stop it with a trap
 *  (CUDA_ERROR_LAUNCH_FAILED). The LSE is [1, Hq, totalQ]. */
int faKernelLaunchVarlen(FaKernel *kernel, const void *q,
                         const FaStrides *qStrides, const void *k,
                         const FaStrides *kStrides, const void *v,
                         const FaStrides *vStrides, void *o,
                         const FaStrides *oStrides, float *lse, int sequences,
                         int qHeads, int kvHeads, int totalQ, int totalK,
                         int maxSeqlenQ, const int *cuSeqlensQ,
                         const int *cuSeqlensK, float scale, void *stream);

/** Split-KV's auto chunk count (mlir::fa::model::autoKVSplits,
 * fa/Model/KVChunk.h) for `tiles` (query block, head) tiles of `kvBlocks` K/V
 * blocks each, `queryBlocks` of them per (sequence, head) (1: decode), on
 * `sms` SMs with `dramGBps` GB/s of DRAM bandwidth (0: unknown): the fewest
 * chunks that fill whole waves of one CTA per SM to within 5%; once the
 * tiles fill 80% of a wave, 2 for decode tiles under four waves (of at least
 * 4 K/V blocks) on a GPU of at least 30 GB/s per SM, and 1 otherwise. */
int faAutoKVSplits(long long tiles, long long queryBlocks, long long kvBlocks,
                   int sms, int dramGBps);

/** Pack-GQA at decode (fa::model::decodeHeadsPerTile,
 *  fa/Model/PackGQA.h): the query heads one tile's rows take, Hq / Hkv
 *  where `queries` is 1, the heads are grouped and the kernel has no mask
 *  (`masked` 0); else 1. faKernelLaunchStrided and faKernelLaunchKVCache
 *  apply it to 16-bit sm_90a kernels: Q and O [B, Hq, 1, D] are read and
 *  written as [B, Hkv, G, D] views and the LSE [B, Hq, 1] as [B, Hkv, G]
 *  (the same memory), so each K/V block is read once per K/V head. A KV
 *  cache's bottom-right causal mask hides nothing from its one query:
 *  decode with the unmasked kernel to get the packing. */
int faDecodeHeadsPerTile(long long queries, long long qHeads,
                         long long kvHeads, int masked);

/** Pack-GQA beyond one query (fa::model::queryGroupFor, fa/Model/
 *  PackGQA.h): G = Hq / Hkv for grouped heads (a power of two up to 64) at
 *  2 to 16 queries a sequence, or at one query with a mask (`masked`
 *  nonzero), where the K/V the launch reads (`kvBytes`, K and V of every
 *  sequence's capacity) is at least 64 MiB; else 0. A kernel compiled with that query group (fa-compile
 *  --query-group G; metadata "query_group") reads Q, O and the LSE packed
 *  [B, Hkv, Nq G, D], row r query r / G of query head h G + r mod G: the
 *  caller packs Q and unpacks O and the LSE, and launches it with
 *  Hq = Hkv and Nq G rows. */
int faQueryGroupFor(long long queries, long long qHeads, long long kvHeads,
                    int masked, long long kvBytes);

void faKernelDestroy(FaKernel *kernel);

/*===----------------------------------------------------------------------===*
 * The backward (fa-compile --backward)
 *===----------------------------------------------------------------------===*/

typedef struct FaBackwardKernel FaBackwardKernel;

/** Loads a backward kernel: its cubin and its "flash-mlir-backward-2"
 *  metadata, which names three kernels of the cubin (the preprocess, the
 *  main kernel, dQ's conversion). A forward kernel's metadata is refused
 *  here, and this one by faKernelLoad. */
int faBackwardKernelLoad(const void *cubin, size_t cubinSize,
                         const char *metadataJson, int device,
                         FaBackwardKernel **kernel);
/** faBackwardKernelLoad of <prefix>.cubin and <prefix>.json. */
int faBackwardKernelLoadFiles(const char *prefix, int device,
                              FaBackwardKernel **kernel);
/** Parses and validates a backward kernel's metadata as
 *  faBackwardKernelLoad does, without a driver: 0 when it would accept
 *  it, else 1 with the reason in faRuntimeLastError(). */
int faBackwardMetadataCheck(const char *metadataJson);
const char *faBackwardKernelName(const FaBackwardKernel *kernel);
/** Device workspace a launch of this shape needs (row_dots, dQ's f32
 *  accumulator and, for a deterministic kernel, its turn counters), in
 *  `bytes`. */
int faBackwardWorkspaceBytes(const FaBackwardKernel *kernel, int batch,
                             int qHeads, int qLen, size_t *bytes);
/** dQ, dK, dV of O = attention(Q, K, V) (the kernel's mask and scale
 *  `scale`) for the loss gradient dO, from the forward's O and its LSE
 *  (natural log, f32 [B, Hq, Nq]): contiguous device buffers Q, O, dO, dQ
 *  [B, Hq, Nq, D] and K, V, dK, dV [B, Hkv, Nk, D] of the kernel's dtype,
 *  16-byte aligned; `workspace` at least faBackwardWorkspaceBytes, 256-byte
 *  aligned, its contents overwritten. Three launches on `stream` (a
 *  CUstream, NULL for the default stream), in order: the preprocess, the
 *  main kernel, dQ's conversion. Every size must be at least 1; Hq a
 *  multiple of Hkv. */
int faBackwardKernelLaunch(FaBackwardKernel *kernel, const void *q,
                           const void *k, const void *v, const void *o,
                           const float *lse, const void *dO, void *dq, void *dk,
                           void *dv, void *workspace, size_t workspaceBytes,
                           int batch, int qHeads, int kvHeads, int qLen,
                           int kvLen, float scale, void *stream);
void faBackwardKernelDestroy(FaBackwardKernel *kernel);

/** Encodes the TMA tensor map (a 128-byte CUtensorMap, `map` 64-byte
 *  aligned) the sm_90a kernels read a contiguous [B, H, N, D] tensor
 *  through: `matrices` = B * H matrices of `rows` x `headDim` elements of
 *  `elemBits` = 16 bits (dtype 0 f16, 1 bf16), boxes of 64 columns by
 *  `boxRows` rows, 128-byte swizzle, zeros past the last row. faKernelLaunch
 *  calls it; the host code that fa-opt's convert-fagpu-to-nvvm emits does too. */
int faEncodeTensorMap(void *map, const void *base, long long matrices,
                      long long rows, long long headDim, long long elemBits,
                      int boxRows, int dtype);

/** The rank-4 tensor map of the sm_90a kernels over a strided
 *  [B, H, N, D] tensor (dtype 0 f16, 1 bf16, 2 e4m3): strides in elements
 *  (faKernelLaunchStrided's rule: multiples of 16 bytes), boxes of one
 *  128-byte row (64 16-bit or 128 e4m3 columns) by `boxRows` rows of one
 *  (batch, head), 128-byte swizzle, zeros past the last row. e4m3 tensors
 *  take any D that is a multiple of 16 (an e4m3 kernel's V^T has the keys
 *  there). */
int faEncodeStridedTensorMap(void *map, const void *base, long long batch,
                             long long heads, long long rows,
                             long long headDim, long long strideB,
                             long long strideH, long long strideN,
                             int boxRows, int dtype);
/** The same with the bytes L2 fetches from DRAM when a box misses (0, 64,
 *  128 or 256; the function above takes 256): a kernel's metadata gives
 *  each tensor map's as its parameter's "l2_promotion". */
int faEncodeStridedTensorMapL2(void *map, const void *base, long long batch,
                               long long heads, long long rows,
                               long long headDim, long long strideB,
                               long long strideH, long long strideN,
                               int boxRows, int dtype, int l2PromotionBytes);

/** Device memory helpers for embedders and tests (device of the current
 *  context, retained by faKernelLoad or faDeviceInit). Null pointers are
 *  refused when bytes > 0; faDeviceFree(NULL) does nothing. */
int faDeviceInit(int device);
int faDeviceAlloc(size_t bytes, void **ptr);
int faDeviceFree(void *ptr);
int faCopyToDevice(void *dst, const void *src, size_t bytes);
int faCopyToHost(void *dst, const void *src, size_t bytes);
int faDeviceSynchronize(void);

#ifdef __cplusplus
}
#endif

#endif /* FA_C_RUNTIME_H */
