//===- FAOps.td - fa dialect operations --------------------*- tablegen -*-===//

#ifndef FA_DIALECT_FA_IR_FAOPS_TD
#define FA_DIALECT_FA_IR_FAOPS_TD

include "fa/Dialect/FA/IR/FADialect.td"
include "mlir/Interfaces/ControlFlowInterfaces.td"
include "mlir/Interfaces/SideEffectInterfaces.td"

def FA_AttnElement : AnyTypeOf<[F16, BF16, F32]>;
def FA_AttnOperand : AnyTypeOf<[RankedTensorOf<[F16, BF16, F32, F8E4M3FN]>,
                                MemRefOf<[F16, BF16, F32, F8E4M3FN]>]>;
// A descale factor of fp8 inputs: rank 0 (per tensor), [B, Hkv] (per batch
// and K/V head, FlashAttention-3's API) or [B, H, ceil(N / tile)] (per
// block, after fa-block-quantize); the verifier checks which.
def FA_Descale : AnyTypeOf<[RankedTensorOf<[F32]>, MemRefOf<[F32]>]>;
// Per-sequence key lengths [B] and a paged KV cache's block table [B, P].
def FA_I32Operand : AnyTypeOf<[RankedTensorOf<[I32]>, MemRefOf<[I32]>]>;
// One f32 logit per query head (attention sinks).
def FA_SinkLogits : AnyTypeOf<[TensorRankOf<[F32], [1]>, MemRefRankOf<[F32], [1]>]>;

//===----------------------------------------------------------------------===//
// Op level
//===----------------------------------------------------------------------===//

// IsolatedFromAbove: score_mod and mask_mod see only their arguments (the
// captures included), so they move with the op through every lowering and
// folders keep their constants inside them.
def FA_AttentionOp : FA_Op<"attention", [AttrSizedOperandSegments,
    IsolatedFromAbove,
    DeclareOpInterfaceMethods<RegionBranchOpInterface>,
    DeclareOpInterfaceMethods<MemoryEffectsOpInterface>]> {
  let summary = "scaled dot-product attention softmax(scale * Q K^T) V";
  let description = [{
    Computes, for every batch `b` and query head `h`,

    ```
    S = scale * Q[b, h] K[b, h / (Hq / Hkv)]^T     (optionally softcap*tanh(S/softcap))
    O[b, h] = softmax_rows(mask(S)) V[b, h / (Hq / Hkv)]
    LSE[b, h, i] = log(sum_j exp(mask(S)[i, j]))
    ```

    Operands are `Q [B, Hq, Nq, D]`, `K [B, Hkv, Nk, D]`, `V [B, Hkv, Nk, Dv]`
    with one element type among f16, bf16, f32 and f8E4M3FN; `Hq` must be a multiple of
    `Hkv` (grouped-query and multi-query attention). `D` and `Dv` must be
    static; batch, heads and sequence lengths may be dynamic.

    Attributes (ranges and their reasons: `fa/Dialect/FA/IR/Validation.h`):
    * `scale` (f32 in [2^-64, 2^64], default `1/sqrt(D)`).
    * `causal`: query `i` sees key `j` only if `j <= i` (top-left aligned,
      as `torch.nn.functional.scaled_dot_product_attention(is_causal=True)`).
    * `window = w` (w >= 1): query `i` sees key `j` only if `|i - j| < w`.
    * `bottom_right` (with `causal` or `window`): the masks' diagonal is
      aligned to the bottom-right corner, as flash-attention's and a KV
      cache's: query `i` is at position `i + Nk - Nq` among the keys, so it
      sees key `j` only if `j <= i + Nk - Nq` (causal) and
      `|i + Nk - Nq - j| < w` (window). A query before every key (Nq > Nk)
      sees none. Without it the masks are top-left aligned.
    * `diagonal_offset = d` (with `causal` or `window`; d in [0, 2^31 - 1]):
      the diagonal moves `d` keys to the right, as `torch.tril`'s
      `diagonal`: query `i` sits at key position `p = i + d` (plus
      `Nk - Nq` with `bottom_right`), sees key `j` only if `j <= p`
      (causal) and `|p - j| < w` (window). A window with separate left and
      right reaches, flash-attention's `window_size = (left, right)`, is
      `causal`, `window = left + right + 1`, `diagonal_offset = right`:
      `p_0 - left <= j <= p_0 + right` around the unshifted position `p_0`.
    * `softcap = c` (c in [2^-64, 2^24]): scores become `c * tanh(S / c)` before
      masking.
    * `block_r`, `block_c` (in [1, 2^20]): the tile sizes chosen by
      `fa-tile`.
    * `kv_splits = S` (in [1, 1024], set by `fa-split-kv`): split-KV
      (flash-decoding). Each query block's K/V range is cut into `S` chunks
      computed independently into partial `(O_s, LSE_s)` (f32 scratch), then
      combined by `fa.merge_partials`: more parallel work when `B * H * Nq`
      is small (decode).

    `D` and `Dv` are in [1, 2^16].

    A row whose keys are all masked yields `O = 0` and `LSE = -inf`.

    FP8 (FlashAttention-3's e4m3 path): with `f8E4M3FN` inputs the op takes
    three f32 descale factors after `descale` and computes

    ```
    S = scale * q_descale * k_descale * (Q K^T)
    O = v_descale * softmax(S) V
    ```

    with every e4m3 value widened exactly (all of them are f16 and f32
    values) and products accumulated in f32. `O` is then f16, bf16 or f32
    (fp8 MMAs accumulate in f32). Descales are runtime values (an embedding
    compiler computes them from the data, `amax / 448`), each a rank-0
    f32 (per tensor), a `[B, Hkv]` f32 (per batch and K/V head, as
    FlashAttention-3's `q_descale`/`k_descale`/`v_descale`) or, for Q and K
    after `fa-block-quantize`, `[B, H, ceil(N / tile)]` (one per `block_r`
    rows of Q, `block_c` rows of K). Their values must be finite and
    positive (`fa::checkDescale`; the tools check the values they make).

    ```mlir
    fa.attention %q, %k, %v descale(%qd, %kd, %vd : memref<f32>, memref<f32>, memref<f32>)
        outs(%o : memref<1x4x77x64xf16>)
        : memref<1x4x77x64xf8E4M3FN>, memref<1x4x131x64xf8E4M3FN>, memref<1x4x131x64xf8E4M3FN>
    ```

    An e4m3 KV cache (vLLM's and SGLang's FP8 caches): with `f16`, `bf16`
    or `f32` Q and `f8E4M3FN` K and V the op takes two descale factors,
    K's and V's (rank 0, or `[B, Hkv]`: vLLM's `k_scale`/`v_scale` per
    tensor or per K/V head), and computes

    ```
    S = scale * k_descale * (Q K^T)
    O = v_descale * softmax(S) V
    ```

    with K and V widened exactly and P kept at the query's precision (not
    rounded to e4m3: the products run at Q's precision on the dequantised
    K/V). `O` has Q's element type.

    ```mlir
    fa.attention %q, %k, %v descale(%kd, %vd : memref<f32>, memref<f32>)
        kv_lengths(%lens : memref<2xi32>)
        outs(%o : memref<2x32x1x128xf16>)
        : memref<2x32x1x128xf16>, memref<2x8x4096x128xf8E4M3FN>, memref<2x8x4096x128xf8E4M3FN>
    ```

    KV caches (flash-attn's `flash_attn_with_kvcache`):
    * `kv_lengths(%lens)`, `[B]` i32: sequence `b` has `lens[b]` keys, the
      first ones of its K/V rows; the rest are not attended (skipped, or
      masked in a ragged last block). Bottom-right masks align with
      `lens[b]`: query `i` is at key position `i + lens[b] - Nq`. Each
      length must be in `[0, capacity]` (capacity: `Nk`, or with pages
      `P * page_size`); the IR cannot check runtime values, the tools
      check the ones they make.
    * `pages(%table)`, `[B, P]` i32: K and V are a paged cache
      `[num_pages, Hkv, page_size, D]` (flash-attn's `[num_pages,
      page_size, Hkv, D]` is this with strides). Key `j` of sequence `b`
      is row `j % page_size` of page `table[b, j / page_size]`; entries
      must be in `[0, num_pages)`. `page_size` is static. Without
      `kv_lengths` every sequence has `P * page_size` keys.

    Varlen batches (flash-attn's `flash_attn_varlen_func`):
    `varlen(%cu_q, %cu_k)`, two `[B + 1]` i32 prefix sums. Q, K, V, O (and
    LSE) hold the sequences packed along N with a batch of one:
    `Q [1, Hq, total_q, D]`, `K`/`V [1, Hkv, total_k, D]`. Sequence `b` is
    query rows `cu_q[b] .. cu_q[b + 1] - 1` and key rows
    `cu_k[b] .. cu_k[b + 1] - 1`; masks are per sequence (bottom-right
    aligned with its own lengths). The sums must start at 0, not decrease
    and end within N; rows past `cu_q[B]` are not written.

    ```mlir
    fa.attention %q, %k_cache, %v_cache kv_lengths(%lens : memref<4xi32>)
        pages(%table : memref<4x8xi32>) outs(%o : memref<4x8x1x128xf16>)
        {causal, bottom_right}
        : memref<4x8x1x128xf16>, memref<64x8x256x128xf16>, memref<64x8x256x128xf16>
    ```

    Attention sinks (gpt-oss's learnable sink logit per head):
    `sinks(%s)`, an f32 `[Hq]` of the inputs' kind. Head `h`'s logit `s_h`
    (natural log, in the units of `S`) joins every row's softmax
    denominator as a key whose value row is zero:

    ```
    O[b, h, i] = sum_j exp(S_ij - LSE_i) V_j
    LSE[b, h, i] = log(exp(s_h) + sum_j exp(mask(S)[i, j]))
    ```

    so a row whose keys are all masked yields `O = 0` and `LSE = s_h`. A
    sink of `-inf` is no sink (`exp(-inf) = 0`); the values must not be
    `+inf` or NaN (runtime values: the tools check the ones they make).

    ```mlir
    fa.attention %q, %k, %v sinks(%s : memref<8xf32>)
        outs(%o, %lse : memref<1x8x77x64xf16>, memref<1x8x77xf32>) {causal}
        : memref<1x8x77x64xf16>, memref<1x2x131x64xf16>, memref<1x2x131x64xf16>
    ```

    Score and mask modifications (FlexAttention's `score_mod` and
    `mask_mod`), as regions:

    ```
    S[i, j] = score_mod(cap(scale * Q K^T)[i, j], b, h, i, j, captures...)
    visible(i, j) = mask(i, j) and mask_mod(b, h, i, j, captures...)
    ```

    `score_mod`'s block takes the score (f32, natural-log units) and the
    batch, query head, query and key indices (`index`: a sequence's own
    rows, from 0, in a varlen batch or a KV cache), then one argument per
    value of `captures(...)` (per-head slopes, bias tensors, document ids:
    memrefs or tensors of the op's kind); it yields the new score (f32,
    `-inf` hides the key). `mask_mod`'s block takes the four indices and
    the captures and yields an `i1`: false hides the key, on top of the
    built-in masks. The regions see every capture as a value, a tensor of
    its shape (in both forms: a memref capture is read as the tensor of its
    contents), read with `tensor.extract` (or sized with `tensor.dim`);
    their ops are free of side effects and use only the region's values.
    The loop orders copy the regions into `fa.score_tile`, whose lowering
    reads the captured memrefs.
    The regions are evaluated only at positions inside the sequences that
    the built-in masks leave visible; `scale` and `softcap` apply before
    `score_mod`. Regions that spell the causal mask or a softcap fold into
    those attributes (fa-fold-modifications, first in every pipeline).
    Other regions reach the sm_90a kernel (16-bit inputs, no captures),
    which evaluates them on every score (`fagpu.modify_scores`); the
    other GPU targets refuse them by name.

    ```mlir
    fa.attention %q, %k, %v captures(%slopes : memref<8xf32>)
        outs(%o : memref<1x8x256x64xf16>) {causal}
        : memref<1x8x256x64xf16>, memref<1x8x256x64xf16>, memref<1x8x256x64xf16>
      score_mod {
      ^bb0(%s: f32, %b: index, %h: index, %i: index, %j: index, %m: tensor<8xf32>):
        %slope = tensor.extract %m[%h] : tensor<8xf32>
        %d = arith.subi %j, %i : index
        %di = arith.index_cast %d : index to i64
        %df = arith.sitofp %di : i64 to f32
        %r = math.fma %slope, %df, %s : f32
        fa.yield %r : f32
      }
    ```

    Tensor form (results `O` and optionally `LSE [B, Hq, Nq]` in f32):

    ```mlir
    %o, %lse = fa.attention %q, %k, %v {causal}
        : tensor<2x8x128x64xf16>, tensor<2x2x128x64xf16>, tensor<2x2x128x64xf16>
        -> tensor<2x8x128x64xf16>, tensor<2x8x128xf32>
    ```

    Memref form (destinations after `outs`, no results):

    ```mlir
    fa.attention %q, %k, %v outs(%o : memref<1x4x77x64xf32>) {scale = 0.125 : f32}
        : memref<1x4x77x64xf32>, memref<1x4x131x64xf32>, memref<1x4x131x64xf32>
    ```
  }];
  let arguments = (ins FA_AttnOperand:$query, FA_AttnOperand:$key,
                       FA_AttnOperand:$value,
                       Variadic<MemRefOf<[F16, BF16, F32]>>:$outs,
                       Variadic<FA_Descale>:$descales,
                       Optional<FA_I32Operand>:$kv_lengths,
                       Optional<FA_I32Operand>:$block_table,
                       Optional<FA_I32Operand>:$cu_seqlens_q,
                       Optional<FA_I32Operand>:$cu_seqlens_k,
                       Optional<FA_SinkLogits>:$sinks,
                       Variadic<AnyShaped>:$captures,
                       OptionalAttr<F32Attr>:$scale,
                       UnitAttr:$causal,
                       OptionalAttr<I64Attr>:$window,
                       OptionalAttr<F32Attr>:$softcap,
                       OptionalAttr<I64Attr>:$block_r,
                       OptionalAttr<I64Attr>:$block_c,
                       UnitAttr:$bottom_right,
                       OptionalAttr<I64Attr>:$kv_splits,
                       OptionalAttr<I64Attr>:$diagonal_offset);
  let results = (outs Variadic<RankedTensorOf<[F16, BF16, F32]>>:$results);
  let regions = (region MaxSizedRegion<1>:$score_mod,
                        MaxSizedRegion<1>:$mask_mod);
  let assemblyFormat = [{
    $query `,` $key `,` $value
    (`descale` `(` $descales^ `:` type($descales) `)`)?
    (`kv_lengths` `(` $kv_lengths^ `:` type($kv_lengths) `)`)?
    (`pages` `(` $block_table^ `:` type($block_table) `)`)?
    (`varlen` `(` $cu_seqlens_q^ `,` $cu_seqlens_k `:` type($cu_seqlens_q)
     `,` type($cu_seqlens_k) `)`)?
    (`sinks` `(` $sinks^ `:` type($sinks) `)`)?
    (`captures` `(` $captures^ `:` type($captures) `)`)?
    (`outs` `(` $outs^ `:` type($outs) `)`)?
    attr-dict `:` type($query) `,` type($key) `,` type($value)
    (`->` type($results)^)?
    (`score_mod` $score_mod^)? (`mask_mod` $mask_mod^)?
  }];
  let hasVerifier = 1;
  let builders = [
    // `attrs` may come from another attention (its operandSegmentSizes is
    // replaced by the one of these operands).
    OpBuilder<(ins "::mlir::TypeRange":$results, "::mlir::Value":$query,
                   "::mlir::Value":$key, "::mlir::Value":$value,
                   "::mlir::ValueRange":$outs, "::mlir::ValueRange":$descales,
                   "::mlir::Value":$kvLengths, "::mlir::Value":$blockTable,
                   "::mlir::Value":$cuSeqlensQ, "::mlir::Value":$cuSeqlensK,
                   "::mlir::Value":$sinks, "::mlir::ValueRange":$captures,
                   "::llvm::ArrayRef<::mlir::NamedAttribute>":$attrs)>
  ];
  let extraClassDeclaration = [{
    /// True for f8E4M3FN inputs, which come with descale factors.
    bool isFP8() {
      return ::llvm::isa<::mlir::Float8E4M3FNType>(
          getQueryType().getElementType());
    }
    /// True for an e4m3 K/V (a KV cache in FP8) read by a 16-bit or f32
    /// query: two descale factors, K's and V's.
    bool hasFP8KeyValues() {
      return !isFP8() && ::llvm::isa<::mlir::Float8E4M3FNType>(
                             getKeyType().getElementType());
    }
    /// The descale factors (null without them; Q has none beside an e4m3
    /// K/V, whose two are K's and V's).
    ::mlir::Value getQueryDescale() {
      return getDescales().size() == 3 ? getDescales()[0] : nullptr;
    }
    ::mlir::Value getKeyDescale() {
      return getDescales().empty() ? nullptr
                                   : getDescales()[getDescales().size() - 2];
    }
    ::mlir::Value getValueDescale() {
      return getDescales().empty() ? nullptr : getDescales().back();
    }
    /// True for a varlen batch (sequences packed along N).
    bool isVarlen() { return static_cast<bool>(getCuSeqlensQ()); }
    /// True with a score_mod or mask_mod region.
    bool hasModifications() {
      return !getScoreMod().empty() || !getMaskMod().empty();
    }
    /// Moves `other`'s modification regions into this op's (its captures'
    /// operands are the caller's to give).
    void takeModifications(AttentionOp other) {
      getScoreMod().takeBody(other.getScoreMod());
      getMaskMod().takeBody(other.getMaskMod());
    }
    /// True when K and V are a paged cache addressed by a block table.
    bool isPaged() { return static_cast<bool>(getBlockTable()); }
    /// Rows per page of a paged cache.
    int64_t getPageSize() { return getKeyType().getDimSize(2); }
    /// True when the operands are memrefs and the results are written to
    /// `outs`.
    bool hasBufferSemantics() {
      return ::llvm::isa<::mlir::MemRefType>(getQuery().getType());
    }
    /// The scale to apply: the attribute, or 1/sqrt(D) when absent.
    float getEffectiveScale();
    /// Whether the op computes the log-sum-exp output.
    bool hasLse() {
      return hasBufferSemantics() ? getOuts().size() == 2
                                  : getResults().size() == 2;
    }
    ::mlir::ShapedType getQueryType() {
      return ::llvm::cast<::mlir::ShapedType>(getQuery().getType());
    }
    ::mlir::ShapedType getKeyType() {
      return ::llvm::cast<::mlir::ShapedType>(getKey().getType());
    }
    ::mlir::ShapedType getValueType() {
      return ::llvm::cast<::mlir::ShapedType>(getValue().getType());
    }
    int64_t getHeadDim() { return getQueryType().getDimSize(3); }
    int64_t getValueHeadDim() { return getValueType().getDimSize(3); }
  }];
}

//===----------------------------------------------------------------------===//
// Tile level: the online-softmax state of one block of B_r query rows.
//===----------------------------------------------------------------------===//

def FA_RowVector : MemRefRankOf<[F32], [1]>;
def FA_F32Tile : MemRefRankOf<[F32], [2]>;
def FA_InputTile : MemRefRankOf<[F16, BF16, F32, F8E4M3FN], [2]>;

def FA_YieldOp : FA_Op<"yield", [Pure, Terminator, ReturnLike,
    ParentOneOf<["AttentionOp", "ScoreTileOp", "AttentionBackwardOp",
                 "ChainScoreModOp"]>]> {
  let summary = "the value of a score_mod (f32) or mask_mod (i1) region";
  let arguments = (ins Variadic<AnyType>:$values);
  let assemblyFormat = "attr-dict ($values^ `:` type($values))?";
}

def FA_InitStateOp : FA_Op<"init_state"> {
  let summary = "start the online softmax: m = -inf, l = 0, O = 0";
  let description = [{
    Writes the initial state of a block of `B_r` rows. Starting `m` at `-inf`
    needs no first-block special case: the first `fa.softmax_update` gives
    the correction `exp2(-inf - m_new) = 0`.

    With `sink(%s)` (an attention sink's logit, natural log) the state
    starts as if one key with score `s` and a zero value row had been seen:
    `m = log2(e) * s` (the base-2 units of `fa.score_tile`), `l = 1`,
    `O = 0`; the online softmax then carries it into `l` and the LSE like
    any key, whatever the loop order. `s = -inf` is no sink (`m = -inf`,
    `l = 0`): split-KV starts its first chunk with the sink and the others
    with `-inf`.

    ```mlir
    fa.init_state %m, %l, %acc : memref<64xf32>, memref<64xf32>, memref<64x128xf32>
    fa.init_state %m, %l, %acc sink(%s) : memref<64xf32>, memref<64xf32>, memref<64x128xf32>
    ```
  }];
  let arguments = (ins Arg<FA_RowVector, "running max m", [MemWrite]>:$max,
                       Arg<FA_RowVector, "running sum l", [MemWrite]>:$sum,
                       Arg<FA_F32Tile, "accumulator O", [MemWrite]>:$acc,
                       Optional<F32>:$sink);
  let assemblyFormat = [{
    $max `,` $sum `,` $acc (`sink` `(` $sink^ `)`)? attr-dict `:` type($max) `,` type($sum) `,` type($acc)
  }];
  let hasVerifier = 1;
}

def FA_ScoreTileOp : FA_Op<"score_tile", [AttrSizedOperandSegments,
    IsolatedFromAbove]> {
  let summary = "masked base-2 score tile S = log2(e) * scale * Q K^T";
  let description = [{
    For `r < rows(query)` and `c < rows(key)` with query position
    `i = row_offset + r` and key position `j = col_offset + c` visible under
    the mask, writes

    ```
    S[r, c] = log2(e) * cap(scale * sum_d Q[r, d] * K[c, d])
    cap(x)  = softcap * tanh(x / softcap)     (identity without softcap)
    ```

    and `-inf` everywhere else in the static `[B_r, B_c]` tile. The masks
    compare the positions `i = row_offset + r`, `j = col_offset + c`: causal
    `j <= i`, window `|i - j| < w`. With `bottom_right` the offsets are
    shifted by the lengths (`row_offset = i0 + Nk`, `col_offset = j0 + Nq`),
    so the same compares realise the bottom-right diagonal without negative
    positions; with `diagonal_offset = d` the row offset holds `+ d` too.
    The attributes record both for the GPU mapping. Ragged tails
    (query or key tiles shorter than the tile) and the causal/window masks
    are thus one mechanism: a masked score contributes `exp2(-inf) = 0`.
    Products are accumulated in f32 whatever the input type.

    With `descale` (fp8 inputs: the Q tile's descale times the K tile's),
    the product is multiplied by it before `scale`:
    `S[r, c] = log2(e) * cap(scale * descale * sum_d Q[r, d] * K[c, d])`.
    Block quantisation makes the descales per tile, so one scalar per
    (Q tile, K tile) covers every layout of `fa.attention`'s descales.

    ```mlir
    fa.score_tile %q, %k -> %s at [%i0, %j0] {causal, scale = 0.125 : f32}
        : memref<?x64xf16, strided<[64, 1], offset: ?>>,
          memref<?x64xf16, strided<[64, 1], offset: ?>> -> memref<64x128xf32>
    ```

    With `fa.attention`'s `score_mod` or `mask_mod` (moved here by the loop
    orders), the tile also takes `coordinates(%b, %h, %q0, %k0)`: the
    batch (sequence), query head and the sequence positions of its first
    query row and key (without the masks' shifts), and the captures. At a
    visible `(r, c)` with `i = q0 + r`, `j = k0 + c`:
    `S = log2(e) * score_mod(cap(scale * descale * Q K^T), b, h, i, j)`,
    and `S = -inf` where `mask_mod(b, h, i, j)` is false.

    With `score_mod`, a second tile `unmodified` may be given: it receives
    the score before `score_mod`, `log2(e) * cap(scale * descale * Q K^T)`
    (`-inf` where `S` is), which the backward's chain rule
    (`fa.chain_score_mod`) and softcap derivative (`fa.grad_scores`) read.

    ```mlir
    fa.score_tile %q, %k -> %s, unmodified %x at [%i0, %j0]
        coordinates(%b, %h, %q0, %k0) {scale = 0.125 : f32}
        : memref<?x64xf16, strided<[64, 1], offset: ?>>,
          memref<?x64xf16, strided<[64, 1], offset: ?>> -> memref<64x128xf32>, memref<64x128xf32>
        score_mod { ... }
    ```
  }];
  let arguments = (ins Arg<FA_InputTile, "query rows", [MemRead]>:$query,
                       Arg<FA_InputTile, "key rows", [MemRead]>:$key,
                       Arg<FA_F32Tile, "score tile", [MemWrite]>:$scores,
                       Arg<Optional<FA_F32Tile>, "the scores before score_mod",
                           [MemWrite]>:$unmodified,
                       Index:$row_offset, Index:$col_offset,
                       Optional<F32>:$descale,
                       Variadic<Index>:$coordinates,
                       Arg<Variadic<AnyMemRef>, "captures", [MemRead]>:$captures,
                       F32Attr:$scale, UnitAttr:$causal,
                       OptionalAttr<I64Attr>:$window,
                       OptionalAttr<F32Attr>:$softcap,
                       UnitAttr:$bottom_right,
                       OptionalAttr<I64Attr>:$diagonal_offset);
  let regions = (region MaxSizedRegion<1>:$score_mod,
                        MaxSizedRegion<1>:$mask_mod);
  let assemblyFormat = [{
    $query `,` $key `->` $scores (`,` `unmodified` $unmodified^)?
    `at` ` ` `[` $row_offset `,` $col_offset `]`
    (`descale` $descale^)?
    (`coordinates` `(` $coordinates^ `)`)?
    (`captures` `(` $captures^ `:` type($captures) `)`)?
    attr-dict `:` type($query) `,` type($key) `->` type($scores)
    (`,` type($unmodified)^)?
    (`score_mod` $score_mod^)? (`mask_mod` $mask_mod^)?
  }];
  let hasVerifier = 1;
}

def FA_SoftmaxUpdateOp : FA_Op<"softmax_update"> {
  let summary = "online-softmax step: new max, probabilities, sum, correction";
  let description = [{
    One step of the online softmax over a base-2 score tile, row by row:

    ```
    m_new = max(m, rowmax(S))
    b     = (m_new == -inf) ? 0 : m_new     // fully masked row: no NaN
    P     = exp2(S - b)                     // written over S
    alpha = exp2(m - b)                     // correction for O and l
    l     = alpha * l + rowsum(P)
    m     = m_new
    ```

    The caller applies `alpha` to the accumulator (`fa.rescale`) before
    adding `P V` (`fa.pv_accumulate`).

    ```mlir
    fa.softmax_update %s, %m, %l -> %alpha
        : memref<64x128xf32>, memref<64xf32>, memref<64xf32> -> memref<64xf32>
    ```
  }];
  let arguments = (ins Arg<FA_F32Tile, "scores in, probabilities out",
                           [MemRead, MemWrite]>:$scores,
                       Arg<FA_RowVector, "running max m", [MemRead, MemWrite]>:$max,
                       Arg<FA_RowVector, "running sum l", [MemRead, MemWrite]>:$sum,
                       Arg<FA_RowVector, "correction alpha", [MemWrite]>:$correction,
                       OptionalAttr<I64Attr>:$exp2_poly_degree,
                       OptionalAttr<I64Attr>:$exp2_poly_period);
  let assemblyFormat = [{
    $scores `,` $max `,` $sum `->` $correction attr-dict `:` type($scores) `,`
    type($max) `,` type($sum) `->` type($correction)
  }];
  let hasVerifier = 1;
}

def FA_ConditionalSoftmaxUpdateOp : FA_Op<"conditional_softmax_update"> {
  let summary = "online-softmax step that moves the scaling base only past a threshold";
  let description = [{
    FlashAttention-4's conditional rescaling. `base` is the scaling base
    m-bar that `O` and `l` are expressed against; it lags the true running
    max, and moves only when this block's row max exceeds it by more than
    `threshold` (log2 units):

    ```
    mx    = rowmax(S)
    move  = mx - base > threshold          // base = -inf: the first block moves
    base' = move ? mx : base
    b     = (base' == -inf) ? 0 : base'
    P     = exp2(S - b)                    // at most 2^threshold when not moved
    alpha = move ? exp2(base - b) : 1
    l     = alpha * l + rowsum(P)
    ```

    The result is true when any row moved its base: only then does the
    caller need `fa.rescale` of `O` (the pass puts it under an `scf.if`).
    `O / l` and `LSE = ln2 * (base + log2 l)` are exact, as `O` and `l`
    share the base. With `counters` (f64: rows moved, rows skipped, largest
    P seen) the step also records what it did, for instrumentation.

    ```mlir
    %moved = fa.conditional_softmax_update %s, %base, %l -> %alpha {threshold = 8.0 : f32}
        : memref<64x128xf32>, memref<64xf32>, memref<64xf32> -> memref<64xf32>
    ```
  }];
  let arguments = (ins Arg<FA_F32Tile, "scores in, probabilities out",
                           [MemRead, MemWrite]>:$scores,
                       Arg<FA_RowVector, "scaling base", [MemRead, MemWrite]>:$base,
                       Arg<FA_RowVector, "running sum l", [MemRead, MemWrite]>:$sum,
                       Arg<FA_RowVector, "correction alpha", [MemWrite]>:$correction,
                       Arg<Optional<MemRefRankOf<[F64], [1]>>, "counters",
                           [MemRead, MemWrite]>:$counters,
                       F32Attr:$threshold,
                       OptionalAttr<I64Attr>:$exp2_poly_degree,
                       OptionalAttr<I64Attr>:$exp2_poly_period);
  let results = (outs I1:$moved);
  let assemblyFormat = [{
    $scores `,` $base `,` $sum `->` $correction (`counters` `(` $counters^ `:`
    type($counters) `)`)? attr-dict `:` type($scores) `,` type($base) `,`
    type($sum) `->` type($correction)
  }];
  let hasVerifier = 1;
}

def FA_RescaleOp : FA_Op<"rescale"> {
  let summary = "scale each accumulator row: O[r, :] *= factor[r]";
  let description = [{
    Applies a per-row factor to the accumulator, typically the correction
    `alpha = exp2(m_old - m_new)` of `fa.softmax_update`.

    ```mlir
    fa.rescale %acc, %alpha : memref<64x128xf32>, memref<64xf32>
    ```
  }];
  let arguments = (ins Arg<FA_F32Tile, "accumulator O", [MemRead, MemWrite]>:$acc,
                       Arg<FA_RowVector, "per-row factor", [MemRead]>:$factor);
  let assemblyFormat = [{
    $acc `,` $factor attr-dict `:` type($acc) `,` type($factor)
  }];
  let hasVerifier = 1;
}

def FA_PVAccumulateOp : FA_Op<"pv_accumulate"> {
  let summary = "accumulate probabilities times values: O += P V";
  let description = [{
    `O[r, d] += sum_{c < rows(value)} P[r, c] * V[c, d]` in f32. Columns of
    `P` past the value tile's length (a ragged last key block) are ignored.

    With `descale` (fp8 values: V's descale), the sum is multiplied by it:
    `O[r, d] += descale * sum_c P[r, c] * V[c, d]`.

    With `probs_scale = s` (set by `fa-quantize-probs`; e4m3 values only),
    P is rounded as the e4m3 MMA's A operand is: scaled by the power of two
    `s` first, so that small probabilities use e4m3's range instead of
    underflowing (its smallest subnormal is 2^-9), rounded to nearest even
    with saturation at 448, and the product divided by `s` (exactly):
    `O[r, d] += descale / s * sum_c e4m3(s * P[r, c]) * V[c, d]`.
  
    ```mlir
    fa.pv_accumulate %p, %v -> %acc
        : memref<64x128xf32>, memref<?x64xf16, strided<[64, 1], offset: ?>>
          -> memref<64x64xf32>
    ```
  }];
  let arguments = (ins Arg<FA_F32Tile, "probabilities P", [MemRead]>:$probs,
                       Arg<FA_InputTile, "value rows", [MemRead]>:$value,
                       Arg<FA_F32Tile, "accumulator O", [MemRead, MemWrite]>:$acc,
                       Optional<F32>:$descale,
                       OptionalAttr<F32Attr>:$probs_scale);
  let assemblyFormat = [{
    $probs `,` $value `->` $acc (`descale` $descale^)? attr-dict `:` type($probs) `,` type($value)
    `->` type($acc)
  }];
  let hasVerifier = 1;
}

def FA_NormalizeOp : FA_Op<"normalize"> {
  let summary = "divide each accumulator row by its running sum: O /= l";
  let description = [{
    `O[r, :] = l[r] > 0 ? O[r, :] / l[r] : 0`. A row that saw only masked
    scores has `l = 0` and gives zeros, not NaN.

    ```mlir
    fa.normalize %acc, %l : memref<64x128xf32>, memref<64xf32>
    ```
  }];
  let arguments = (ins Arg<FA_F32Tile, "accumulator O", [MemRead, MemWrite]>:$acc,
                       Arg<FA_RowVector, "running sum l", [MemRead]>:$sum);
  let assemblyFormat = [{
    $acc `,` $sum attr-dict `:` type($acc) `,` type($sum)
  }];
  let hasVerifier = 1;
}

def FA_MergePartialsOp : FA_Op<"merge_partials"> {
  let summary = "combine partial attention results over disjoint keys by log-sum-exp";
  let description = [{
    Rows `r` of `S` partial results, each the attention of the same queries
    over a disjoint set of keys (a split-KV chunk, a ring step): `O_s[r, :]`
    normalised by its own sum and `LSE_s[r]` (natural log, `-inf` when the
    chunk had no visible key). With `m = max_s LSE_s[r]`,
    `w_s = exp(LSE_s[r] - m)`:

    ```
    LSE[r] = m + log(sum_s w_s)          (-inf when every LSE_s is -inf)
    O[r, :] = sum_s w_s O_s[r, :] / sum_s w_s        (0 for such a row)
    ```

    which is the attention over the union of the keys. Partials are f32;
    `O` may be f16 or bf16 (rounded once, at the end).

    ```mlir
    fa.merge_partials %o_parts, %lse_parts -> %o, %lse
        : memref<4x?x128xf32, strided<[?, 128, 1], offset: ?>>,
          memref<4x?xf32, strided<[?, 1], offset: ?>>
       -> memref<?x128xf16, strided<[128, 1], offset: ?>>,
          memref<?xf32, strided<[1], offset: ?>>
    ```
  }];
  let arguments = (ins
      Arg<MemRefRankOf<[F32], [3]>, "partial O [S, R, Dv]", [MemRead]>:$partial_out,
      Arg<MemRefRankOf<[F32], [2]>, "partial LSE [S, R]", [MemRead]>:$partial_lse,
      Arg<MemRefRankOf<[F16, BF16, F32], [2]>, "O rows [R, Dv]", [MemWrite]>:$out,
      Arg<Optional<MemRefRankOf<[F32], [1]>>, "LSE [R]", [MemWrite]>:$lse);
  let assemblyFormat = [{
    $partial_out `,` $partial_lse `->` $out (`,` $lse^)? attr-dict `:`
    type($partial_out) `,` type($partial_lse) `->` type($out)
    (`,` type($lse)^)?
  }];
  let hasVerifier = 1;
}

def FA_LogSumExpOp : FA_Op<"logsumexp"> {
  let summary = "natural-log log-sum-exp from base-2 state: ln2 * (m + log2 l)";
  let description = [{
    For `r < size(lse)`: `lse[r] = ln(2) * (m[r] + log2(l[r]))`, and `-inf`
    when `l[r] = 0` (every score of the row masked). `lse` may be shorter
    than the state (ragged last query block).

    ```mlir
    fa.logsumexp %m, %l -> %lse : memref<64xf32>, memref<64xf32> -> memref<?xf32, strided<[1], offset: ?>>
    ```
  }];
  let arguments = (ins Arg<FA_RowVector, "running max m", [MemRead]>:$max,
                       Arg<FA_RowVector, "running sum l", [MemRead]>:$sum,
                       Arg<FA_RowVector, "log-sum-exp", [MemWrite]>:$lse);
  let assemblyFormat = [{
    $max `,` $sum `->` $lse attr-dict `:` type($max) `,` type($sum) `->` type($lse)
  }];
  let hasVerifier = 1;
}

//===----------------------------------------------------------------------===//
// Op level: preparing higher-precision inputs for an fp8 attention.
//===----------------------------------------------------------------------===//

def FA_QuantizeOp : FA_Op<"quantize"> {
  let summary = "quantise [B, H, N, D] rows to e4m3 with descale factors";
  let description = [{
    Per group `g` of elements (the whole tensor when `descale` has rank 0;
    `block` rows of one (batch, head) when it is `[B, H, ceil(N / block)]`):

    ```
    amax_g      = max |x|  over the group
    scale_g     = amax_g > 0 ? 448 / amax_g : 1     (448: e4m3's largest)
    out         = e4m3(x * scale_g)                 (nearest even, saturating)
    descale[g]  = 1 / scale_g
    ```

    so that `out * descale ~ x` with e4m3's 3-bit mantissa relative error
    (2^-4) on every element of the group and the group's largest element
    at e4m3's top. This is how an fp8 attention's inputs are made
    (FlashAttention-3's `q_descale`, torch's `x.abs().amax() / 448`);
    `fa-quantize-fp8` inserts it, `fa-block-quantize` sets `block`.
    Non-finite inputs are not supported (an infinite amax gives scale 0).

    ```mlir
    fa.quantize %x -> %x8, %descale
        : memref<1x4x128x64xf32> -> memref<1x4x128x64xf8E4M3FN>, memref<f32>
    fa.quantize %x -> %x8, %descale {block = 64 : i64}
        : memref<1x4x128x64xf32> -> memref<1x4x128x64xf8E4M3FN>, memref<1x4x2xf32>
    ```
  }];
  let arguments = (ins Arg<MemRefRankOf<[F16, BF16, F32], [4]>, "input",
                           [MemRead]>:$input,
                       Arg<MemRefRankOf<[F8E4M3FN], [4]>, "e4m3 output",
                           [MemWrite]>:$output,
                       Arg<MemRefOf<[F32]>, "descale factors",
                           [MemWrite]>:$descale,
                       OptionalAttr<I64Attr>:$block);
  let assemblyFormat = [{
    $input `->` $output `,` $descale attr-dict `:` type($input) `->`
    type($output) `,` type($descale)
  }];
  let hasVerifier = 1;
}

def FA_HadamardOp : FA_Op<"hadamard"> {
  let summary = "randomised Hadamard transform of [B, H, N, D] rows along D";
  let description = [{
    `y[b, h, n, :] = (x[b, h, n, :] * s) H_D / sqrt(D)`, with `s` the
    `signs` (true: -1, false: +1) and `H_D` the Sylvester Hadamard matrix
    of order `D` (a power of two), `H_D[i, j] = (-1)^popcount(i & j)`. The
    matrix `M = diag(s) H_D / sqrt(D)` is orthogonal (`M M^T = I`), so
    transforming Q and K by the same `M` leaves `Q K^T` unchanged while
    every output element becomes a signed average of all `D` inputs: a
    single large entry (an outlier channel) is spread over the row, and the
    row's amax, which sets the quantisation step, drops from about
    `|outlier|` to about `|outlier| / sqrt(D)` (FlashAttention-3's
    incoherent processing, after QuIP). `fa-incoherent-processing` inserts
    it; computed in f32.

    ```mlir
    fa.hadamard %x -> %y {signs = array<i1: false, true, true, false>}
        : memref<1x4x128x4xf32> -> memref<1x4x128x4xf32>
    ```
  }];
  let arguments = (ins Arg<MemRefRankOf<[F16, BF16, F32], [4]>, "input",
                           [MemRead]>:$input,
                       Arg<MemRefRankOf<[F32], [4]>, "output",
                           [MemWrite]>:$output,
                       DenseBoolArrayAttr:$signs);
  let assemblyFormat = [{
    $input `->` $output attr-dict `:` type($input) `->` type($output)
  }];
  let hasVerifier = 1;
}

include "fa/Dialect/FA/IR/FABackwardOps.td"

#endif // FA_DIALECT_FA_IR_FAOPS_TD
