//===- Passes.td - fa dialect passes -----------------------*- tablegen -*-===//

#ifndef FA_DIALECT_FA_TRANSFORMS_PASSES_TD
#define FA_DIALECT_FA_TRANSFORMS_PASSES_TD

include "mlir/Pass/PassBase.td"

def FASkipMaskedBlocks : Pass<"fa-skip-masked-blocks", "func::FuncOp"> {
  let summary = "Skip the block pairs a mask_mod hides entirely";
  let description = [{
    Block sparsity from a `mask_mod` at tile level: each `fa.score_tile`
    with a `mask_mod`, in the body of its block loop (a loop order's K/V
    block or query block loop), gets its block pair tested before the
    body's first load, and the body runs only where some key may be
    visible. The test is the region evaluated over the block's index
    ranges (`i` in `[q0, q0 + rows)`, `j` in `[k0, k0 + cols)`) in interval
    arithmetic, emitted as IR: `addi`/`subi`, `muli` and `floordivsi`/
    `divsi`/`divui` by a constant, `minsi`/`maxsi`, casts and `select` on
    intervals; `cmpi` to "can be true" / "can be false"; `andi`/`ori`/
    `xori`/`select` on those. Sound: a pair is skipped only if no entry can
    be visible, and a skipped pair contributes nothing (its P is 0: the
    forward's state and the backward's gradients are unchanged). A region
    whose value the intervals cannot bound (it reads a capture: document
    ids) is left as it is: such masks need a block mask from the data. A
    pair where the mask cannot be false takes the tile without its
    `mask_mod` (chosen at run time by the same intervals).

    Causal, windowed and prefix-LM masks written as regions, block-diagonal
    ones (`i // c == j // c`) and their conjunctions are bounded.
  }];
  let dependentDialects = ["::mlir::scf::SCFDialect",
                           "::mlir::arith::ArithDialect",
                           "::mlir::memref::MemRefDialect"];
}

def FAFoldModifications : Pass<"fa-fold-modifications", "func::FuncOp"> {
  let summary = "Fold score_mod/mask_mod regions that spell a built-in into its attribute";
  let description = [{
    A FlexAttention-style attention often spells a built-in as a region:
    the causal mask as `mask_mod { j <= i }`, a softcap as
    `score_mod { c * tanh(s / c) }`. The loop orders and the CPU path run
    regions, but the GPU kernels do not (yet), and the built-in is cheaper
    everywhere (causal skips whole K/V blocks). One pattern per form, on an
    `fa.attention` or `fa.attention_backward` (the same regions and
    attributes; its varlen batches keep their regions) without the
    attribute already:

    * `mask_mod` yielding `cmpi sle/ule %j, %i` or `cmpi sge/uge %i, %j`
      (the key at or before the query, top-left, in a sequence's own
      indices) -> `causal` (not on a KV cache, pages or a varlen batch,
      whose attributes carry alignments of their own);
    * `mask_mod` yielding that and `i - j <= c` (or `< c + 1`), signed:
      FlexAttention's sliding window -> `causal`, `window = c + 1`;
    * `mask_mod` yielding `true` -> no mask_mod;
    * `score_mod` yielding `c * tanh(s / c)` (the same positive constant c;
      `s * (1 / c)` also) -> `softcap = c` (the op applies softcap before
      score_mod, so with no score_mod left the two agree);
    * `score_mod` yielding its score -> no score_mod;
    * captures no region reads any more (both regions gone) -> dropped.

    Anything else stays a region. The CPU and GPU pipelines run this pass
    first.
  }];
}

def FAAttentionToBuffers : Pass<"fa-attention-to-buffers", "func::FuncOp"> {
  let summary = "Rewrite tensor-form fa.attention into its memref form";
  let description = [{
    The loop-order passes work on buffers, as a kernel does. This pass gives
    each tensor-form `fa.attention` buffer operands
    (`bufferization.to_buffer`), freshly allocated destinations and
    `bufferization.to_tensor` results, so that the rest of the function can
    be bufferized by `one-shot-bufferize` afterwards.
  }];
  let dependentDialects = ["::mlir::bufferization::BufferizationDialect",
                           "::mlir::memref::MemRefDialect"];
}

def FABufferizeAroundAttention
    : Pass<"fa-bufferize-around-attention", "ModuleOp"> {
  let summary = "one-shot-bufferize the code around memref-form fa.attention ops";
  let description = [{
    `one-shot-bufferize{bufferize-function-boundaries}` with every
    `fa.attention` and what its regions hold left as they are: after
    `fa-attention-to-buffers` the op is in memref form, and its
    `score_mod`/`mask_mod` regions read their captures as tensors of values
    (`tensor.extract`), which are not buffers to bufferize; the loop orders
    copy them into `fa.score_tile`, whose lowering reads the captured
    memrefs.
  }];
  let dependentDialects = ["::mlir::bufferization::BufferizationDialect",
                           "::mlir::memref::MemRefDialect"];
}

def FATile : Pass<"fa-tile", "func::FuncOp"> {
  let summary = "Choose the tile sizes (B_r, B_c) of every fa.attention";
  let description = [{
    Sets `block_r` and `block_c` on each `fa.attention`.

    Default rule (FlashAttention-1): with an on-chip budget of `M` elements
    (`sram-budget` bytes divided by the input element size),
    `B_c = ceil(M / 4d)` and `B_r = min(ceil(M / 4d), d)`. The rule is
    asymptotic; when its tiles overflow the budget under the exact
    footprint below, `B_c` and then `B_r` are halved until they fit. Tiles
    are clamped to static sequence lengths.

    Footprint in bytes, what one block step keeps on chip:
    `e * (B_r*D + B_c*D + B_c*Dv) + 4 * (B_r*B_c + B_r*Dv + 3*B_r)`
    (Q_i, K_j, V_j in the input type of `e` bytes; S_ij, O_i, m, l, alpha
    in f32).

    `block-r` / `block-c` override the rule; tiles that do not fit the
    budget are then an error. The budget comes from `sram-budget`, else from
    an integer `fa.sram_budget` attribute on the enclosing module, else
    163840 bytes.

    The pass knows no GPU: the GPU path tiles with `fagpu-tile`, which
    takes a target's kernel tiles from its measured defaults.
  }];
  let options = [
    Option<"sramBudget", "sram-budget", "int64_t", /*default=*/"0",
           "On-chip memory budget in bytes (0: the module's fa.sram_budget "
           "attribute, else 163840)">,
    Option<"blockR", "block-r", "int64_t", /*default=*/"0",
           "Query rows per tile B_r (0: from the FlashAttention-1 rule)">,
    Option<"blockC", "block-c", "int64_t", /*default=*/"0",
           "Key/value rows per tile B_c (0: from the FlashAttention-1 rule)">,
  ];
}

def FALowerFA1 : Pass<"fa-lower-fa1", "func::FuncOp"> {
  let summary = "Lower fa.attention to the FlashAttention-1 (2022) loop order";
  let description = [{
    K/V blocks in the outer loop, query blocks in the inner loop, as in
    Algorithm 1 of the FlashAttention paper. `O`, `l` and `m` live in memory
    (`O` in the output, `l` and `m` in scratch buffers): every inner step
    loads `Q_i, O_i, l_i, m_i`, applies one online-softmax step with the
    tile ops, normalises `O_i` and writes `O_i, l_i, m_i` back. Batch and
    heads are an `scf.forall`. Requires the memref form and tile sizes.
  }];
  let dependentDialects = ["::mlir::scf::SCFDialect",
                           "::mlir::affine::AffineDialect",
                           "::mlir::linalg::LinalgDialect",
                           "::mlir::memref::MemRefDialect",
                           "::mlir::arith::ArithDialect"];
}

def FALowerFA2 : Pass<"fa-lower-fa2", "func::FuncOp"> {
  let summary = "Lower fa.attention to the FlashAttention-2 (2023) loop order";
  let description = [{
    One parallel `scf.forall` iteration per (batch, head, query block): load
    `Q_i` once, keep `m, l, O` local, stream the K/V blocks in an inner
    `scf.for`, normalise once at the end and write `O_i` and
    `LSE_i = m + log l`. Under a causal mask the inner loop stops at the
    diagonal block (blocks wholly above it are skipped); under a window it
    also starts at the first block the window reaches. Requires the memref
    form and tile sizes.
  }];
  let dependentDialects = ["::mlir::scf::SCFDialect",
                           "::mlir::affine::AffineDialect",
                           "::mlir::linalg::LinalgDialect",
                           "::mlir::memref::MemRefDialect",
                           "::mlir::arith::ArithDialect"];
}

def FALowerFA2Backward : Pass<"fa-lower-fa2-backward", "func::FuncOp"> {
  let summary = "Lower fa.attention_backward to FlashAttention-2's backward loop order";
  let description = [{
    The forward saved O and its log-sum-exp L; the backward recomputes P
    from L, block by block, and never holds it whole:

    ```
    D = rowsum(dO o O)                             fa.row_dot, every query block
    forall (b, h_kv):                               parallel over K/V heads
      for j:                                        K/V blocks, in order
        K_j, V_j on chip; dK_j = dV_j = 0 (f32)
        for each query head h of h_kv, query block i:
          S = fa.score_tile(Q_i, K_j)               masked, capped, base 2
          P = fa.recompute_probs(S, L_i)            exp2(S - log2(e) L_i)
          fa.grad_values  P, dO_i  -> dV_j          dV_j += P^T dO_i
          fa.grad_probs   dO_i, V_j -> dP           dP = dO_i V_j^T
          fa.grad_scores  P, D_i(, S) -> dS         P o (dP - D_i) o cap'
          fa.grad_keys    dS, Q_i -> dK_j           += scale dS^T Q_i
          fa.grad_queries dS, K_j -> dQ_i           += scale dS K_j (f32)
        write dK_j, dV_j (their types)
    dQ = dQ (f32, in its type)
    ```

    dK and dV of a K/V head sum its query heads' terms (grouped-query
    attention); dQ accumulates across K/V blocks in f32 (in place when dQ
    is f32). Blocks a mask hides contribute P = 0. Tiles are the op's
    `block_r` / `block_c` or the options'.
  }];
  let options = [
    Option<"blockR", "block-r", "int64_t", /*default=*/"64",
           "Query rows per block where the op gives none">,
    Option<"blockC", "block-c", "int64_t", /*default=*/"64",
           "Keys per block where the op gives none">
  ];
  let dependentDialects = ["::mlir::scf::SCFDialect",
                           "::mlir::affine::AffineDialect",
                           "::mlir::linalg::LinalgDialect",
                           "::mlir::memref::MemRefDialect",
                           "::mlir::arith::ArithDialect"];
}

def FAIOReport : Pass<"fa-io-report", "ModuleOp"> {
  let summary = "Report predicted and loop-counted HBM traffic of FA1 and FA2";
  let description = [{
    For every tiled `fa.attention` (after `fa-tile`), prints the HBM traffic
    in elements predicted for standard attention, FlashAttention-1 and
    FlashAttention-2 with every constant spelled out, and the traffic that
    the loops generated by `fa-lower-fa1` and `fa-lower-fa2` actually imply:
    the elements moved by each access to memory outside the tiles, times the
    trip counts of the loops around it. The IR is left unchanged.

    Ragged tails are counted at the full tile size (an upper bound), and a
    loop whose trip count is not a constant (causal skipping) makes the
    count unavailable.
  }];
  let options = [
    Option<"outputFile", "output", "std::string", /*default=*/"\"-\"",
           "Where to write the report ('-' for stdout)">
  ];
  let dependentDialects = ["::mlir::scf::SCFDialect",
                           "::mlir::affine::AffineDialect",
                           "::mlir::linalg::LinalgDialect",
                           "::mlir::memref::MemRefDialect",
                           "::mlir::arith::ArithDialect"];
}

def FAConditionalRescale : Pass<"fa-conditional-rescale", "ModuleOp"> {
  let summary = "FlashAttention-4 conditional softmax rescaling";
  let description = [{
    Rewrites each `fa.softmax_update` into `fa.conditional_softmax_update`:
    the state operand that held the running max becomes the scaling base
    m-bar, which moves only when a block's row max exceeds it by more than
    `threshold` (log2 units; 8 = log2 256 as in FA4). The `fa.rescale` of
    the accumulator by the correction then runs under an `scf.if` on
    whether any row moved; most blocks after the first few skip it.
    Unrescaled terms are at most 2^threshold times their final scale, which
    f32 accumulators absorb; `O / l` and the LSE stay exact because `O` and
    `l` share the base. Works on both loop orders and every backend that
    lowers the tile ops.

    With `instrument`, every step adds to a module-level
    `memref.global @fa_rescale_counters : memref<3xf64>` the rows that
    moved, the rows that skipped, and the largest P seen.
  }];
  let options = [
    Option<"threshold", "threshold", "double", /*default=*/"8.0",
           "Move the base only when the row max exceeds it by more than this "
           "(log2 units, >= 0)">,
    Option<"instrument", "instrument", "bool", /*default=*/"false",
           "Count rescales performed and skipped in @fa_rescale_counters">
  ];
  let dependentDialects = ["::mlir::scf::SCFDialect",
                           "::mlir::memref::MemRefDialect"];
}

def FAPackGQA : Pass<"fa-pack-gqa", "func::FuncOp"> {
  let summary = "Pack the query heads that share a K/V head into one matrix's rows at decode";
  let description = [{
    Grouped-query decode (one query per sequence, `G = Hq / Hkv > 1`) gives
    each query head its own tile, so every K/V block is read `G` times and
    a tile has one useful row. This pass rewrites a memref-form
    `fa.attention` whose Q is `[B, Hq, 1, D]` (static `Nq = 1`, `Hq` and
    `Hkv`) into the same attention over views of the same memory:

    ```
    Q [B, Hq, 1, D]   -> [B, Hkv, G, D]    (query head h G + g: row g of matrix h)
    O [B, Hq, 1, Dv]  -> [B, Hkv, G, Dv]
    LSE [B, Hq, 1]    -> [B, Hkv, G]
    ```

    (`memref.expand_shape` then `memref.collapse_shape`), a multi-head
    attention of `G` queries: each K/V block is then read once per K/V
    head, which `fa-io-report` counts, and a tile holds `G` rows. The rule
    is `fa::model::decodeHeadsPerTile` (`fa/Model/PackGQA.h`), which the
    runtimes apply to launches of precompiled kernels.

    Exact where no mask tells the rows apart: a bottom-right causal mask
    (with any `diagonal_offset`) hides nothing from the one query, the last
    key position, and is dropped; a window, a top-left causal mask, varlen
    batches and per-block descales leave the attention as it is. Runs
    before `fa-split-kv`, whose chunk count then sees the packed tiles.
  }];
  let dependentDialects = ["::mlir::memref::MemRefDialect"];
}

def FASplitKV : Pass<"fa-split-kv", "func::FuncOp"> {
  let summary = "Split-KV (flash-decoding): cut each attention's keys into chunks";
  let description = [{
    Sets `kv_splits` on every `fa.attention`: `fa-lower-fa2` then computes
    each query block's K/V chunks in parallel into partial `(O_s, LSE_s)` and
    combines them with `fa.merge_partials`. Worth it when `B * Hq * Nq` is too
    small to fill the GPU (decode, one query per sequence) and `Nk` is long.

    `splits=auto`: with static shapes, `mlir::fa::model::autoKVSplits` (KVChunk.h, the
    rule the runtimes apply per launch) on `B * Hq * ceil(Nq / 128)` tiles
    of `ceil(Nk / 128)` blocks, `sms` SMs and `dram-gbps` GB/s of DRAM
    bandwidth: the fewest chunks that fill whole waves of one CTA per SM to
    within 5%; without static shapes, or when the query blocks already fill
    80% of the SMs, 1 (no split), except decode tiles under four waves on a
    GPU of at least 30 GB/s per SM: 2.
    `splits=N` sets N. The CPU path and the sm_90a kernel execute it (one
    kernel: the tile's last chunk merges); sm_80 and sm_100a refuse it.
  }];
  let options = [
    Option<"splits", "splits", "std::string", /*default=*/"\"auto\"",
           "auto or a chunk count in [1, 1024]">,
    Option<"sms", "sms", "int64_t", /*default=*/"132",
           "Streaming multiprocessors of the target (auto): 132 on the H200">,
    Option<"dramGBps", "dram-gbps", "int64_t", /*default=*/"4800",
           "DRAM bandwidth of the target in GB/s (auto): 4800 on the H200, "
           "0 for unknown">
  ];
}

def FARingAttention : Pass<"fa-ring-attention", "func::FuncOp"> {
  let summary = "Context parallelism: an attention as the ring steps of its sequence shards";
  let description = [{
    Rewrites every memref-form self-attention (`Nq = Nk = N`, static shapes)
    into the work of ring (context-parallel) attention over `world` ranks,
    as ordinary IR: each rank holds a shard of the sequence's rows of Q, K,
    V and O; at step `s` (0 .. world - 1) rank `r` attends its queries to
    the K/V shard of rank `(r - s) mod world` (the ring passes K/V on), and
    the partial results merge by log-sum-exp (`fa.merge_partials`).

    The sequence is cut into chunks of `c` rows: `layout=contiguous` gives
    rank `r` chunk `r` of `world` (`c = N / world`); `layout=zigzag`
    (causal load balancing) chunks `r` and `2 world - 1 - r` of `2 world`
    (`c = N / (2 world)`). Each (query chunk, key chunk) pair of a step is a
    partial `fa.attention` on `memref.subview`s with the attention's scale
    and softcap: without `causal` every pair is whole; with it a key chunk
    before the query chunk is whole, the chunk itself is top-left causal
    (its diagonal block), and a key chunk after it is fully masked and
    skipped. Under `zigzag` every rank then does the same work at every
    step (two chunk pairs' worth); under `contiguous` rank `r` works at
    steps 0 .. r only. Each partial O is rounded to O's element type (as a
    kernel writes it) and widened to f32 for the merge; each query chunk's
    partials merge in step order into O's and LSE's rows. Every partial
    attention carries `fa.ring_step = {rank, step, source, query_chunk,
    key_chunk}`.

    `rank=-1` (default) writes every rank's work, so the function computes
    the whole attention (the ring simulated in one function: fa-run checks
    it against the reference); `rank=R` writes rank R's only (its rows of O
    and LSE), what one device of the ring runs. Windows, bottom-right
    alignment with Nq != Nk, KV caches and varlen batches are refused.
  }];
  let options = [
    Option<"world", "world", "int64_t", /*default=*/"2",
           "Ranks of the ring, in [1, 1024]">,
    Option<"rank", "rank", "int64_t", /*default=*/"-1",
           "The rank whose work to write (-1: every rank's)">,
    Option<"layout", "layout", "std::string", /*default=*/"\"zigzag\"",
           "Sequence sharding: zigzag or contiguous">
  ];
  let dependentDialects = ["::mlir::memref::MemRefDialect",
                           "::mlir::linalg::LinalgDialect",
                           "::mlir::arith::ArithDialect"];
}

def FAPolyExp2 : Pass<"fa-poly-exp2", "func::FuncOp"> {
  let summary = "FlashAttention-4 partial software exp2 on FMA units";
  let description = [{
    Marks every online-softmax step so that one exponential in `period`
    (the elements of score columns c with c mod period = 0) is computed in
    software: exp2(y) = 2^floor(y) * p(y - floor(y)), the integer part
    added to the float's exponent bits, the fraction by a minimax
    polynomial of `degree` evaluated with FMAs; the others stay on the
    hardware exp2 (MUFU ex2 on GPUs), so both units share the load. y is
    clamped to [-126, 127] first, and y < -126 (masked scores, -inf) gives
    0 exactly.

    Coefficients (relative-error minimax on [0, 1), by Lawson's
    iteratively reweighted least squares on 4001 Chebyshev points, rounded
    to f32; max relative error of the f32 polynomial):
    degree 2: 1.7e-3, 3: 7.5e-5, 4: 2.6e-6, 5: 9.0e-8.
  }];
  let options = [
    Option<"degree", "degree", "int64_t", /*default=*/"3",
           "Degree of the polynomial (2 to 5)">,
    Option<"period", "period", "int64_t", /*default=*/"8",
           "Emulate one exponential in this many (1: all)">
  ];
}

def FARaiseAttention : Pass<"fa-raise-attention", "func::FuncOp"> {
  let summary = "Raise attention written in linalg to fa.attention";
  let description = [{
    Recognises, on tensors, attention as front ends lower it (torch-mlir,
    torch.export of Hugging Face models, StableHLO -> linalg):

    ```
    %s  = Q K^T: linalg.matmul (rank 2), linalg.batch_matmul (rank 3, with
          or without transposed-B indexing maps: MLIR 22's spelling of
          batch_matmul_transpose_b) or an einsum-style linalg.generic
          (rank 2 to 4); each input possibly arith.extf'ed in the body
          (f16 x f16 -> f32). Operands read in any dim order (JAX's einsums
          on [B, N, H, D]) or through transposes (linalg.transpose, copy
          generics) of any permutation. torch-mlir's 4-D matmul:
          collapse_shape [B, H, N, D] -> [B*H, N, D], batch_matmul,
          expand_shape back.
    %s1 = elementwise generics, in any order and number, evaluated
          symbolically: type conversions (extf / truncf), x * c or x / c
          (c a positive constant, possibly an f64 truncated in the body),
          and masks keeping the scores where a conjunction of linear
          conditions on the query index i and the key index j holds:
          select(cond, x, -inf) / masked_fill(not cond, -inf) / x + M with
          M 0 where visible and -inf (or below f16's lowest, as
          torch.finfo(dtype).min) elsewhere; cond / M from linalg.index
          comparisons (index_cast, subi, cmpi, xori, andi), constant tensors
          (any rank, broadcast, sliced; classified by diagonal j - i) or
          generics computing them (torch's ones().tril(), logical_not,
          bias == 0). The visible set must be causal (j <= i), a window
          (|i - j| < w), or both, on the scores' static extent, aligned to
          the top-left diagonal or (Nk > Nq, a KV cache) the bottom-right
          one (j <= i + Nk - Nq: `bottom_right`); and at most one additive
          bias: x + B with B a tensor that is not a constant and does not
          come from Q K^T (an argument: a relative-position bias, an
          additive padding mask), read at the scores' position or 0 on
          broadcast dims, possibly extended to the scores' type, possibly
          in one body with a scale of the scores (x * c + B); and at
          most one boolean mask tensor M (not a constant, not from Q K^T;
          e.g. `attention_mask > 0`): select(M, x, -inf) or masked_fill's
          select(M, -inf, x), M possibly negated, read the same way. A
          row M hides entirely gets O = 0 and LSE = -inf, as fa.attention
          defines it, where the program's softmax gives NaN.
    %p  = linalg.softmax over the last dim, or decomposed:
          m = rowmax(x) (generic or linalg.reduce, maxnumf/maximumf);
          e = exp(x - m); l = rowsum(e) from zero; p = e / l (row stats
          [.., N] or torch-mlir's keep-dim [.., N, 1]); then conversions
    %o  = P V, a contraction as above; then possibly expand_shape back to
          4-D and a truncf of an f32 accumulator to the inputs' type
    ```

    and replaces `%o` (or its truncation) by `fa.attention` with the
    product of all the scales (on the scores, folded into Q or K, e.g.
    sqrt(s) on each as PyTorch's math SDPA does; 1.0 when there is none),
    `causal` and `window`, a bias as a `score_mod` region adding
    c * B[...] (c the scales between the add and the softmax) to the
    score and a boolean mask as a `mask_mod` region reading M[...]
    (negated for masked_fill), B and M in its `captures`. The raised op takes Q, K, V in their element
    type (f16, bf16, f32) whatever the contractions accumulate in: it
    accumulates in f32, as the kernels do. 2-D and 3-D operands are
    expanded to `[1, 1, N, D]` / `[1, BH, N, D]` (`[B, H, N, D]` when they
    were collapsed from 4-D); an operand read in another order gets a
    linalg.transpose, and an O written in another order is transposed
    back. Grouped-query layouts become fa.attention's
    Hkv < Hq: K/V read through `h floordiv G` in the contraction maps, or
    materialised by torch's repeat_kv / repeat_interleave (a
    linalg.broadcast or copy generic to [B, Hkv, G, N, D] collapsed to
    [B, Hkv*G, N, D] or [B*Hkv*G, N, D], or a copy generic reading
    `h floordiv G`), are replaced by the Hkv-head tensors.

    Every step is checked for what it computes, not only for its op kinds:
    indexing maps, the operands of each body op and what the body yields;
    contractions and the row sum must accumulate from zero. It does not
    fire on softmax over another axis, masks on indices that are not
    causal or a window (strictly-lower, asymmetric bands, index masks
    depending on batch or head; a boolean tensor is raised into mask_mod
    instead), constant additive masks other than 0 / -inf (e.g. -10000), contractions over the wrong
    dims, two biases or two boolean masks, a bias or mask inside a
    softcap's tanh (score_mod applies after the cap), "softmax plus one", K and V grouped
    differently, an O kept in f32 from f16 inputs, or a P V whose left
    operand is not a softmax of Q K^T
    (test/Transforms/raise-attention-soundness.mlir,
    raise-attention-frontends.mlir).

    Each candidate (a contraction whose left operand is softmax-like:
    linalg.softmax, or a division by a row reduction) that is not raised
    gets a remark at its location naming the first condition that failed,
    e.g. `not raised: the mask is not causal or a window: visible where
    j - i <= -1`.

    Front ends emit the pattern wrapped in arithmetic the matcher would have
    to see through: torch-mlir lowers `aten.sub`/`aten.add` with their
    `alpha` operand as a multiply by a converted constant 1 (`x - m *
    sitofp(1)`) and may compute the scale by scalar arithmetic
    (`1 / sqrt(D)` on constants). With `canonicalize` (the default), a
    function holding candidates first gets the arith and math dialects'
    canonicalisations and folds, then `cse`, which fold both, so such IR
    raises as emitted (linalg's own canonicalisations are not run: they
    infer static shapes from constants and would change what a remark says).
    StableHLO legalised to linalg materialises `broadcast_in_dim` as a copy
    generic (a row statistic read through `(d0, .., d{r-2}, 0)` after a
    keep-dim reshape, a splat scale, an i1 mask); the cleanup also makes
    each elementwise generic read such a copy's source through the composed
    map, as torch-mlir spells it. A reduction generic may yield more than
    one result (torch-mlir's `aten.max.dim`: the max and its argmax); the
    max is matched by its own yielded value.
  }];
  let options = [
    Option<"canonicalize", "canonicalize", "bool", /*default=*/"true",
           "Fold scalar arithmetic (arith/math canonicalisations), read "
           "materialised broadcasts' sources and CSE a function with "
           "candidates before matching">
  ];
  let dependentDialects = ["::mlir::fa::FADialect",
                           "::mlir::linalg::LinalgDialect",
                           "::mlir::tensor::TensorDialect",
                           "::mlir::arith::ArithDialect",
                           "::mlir::math::MathDialect"];
}

//===----------------------------------------------------------------------===//
// FP8 (FlashAttention-3's e4m3 path)
//===----------------------------------------------------------------------===//

def FAQuantizeFP8 : Pass<"fa-quantize-fp8", "func::FuncOp"> {
  let summary = "Run each higher-precision fa.attention in e4m3: quantise Q, K, V per tensor";
  let description = [{
    For every memref-form `fa.attention` on f16, bf16 or f32 inputs, inserts
    `fa.quantize` of Q, K and V into fresh e4m3 buffers with rank-0 descale
    factors (`descale = amax / 448`, the per-tensor baseline of
    FlashAttention-3's FP8 evaluation) and rewrites the attention to take
    them: `S = scale * q_descale * k_descale * Q8 K8^T`,
    `O = v_descale * softmax(S) V8`, O in the original output type. The new
    buffers are freed after the attention.

    This is where higher-precision inputs become e4m3, so the accuracy
    passes act on its `fa.quantize` ops: `fa-incoherent-processing` (before
    `fa-tile`) and `fa-block-quantize` (after it).
  }];
  let dependentDialects = ["::mlir::memref::MemRefDialect"];
}

def FAIncoherentProcessing : Pass<"fa-incoherent-processing", "func::FuncOp"> {
  let summary = "FlashAttention-3 incoherent processing: a random Hadamard transform of Q and K before quantisation";
  let description = [{
    For every e4m3 `fa.attention` whose Q and K are made by `fa.quantize`
    (`fa-quantize-fp8`), inserts an `fa.hadamard` with the same random signs
    before both quantisations: `Q' = Q M`, `K' = K M` with
    `M = diag(s) H_D / sqrt(D)`, `s` in {+1, -1}^D drawn from `seed`, and
    `H_D` the Sylvester Hadamard matrix (D a power of two). M is orthogonal,
    so `Q' K'^T = Q M M^T K^T = Q K^T`: the attention is unchanged in exact
    arithmetic. What changes is the quantisation error. Each entry of a row
    of `Q'` is `sum_i s_i H[i, j] q_i / sqrt(D)`: the random signs make the
    row "incoherent" with the Hadamard basis, so its energy spreads evenly
    over the D entries. An outlier entry `q_i = c` (large `c`, as in
    activations with outlier channels) contributes only `+-c / sqrt(D)` to
    every entry of `Q'`, so the amax that sets the e4m3 step shrinks by up
    to `sqrt(D)` and the ordinary entries keep more of their precision.
    (FlashAttention-3, section 3.3, after QuIP / QuIP#; the transform costs
    O(D log D) per row with the butterfly and fuses with rotary embedding
    in a real model.) V is not transformed: `P V M` would need `M^T`
    applied to O.
  }];
  let options = [
    Option<"seed", "seed", "uint64_t", /*default=*/"0",
           "Seed of the random signs (the same signs for Q and K)">
  ];
  let dependentDialects = ["::mlir::memref::MemRefDialect"];
}

def FABlockQuantize : Pass<"fa-block-quantize", "func::FuncOp"> {
  let summary = "FlashAttention-3 block quantisation: one descale per tile of Q and of K";
  let description = [{
    For every tiled e4m3 `fa.attention` whose Q and K are made by
    per-tensor `fa.quantize` ops, makes those quantisations per block: one
    descale per `block_r` rows of Q and per `block_c` rows of K of each
    (batch, head), `[B, H, ceil(N / tile)]`, so that the blocks are exactly
    the kernel's tiles and a score tile `S_ij` needs one scalar,
    `q_descale[i] * k_descale[j]`, folded into its scale (no per-element
    cost). A block's step is `amax_block / 448` instead of the tensor's
    `amax / 448`: only the blocks that hold large values pay for them.
    V stays per tensor (FlashAttention-3 quantises V per tensor too: its
    descale multiplies O once). Run after `fa-tile`.
  }];
  let dependentDialects = ["::mlir::memref::MemRefDialect"];
}

def FAQuantizeProbs : Pass<"fa-quantize-probs", "func::FuncOp"> {
  let summary = "Round P to e4m3 for the P V product, scaled first, as the e4m3 MMA needs";
  let description = [{
    An e4m3 tensor-core MMA takes both operands in e4m3, so a kernel
    converts the probabilities P (f32 registers) to e4m3 before `O += P V`.
    P = exp2(S - m) lies in (0, 1] (up to 2^threshold under conditional
    rescaling), and e4m3 has 3 mantissa bits and its smallest subnormal at
    2^-9: the many small probabilities of a long or peaked row (an
    attention sink) would round to 0 and the output collapse onto the few
    large ones. So P is multiplied by `scale` (a power of two, exact) before
    the cast and the product divided by it after:
    `O += (e4m3(scale * P) V) / scale`. 2^8 (the default) maps P = 1 to 256,
    below e4m3's 448, and moves the underflow threshold to 2^-17
    (FlashAttention-3 gets the same from an exp2 offset of 8 on fp8, with l
    carrying the 2^8 and cancelling in O / l).

    Sets `probs_scale` on every `fa.pv_accumulate` of e4m3 values; the CPU
    path then emulates the cast (nearest even, saturating). Checks
    `scale * 2^threshold <= 448` against the function's
    `fa.conditional_softmax_update`s (run it after
    `fa-conditional-rescale`).
  }];
  let options = [
    Option<"scale", "scale", "double", /*default=*/"256.0",
           "Power of two multiplying P before its e4m3 cast (1 to 256)">
  ];
}

#endif // FA_DIALECT_FA_TRANSFORMS_PASSES_TD
