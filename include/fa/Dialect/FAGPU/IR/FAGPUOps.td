//===- FAGPUOps.td - fagpu operations ----------------------*- tablegen -*-===//

#ifndef FA_DIALECT_FAGPU_IR_FAGPUOPS_TD
#define FA_DIALECT_FAGPU_IR_FAGPUOPS_TD

include "fa/Dialect/FAGPU/IR/FAGPUAttrs.td"
include "mlir/Interfaces/ControlFlowInterfaces.td"
include "mlir/Interfaces/SideEffectInterfaces.td"

// IsolatedFromAbove: score_mod and mask_mod see only their arguments (and
// canonicalisation keeps their constants inside).
def FAGPU_AttentionOp : FAGPU_Op<"attention", [AttrSizedOperandSegments,
    IsolatedFromAbove]> {
  let summary = "an attention computed by one GPU kernel with a typed schedule";
  let description = [{
    The forward attention of the tile level's FA2 loop nest, mapped onto a
    GPU by `fa-map-to-gpu`: one kernel over `Q [B, Hq, Nq, D]`,
    `K [B, Hkv, Nk, D]`, `V [B, Hkv, Nk, Dv]` into `O [B, Hq, Nq, Dv]` and,
    when the loop nest stored it, `LSE [B, Hq, Nq]` (f32).

    The numerics are the tile ops' (`fa.score_tile`, `fa.softmax_update` or
    `fa.conditional_softmax_update`), carried over unchanged: `scale`,
    `causal` and `window` (top-left aligned, or with `bottom_right` aligned
    to the last key: query `i` at position `i + Nk - Nq`; `diagonal_offset`
    adds its keys to that position), `softcap`, and
    FA4's
    `rescale_threshold` (conditional rescaling, log2 units) and
    `exp2_poly_degree` / `exp2_poly_period` (software exp2 for one element
    in `period`). The `schedule` says how the kernel computes it; the
    `fagpu-*` passes rewrite it, `convert-fagpu-to-nvvm` emits it.

    KV caches, as on `fa.attention`: `kv_lengths` `[B]` (i32) gives each
    sequence's key count (bottom-right masks align with it); with `pages`
    (a block table `[B, max_pages]`, i32) K and V are a paged cache
    `[pages, Hkv, page_size, D]` and key `j` of sequence `b` is row
    `j mod page_size` of page `table[b, j / page_size]`.
    A varlen batch, `varlen(%cu_q, %cu_k)`: Q, K, V, O (and LSE) hold the
    sequences packed along N in one batch row; sequence `b` is query rows
    `cu_q[b] ..` and key rows `cu_k[b] ..` up to the next prefix sum.

    FP8 (FlashAttention-3's e4m3 path, sm_90a): Q, K, V in f8E4M3FN with
    `descale(%q_descale, %k_descale, %v_descale)`: f32, one per tensor
    (rank 0), FA3's `[B, Hkv]` each (rank 2, contiguous: a (batch, K/V
    head)'s, which its query heads take too), or per block (FA3's block
    quantisation, `fa-block-quantize`): Q's `[B, Hq, ceil(Nq / block_r)]`
    and K's `[B, Hkv, ceil(Nk / block_c)]` (rank 3, contiguous, the
    schedule's tiles) with V's one per tensor; O in f16 or bf16:
    `S = scale q_descale k_descale Q K^T`,
    `O = v_descale softmax(S) V`. P enters the second MMA as e4m3, scaled by
    `probs_scale` (a power of two) before the cast so that small
    probabilities stay above e4m3's subnormals; O and the sum are divided
    by it after, as `fa.pv_accumulate ... probs_scale` does on the CPU.

    An e4m3 KV cache beside a 16-bit Q (sm_90a): Q and O in f16 or bf16,
    K and V in f8E4M3FN, with `descale(%k_descale, %v_descale)` (per
    tensor or `[B, Hkv]`): `S = scale k_descale Q K^T`,
    `O = v_descale softmax(S) V`, P at Q's precision (no `probs_scale`):
    the kernel converts the cache's tiles to Q's type on chip and runs its
    16-bit MMAs on them.

    Attention sinks (gpt-oss), `sinks(%s)`: one f32 logit per query head
    (natural log), which joins each row's softmax denominator as a key with
    a zero value row (`fa.attention`'s `sinks`): the kernel starts each
    row's state at `m = log2(e) s_h`, `l = 1` (`-inf`: no sink). sm_90a
    with a 16-bit Q, without split-KV or packed query heads.

    Score and mask modifications (FlexAttention's `score_mod` and
    `mask_mod`, from `fa.attention`'s regions, sm_90a with 16-bit inputs):
    `score_mod`'s block takes the score (f32, natural-log units, after
    `scale` and `softcap`), batch, query head, query and key index (`index`,
    a sequence's own rows) and yields the new score; `mask_mod`'s takes the
    four indices and yields an `i1` (false hides the key, on top of the
    built-in masks); both then take one argument per value of
    `captures(...)` (contiguous memrefs of static shape: per-head slopes,
    bias tables, document ids), a tensor of its shape read by
    `tensor.extract` (or sized by `tensor.dim`). Both end in `fagpu.yield`
    and hold arith ops and the math ops the kernel lowers
    (`fagpu::unsupportedModificationOp`). The kernel evaluates them on each
    score of a block (`fagpu.modify_scores`), the captures read from global
    memory (kernel parameters `capture0`, ...).

    ```mlir
    fagpu.attention %q, %k, %v outs(%o, %lse) {
        target = #fagpu.target<sm_90a>, scale = 0.0883883461 : f32, causal,
        rescale_threshold = 8.0 : f32,
        schedule = #fagpu.schedule<block_r = 128, block_c = 128, ...>}
      : memref<?x?x?x128xf16>, memref<?x?x?x128xf16>, memref<?x?x?x128xf16>,
        memref<?x?x?x128xf16>, memref<?x?x?xf32>
    ```
  }];
  let arguments = (ins
    Arg<MemRefRankOf<[F16, BF16, F8E4M3FN], [4]>, "Q", [MemRead]>:$query,
    Arg<MemRefRankOf<[F16, BF16, F8E4M3FN], [4]>, "K", [MemRead]>:$key,
    Arg<MemRefRankOf<[F16, BF16, F8E4M3FN], [4]>, "V", [MemRead]>:$value,
    Arg<MemRefRankOf<[F16, BF16], [4]>, "O", [MemWrite]>:$out,
    Arg<Optional<MemRefRankOf<[F32], [3]>>, "LSE", [MemWrite]>:$lse,
    Arg<Optional<MemRefRankOf<[I32], [1]>>, "key lengths [B]",
        [MemRead]>:$kv_lengths,
    Arg<Optional<MemRefRankOf<[I32], [2]>>, "block table [B, max_pages]",
        [MemRead]>:$block_table,
    Arg<Optional<MemRefRankOf<[I32], [1]>>, "query prefix sums [B + 1]",
        [MemRead]>:$cu_seqlens_q,
    Arg<Optional<MemRefRankOf<[I32], [1]>>, "key prefix sums [B + 1]",
        [MemRead]>:$cu_seqlens_k,
    Arg<Optional<MemRefRankOf<[F32], [0, 2, 3]>>, "Q's descale", [MemRead]>:$q_descale,
    Arg<Optional<MemRefRankOf<[F32], [0, 2, 3]>>, "K's descale", [MemRead]>:$k_descale,
    Arg<Optional<MemRefRankOf<[F32], [0, 2]>>, "V's descale", [MemRead]>:$v_descale,
    Arg<Optional<MemRefRankOf<[F32], [1]>>, "sink logits [Hq]",
        [MemRead]>:$sinks,
    Arg<Variadic<AnyStaticShapeMemRef>, "score_mod / mask_mod captures",
        [MemRead]>:$captures,
    FAGPU_TargetAttr:$target,
    F32Attr:$scale,
    UnitAttr:$causal,
    OptionalAttr<I64Attr>:$window,
    OptionalAttr<F32Attr>:$softcap,
    OptionalAttr<F32Attr>:$rescale_threshold,
    OptionalAttr<I64Attr>:$exp2_poly_degree,
    OptionalAttr<I64Attr>:$exp2_poly_period,
    FAGPU_ScheduleAttr:$schedule,
    UnitAttr:$bottom_right,
    OptionalAttr<F32Attr>:$probs_scale,
    OptionalAttr<I64Attr>:$diagonal_offset);
  let assemblyFormat = [{
    $query `,` $key `,` $value
    (`kv_lengths` `(` $kv_lengths^ `:` type($kv_lengths) `)`)?
    (`pages` `(` $block_table^ `:` type($block_table) `)`)?
    (`varlen` `(` $cu_seqlens_q^ `,` $cu_seqlens_k `:` type($cu_seqlens_q)
     `,` type($cu_seqlens_k) `)`)?
    custom<Descales>($q_descale, $k_descale, $v_descale, type($q_descale),
                     type($k_descale), type($v_descale))
    (`sinks` `(` $sinks^ `:` type($sinks) `)`)?
    (`captures` `(` $captures^ `:` type($captures) `)`)?
    `outs` `(` $out (`,` $lse^)? `)` attr-dict `:`
    type($query) `,` type($key) `,` type($value) `,` type($out)
    (`,` type($lse)^)?
    (`score_mod` $score_mod^)? (`mask_mod` $mask_mod^)?
  }];
  let regions = (region MaxSizedRegion<1>:$score_mod,
                        MaxSizedRegion<1>:$mask_mod);
  let hasVerifier = 1;
  let extraClassDeclaration = [{
    int64_t getHeadDim() { return getQuery().getType().getDimSize(3); }
    int64_t getValueHeadDim() { return getValue().getType().getDimSize(3); }
    /// Whether O is bf16 (else f16); e4m3 inputs take either.
    bool isBF16() { return getOut().getType().getElementType().isBF16(); }
    /// Whether Q, K and V are e4m3 (FP8).
    bool isFP8() {
      return isa<Float8E4M3FNType>(getQuery().getType().getElementType());
    }
    /// Whether K and V are e4m3 beside a 16-bit Q (an FP8 KV cache).
    bool hasFP8KeyValues() {
      return !isFP8() &&
             isa<Float8E4M3FNType>(getKey().getType().getElementType());
    }
    /// True with a score_mod or mask_mod region.
    bool hasModifications() {
      return !getScoreMod().empty() || !getMaskMod().empty();
    }
    /// Rows per page of a paged K/V cache; 0 when K/V are contiguous.
    int64_t getPageSize() {
      return getBlockTable() ? getKey().getType().getDimSize(2) : 0;
    }
    /// The FA4 conditional-rescaling threshold, or -1 when it is off.
    double getRescaleThresholdOrOff() {
      if (auto t = getRescaleThreshold())
        return t->convertToDouble();
      return -1.0;
    }
  }];
}

def FAGPU_AttentionBackwardOp : FAGPU_Op<"attention_backward"> {
  let summary = "the gradients of an attention, computed by one GPU kernel";
  let description = [{
    The main loop of the tile level's FA2 backward nest
    (`fa-lower-fa2-backward`), mapped onto a GPU by `fa-map-to-gpu`: one CTA
    per (K/V block of `block_c` keys, K/V head, batch) visits every query
    block of `block_r` rows of the head's `Hq / Hkv` query heads and writes
    its `dK` and `dV` rows once; every CTA adds its part of `dQ` into the
    f32 accumulator `dq_accum [B, Hq, Nq, D]`:

    ```
    S^T = scale K Q^T (masked)      P^T = exp(S^T - LSE)   (LSE per column)
    dV += P^T dO                    dP^T = V dO^T
    dS^T = P^T o (dP^T - row_dots)  dK += scale dS^T Q
    dq_accum += scale dS K          (atomic adds)
    ```

    `row_dots [B, Hq, Nq]` (f32) is `D_i = rowsum(dO o O)`, the backward's
    preprocess, computed before this op (the tile level's `fa.row_dot`
    nest), and `dq_accum` is zero before it and converted to dQ's type
    after. Q, K, V, dO, dK and dV are one 16-bit type, contiguous
    `[B, H, N, D]`; `LSE [B, Hq, Nq]` is the forward's (natural log). Masks,
    as on `fagpu.attention`: `causal` and `window` (`|i' - j| < w`), top-left
    or with `bottom_right` aligned to the last key (query `i` at key
    position `i' = i + Nk - Nq`), `diagonal_offset` adding its keys to that
    position; a CTA visits only the query blocks its keys are visible
    from.

    `deterministic`: the CTAs add into a query block's rows of `dq_accum`
    in a fixed order of their key blocks, the highest first
    (FlashAttention-3's semaphores: one i32 a (batch, query head, query
    block), zero before the launch, the kernel's `dq_semaphores`
    parameter), so that dQ is the same bits every run; CTA x takes key
    block ceil(Nk / block_c) - 1 - x, so it waits only for CTAs launched
    before it. `vector_reductions` (a chip of sm_90 or later): dQ's adds two
    columns at a time (`red.global.add.v2.f32`).

    ```mlir
    fagpu.attention_backward %q, %k, %v, %lse, %do, %row_dots, %dq_accum
        outs(%dk, %dv) {target = #fagpu.target<sm_80>, scale = 0.125 : f32,
        causal, block_r = 64 : i64, block_c = 64 : i64}
      : memref<?x?x?x64xf16>, memref<?x?x?x64xf16>, memref<?x?x?x64xf16>,
        memref<?x?x?xf32>, memref<?x?x?x64xf16>, memref<?x?x?xf32>,
        memref<?x?x?x64xf32>, memref<?x?x?x64xf16>, memref<?x?x?x64xf16>
    ```
  }];
  let arguments = (ins
    Arg<MemRefRankOf<[F16, BF16], [4]>, "Q", [MemRead]>:$query,
    Arg<MemRefRankOf<[F16, BF16], [4]>, "K", [MemRead]>:$key,
    Arg<MemRefRankOf<[F16, BF16], [4]>, "V", [MemRead]>:$value,
    Arg<MemRefRankOf<[F32], [3]>, "LSE", [MemRead]>:$lse,
    Arg<MemRefRankOf<[F16, BF16], [4]>, "dO", [MemRead]>:$grad_out,
    Arg<MemRefRankOf<[F32], [3]>, "rowsum(dO o O)", [MemRead]>:$row_dots,
    Arg<MemRefRankOf<[F32], [4]>, "dQ's f32 accumulator",
        [MemRead, MemWrite]>:$dq_accum,
    Arg<MemRefRankOf<[F16, BF16], [4]>, "dK", [MemWrite]>:$grad_key,
    Arg<MemRefRankOf<[F16, BF16], [4]>, "dV", [MemWrite]>:$grad_value,
    FAGPU_TargetAttr:$target,
    F32Attr:$scale,
    UnitAttr:$causal,
    OptionalAttr<I64Attr>:$window,
    UnitAttr:$bottom_right,
    OptionalAttr<I64Attr>:$diagonal_offset,
    I64Attr:$block_r,
    I64Attr:$block_c,
    UnitAttr:$deterministic,
    UnitAttr:$vector_reductions);
  let assemblyFormat = [{
    $query `,` $key `,` $value `,` $lse `,` $grad_out `,` $row_dots `,`
    $dq_accum `outs` `(` $grad_key `,` $grad_value `)` attr-dict `:`
    type($query) `,` type($key) `,` type($value) `,` type($lse) `,`
    type($grad_out) `,` type($row_dots) `,` type($dq_accum) `,`
    type($grad_key) `,` type($grad_value)
  }];
  let hasVerifier = 1;
  let extraClassDeclaration = [{
    int64_t getHeadDim() { return getQuery().getType().getDimSize(3); }
    bool isBF16() { return getQuery().getType().getElementType().isBF16(); }
  }];
}

def FAGPU_YieldOp : FAGPU_Op<"yield", [Pure, Terminator, ReturnLike,
    ParentOneOf<["AttentionOp", "ModifyScoresOp"]>]> {
  let summary = "the value of a score_mod (f32) or mask_mod (i1) region";
  let arguments = (ins AnyType:$value);
  let assemblyFormat = "$value attr-dict `:` type($value)";
}

include "fa/Dialect/FAGPU/IR/FAGPUWarpgroupOps.td"
include "fa/Dialect/FAGPU/IR/FAGPUBlackwellOps.td"
include "fa/Dialect/FAGPU/IR/FAGPUBackwardOps.td"

#endif // FA_DIALECT_FAGPU_IR_FAGPUOPS_TD
