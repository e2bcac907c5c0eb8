//===- KernelABI.h - launch interface of the attention kernels --*- C++ -*-===//
//
// One description of a kernel's parameters, derived from its target and
// schedule: the kernel's LLVM signature (convert-fagpu-to-nvvm), the
// arguments of its host-side launch, and the "params" list of the launch
// metadata that the C and Python runtimes check and fill are all built from
// it, so they cannot disagree: the kernel carries the list it was built
// from (fagpu.params), and lib/Target serialises that.
//
//===----------------------------------------------------------------------===//

#ifndef FA_DIALECT_FAGPU_IR_KERNELABI_H
#define FA_DIALECT_FAGPU_IR_KERNELABI_H

#include "fa/Dialect/FAGPU/IR/FAGPU.h"

#include <string>

namespace mlir::fagpu {

/// The L2 promotion of a tensor map where nothing else is chosen: 256 bytes
/// (a box row is 128 bytes; a 256-byte row of D 128 f16 is two of them).
inline constexpr int64_t kDefaultL2Promotion = 256;

enum class ParamKind {
  /// A CUtensorMap the runtime encodes with cuTensorMapEncodeTiled, passed
  /// by value as a __grid_constant__ parameter: boxes of 64 columns x
  /// boxRows rows, 128-byte swizzle. Over a strided [B, H, N, D] tensor
  /// (rank 4: D, N, H, B innermost first) where the target reads strided
  /// tensors (stridedTensors), else over contiguous [B * H, N, D] (rank 3).
  TensorMap,
  /// A global-memory pointer to a contiguous tensor.
  Pointer,
  I32,
  /// A stride in elements (the batch, head or row stride of a strided
  /// tensor the kernel addresses itself).
  I64,
  F32,
  /// u32 counters in global memory (`shape` elements, one without a shape):
  /// zero before a launch, left zero by it, so the launches of one stream
  /// may share them. The dynamic tile scheduler's counter; split-KV's
  /// per-tile arrival counts.
  Counter,
  /// Scratch in global memory of `shape` elements of `dtype`, uninitialised:
  /// split-KV's partial results.
  Workspace,
};

struct KernelParam {
  std::string name;
  ParamKind kind;
  /// Tensors: element type (f16, bf16, f32); the counter: u32.
  std::string dtype;
  /// Tensors: dims by name, outermost first ([B, Hq, Nq, D]).
  SmallVector<std::string> shape;
  /// Scalars and the counter: what the value is.
  std::string meaning;
  /// Tensor maps: rows of one TMA box, and the map's rank (4: strided
  /// [B, H, N, D]; 3: contiguous [B * H, N, D]).
  int64_t boxRows = 0;
  int64_t rank = 0;
  /// Tensor maps: the bytes of a box row, the map's swizzle span (128, or
  /// 64 / 32 for an e4m3 V^T of B_c = 192 / 224 keys: valueTileSwizzle).
  int64_t swizzleBytes = kMaxSwizzleBytes;
  /// Tensor maps: the bytes L2 fetches from DRAM when one of the map's
  /// boxes misses (CU_TENSOR_MAP_L2_PROMOTION_L2_{64,128,256}B; 0: none).
  int64_t l2Promotion = kDefaultL2Promotion;
};

/// What the attention's operands add to a kernel's inputs beyond Q, K, V:
/// a KV cache's per-sequence key lengths and its paging.
struct KernelInputs {
  /// kv_lengths [B] (i32): sequence b attends its first lengths[b] keys.
  bool keyLengths = false;
  /// Rows per page of a paged K/V cache [pages, Hkv, page_size, D]
  /// addressed by a block table [B, max_pages] (i32); 0: contiguous K/V.
  int64_t pageSize = 0;
  /// A varlen batch: Q, K, V, O packed along N in one batch row, with
  /// cu_seqlens_q and cu_seqlens_k [B + 1] (i32).
  bool varlen = false;
  /// O's element type where it differs from Q/K/V's: f16 or bf16 for e4m3
  /// inputs (empty: the inputs').
  std::string outputDtype;
  /// The head dim: the rows of an e4m3 kernel's V^T boxes.
  int64_t headDim = 0;
  /// V and O have Dv columns, fewer than Q's and K's D (sm_90a wgmma: V's
  /// tiles are D's, zero-filled past Dv): their shapes say "Dv".
  bool narrowValues = false;
  /// K's and V's element type where it differs from Q's: "e4m3" for an
  /// e4m3 KV cache beside a 16-bit Q (sm_90a), which adds their descales
  /// (empty: Q's).
  std::string keyValueDtype;
};

/// How an e4m3 launch's three descale arrays are laid out (the kernel's
/// `descale_layout` argument; the C API's FA_DESCALE_* values). The values
/// of the tensor are its e4m3 codes times them.
enum class DescaleLayout : int64_t {
  /// One each, for the whole tensor.
  Tensor = 0,
  /// [B, Hkv] each (FlashAttention-3's): a (batch, K/V head)'s, which its
  /// query heads take too.
  Head = 1,
  /// FlashAttention-3's block quantisation (fa-block-quantize): Q's per
  /// query block, [B, Hq, ceil(Nq / block_r)]; K's per K/V block, [B, Hkv,
  /// ceil(Nk / block_c)]; V's one for the tensor. The blocks are the
  /// kernel's tiles, so a score tile's descale is one product.
  Block = 2,
};
/// The layout of a fagpu.attention's descales, by Q's descale: rank 0, 2
/// ([B, Hkv]) or 3 (per block; the verifier checks the three agree).
inline DescaleLayout descaleLayoutOf(MemRefType qDescale) {
  switch (qDescale.getRank()) {
  case 2:
    return DescaleLayout::Head;
  case 3:
    return DescaleLayout::Block;
  default:
    return DescaleLayout::Tensor;
  }
}

/// The parameters, in launch order, of the kernel `target` builds for
/// `schedule` on `dtype` (f16, bf16, or e4m3 on sm_90a) inputs.
///
/// e4m3 (sm_90a): q and k are e4m3 tensor maps; V comes as `v_t`, the
/// tensor map of the layout kernel's output (valueLayoutParams) [B, Hkv, D,
/// Nk_128] with boxes of D rows; o is `inputs.outputDtype`; `q_descale`,
/// `k_descale`, `v_descale` are f32 device arrays laid out as the launch's
/// `descale_layout` (a DescaleLayout) says.
SmallVector<KernelParam> kernelParams(Target target,
                                      const ScheduleFields &schedule,
                                      StringRef dtype,
                                      const KernelInputs &inputs = {});

/// The e4m3 kernels' V layout kernel: V [B, Hkv, Nk, D] (strided, unit
/// stride on D) -> V^T [B, Hkv, D, Nk_128] (contiguous, Nk_128 = Nk rounded
/// up to kValueLayoutKeyAlign, the padding zero), keys permuted within each
/// 16 by σ(κ) = 8 ((κ mod 4) / 2) + 2 (κ / 4) + κ mod 2 so that P's e4m3 A
/// fragment, packed from the S accumulator without a shuffle, meets its
/// keys: V^T[b, h, d, 16 g + κ] = V[b, h, 16 g + σ(κ), d]. One thread a
/// (b, h, g, 16 columns of d), the columns fastest; kValueLayoutThreads
/// threads a CTA.
SmallVector<KernelParam> valueLayoutParams();
inline constexpr int64_t kValueLayoutThreads = 256;
/// Columns of V (D) one layout thread transposes, with a group's 16 keys:
/// B * Hkv * (Nk_128 / 16) * (D / this) threads. The launch metadata states
/// it (value_layout's "columns_per_thread"; 1 where absent, the kernels
/// before it, one thread a column).
inline constexpr int64_t kValueLayoutColumnsPerThread = 16;
/// V^T's rows are padded to whole 128-key (128-byte) box rows: each row
/// then starts on an L2 line, and every box of the P V product lies in
/// bounds. A row pitch of 16 mod 32 bytes (Nk = 1000 rounded to 16) makes
/// every other box row straddle one 32-byte sector more than it carries.
/// The launch metadata states it (value_layout's "key_alignment"), so that
/// the runtimes allocate and map V^T as the layout kernel writes it.
inline constexpr int64_t kValueLayoutKeyAlign = 128;
/// The key of V that column κ of each 16 of V^T holds (see above).
inline constexpr int64_t valueLayoutKey(int64_t kappa) {
  return 8 * ((kappa % 4) / 2) + 2 * (kappa / 4) + kappa % 2;
}

/// The KV-cache kernels' append kernel (flash_attn_with_kvcache's k and v):
/// writes the new keys and values k_new, v_new [B, Nnew, Hkv, D] (`dtype`,
/// f16 or bf16, strided) into the cache rows lengths[b] .. lengths[b] +
/// Nnew - 1 of each sequence, and seen[b] = lengths[b] + Nnew, the lengths
/// the attention then reads: one launch where the same step in torch ops
/// is about ten (index arithmetic, a gather of the pages, two scatters, and
/// a quantisation). The cache is contiguous [B, capacity, Hkv, D]
/// (page_size 0) or paged [num_pages, page_size, Hkv, D] through
/// block_table [B, max_pages], any strides (batch or page, row, head) with
/// unit stride on D. An e4m3 cache (`e4m3Cache`) takes the codes of x /
/// descale, rounded to nearest and saturated at +-448 (cvt.rn.satfinite),
/// with k_descale and v_descale one f32 each or [B, Hkv]
/// (descale_layout, the attention's DescaleLayout: Tensor or Head). The kernel traps on a position at or past
/// `capacity` or a page outside [0, num_pages), as the attention does: the
/// lengths and the table stay on the device. One thread a (sequence, new
/// row, head, kKVAppendColumnsPerThread columns), the columns fastest;
/// kKVAppendThreads threads a CTA.
SmallVector<KernelParam> kvAppendParams(StringRef dtype, bool e4m3Cache);
inline constexpr int64_t kKVAppendThreads = 256;
/// 16 bytes of a 16-bit row a thread (one vector load; an e4m3 cache's 8
/// bytes one vector store): new rows, cache rows and head strides must be
/// whole multiples of it, which the runtimes check before they launch.
inline constexpr int64_t kKVAppendColumnsPerThread = 8;

/// The backward kernel (fagpu.attention_backward) of `dtype` (f16 or bf16):
/// Q, K, V, dO, dK, dV contiguous [B, H, N, D], the forward's LSE and the
/// preprocess's row_dots [B, Hq, Nq] (f32), dQ's f32 accumulator
/// dq_accum [B, Hq, Nq, D] (zeroed before the launch, atomically added to),
/// the sizes, and the attention's scale (scores are scale Q K^T).
/// `deterministic`: after dq_accum, dq_semaphores [B, Hq, ceil(Nq / 64)]
/// (i32, zeroed before the launch), one turn counter a query block.
SmallVector<KernelParam> backwardParams(StringRef dtype, bool deterministic);
/// Its grid: a CTA per (K/V block of block_c keys, K/V head, batch).
DictionaryAttr backwardGrid(MLIRContext *ctx);

/// The backward's kernels before and after the main one, in its cubin, a
/// CTA of kBackwardRowsThreads per (block of kBackwardRows query rows,
/// query head, batch) (backwardRowsGrid). The preprocess: row_dots =
/// rowsum(dO o O) in f32 from o and do [B, Hq, Nq, D] (`dtype`,
/// contiguous), dq_accum = 0 and, `deterministic`, dq_semaphores = 0 --
/// what the main kernel reads (backwardParams).
SmallVector<KernelParam> backwardPreprocessParams(StringRef dtype,
                                                  bool deterministic);
/// The conversion after it: dq = dq_accum in `dtype` ([B, Hq, Nq, D]).
SmallVector<KernelParam> backwardConvertParams(StringRef dtype);
DictionaryAttr backwardRowsGrid(MLIRContext *ctx);
/// Query rows a CTA of the two: the main kernel's query block, so that
/// the preprocess zeroes the turn counter of the block it covers.
inline constexpr int64_t kBackwardRows = 64;
/// Two threads a row: each sums half of the row's columns.
inline constexpr int64_t kBackwardRowsThreads = 2 * kBackwardRows;

/// Whether `target`'s kernels read and write q, k, v, o as strided
/// [B, H, N, D] tensors (any batch, head and row strides in 16-byte
/// multiples, unit stride on D): rank-4 tensor maps, and o's strides as
/// parameters where the kernel stores it from registers. The other targets'
/// kernels take contiguous tensors.
inline bool stridedTensors(Target target) { return target == Target::sm_90a; }

/// "tensormap", "pointer", "i32", "i64", "f32", "counter" or "workspace", as
/// the metadata says.
StringRef paramKindName(ParamKind kind);

/// The name of the kernel attribute that carries its parameters: the
/// lowering that builds a kernel from a parameter list attaches the list
/// (paramsAttr), and lib/Target writes the launch metadata's "params" from
/// it (paramsOf) instead of deriving the list a second time.
inline constexpr StringLiteral kParamsAttrName = "fagpu.params";
/// `params` as an array of dictionaries, one per parameter in order: name,
/// kind (paramKindName), and where set dtype, shape, meaning and (tensor
/// maps) box_rows, rank, swizzle_bytes, l2_promotion.
ArrayAttr paramsAttr(MLIRContext *ctx, ArrayRef<KernelParam> params);
/// The parameters of a paramsAttr; failure where an entry is malformed.
FailureOr<SmallVector<KernelParam>> paramsOf(ArrayAttr attr);

/// The attribute that carries a built kernel's launch grid (launchGrid).
inline constexpr StringLiteral kGridAttrName = "fagpu.grid";
/// The launch grid of a kernel of `target` built for `schedule`, as the
/// launch metadata writes it and the runtimes evaluate it ({x, y, z}:
/// integers or formulas in the launch's sizes and the kernel's fields, the
/// grammar of include/fa/Model/GridFormula.h): the TMA-fed kernels (sm_90a,
/// sm_100a) run one CTA per (query block, head, batch) tile -- a persistent
/// grid at most SMs * ctas_per_sm of them -- by kv_splits chunks with
/// split-KV; the mma.sync kernel runs a CTA per (query block, head, batch)
/// on x, y, z.
DictionaryAttr launchGrid(MLIRContext *ctx, Target target,
                          ScheduleAttr schedule);
/// The V layout kernel's grid (valueLayoutParams), in B, Hkv, D and Nk_128
/// (Nk rounded up to kValueLayoutKeyAlign).
DictionaryAttr valueLayoutGrid(MLIRContext *ctx);
/// The append kernel's grid (kvAppendParams), in B, Nnew, Hkv and D.
DictionaryAttr kvAppendGrid(MLIRContext *ctx);

/// The swizzle of an e4m3 kernel's V^T tile [D, B_c]: its rows are B_c
/// bytes, cut into column blocks of the widest swizzle span (128, 64 or 32
/// bytes) that divides them -- B_c = 192 takes 64-byte blocks, 224 32-byte
/// ones (FlashAttention-3's B_c for FP8 at D = 128). TMA boxes and wgmma
/// descriptors follow the tile's swizzle.
inline int64_t valueTileSwizzle(int64_t blockC) {
  for (int64_t swizzle : {int64_t(128), int64_t(64), int64_t(32)})
    if (blockC % swizzle == 0)
      return swizzle;
  return 0;
}

} // namespace mlir::fagpu

#endif // FA_DIALECT_FAGPU_IR_KERNELABI_H
