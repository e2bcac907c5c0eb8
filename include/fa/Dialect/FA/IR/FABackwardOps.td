//===- FABackwardOps.td - the attention's gradients ---------*- tablegen -*-===//
//
// The backward of fa.attention (FlashAttention-2's, as FlashAttention-3
// keeps it): the forward saves O and its log-sum-exp L, never the N x N
// probabilities; the backward recomputes them block by block from L. At the
// op level one op; at the tile level one op per step of the per-block
// recurrence, which fa-lower-fa2-backward arranges in loops.
//
//===----------------------------------------------------------------------===//

#ifndef FA_DIALECT_FA_IR_FABACKWARDOPS_TD
#define FA_DIALECT_FA_IR_FABACKWARDOPS_TD

//===----------------------------------------------------------------------===//
// Op level
//===----------------------------------------------------------------------===//

// IsolatedFromAbove: score_mod and mask_mod see only their arguments, as
// fa.attention's do.
def FA_AttentionBackwardOp : FA_Op<"attention_backward", [
    AttrSizedOperandSegments, IsolatedFromAbove,
    DeclareOpInterfaceMethods<RegionBranchOpInterface>,
    DeclareOpInterfaceMethods<MemoryEffectsOpInterface>]> {
  let summary = "gradients dQ, dK, dV of fa.attention from O, its LSE and dO";
  let description = [{
    The backward of `fa.attention` with the same scale, masks and softcap:
    given its inputs `Q [B, Hq, Nq, D]`, `K [B, Hkv, Nk, D]`,
    `V [B, Hkv, Nk, Dv]`, its output `O [B, Hq, Nq, Dv]` and log-sum-exp
    `LSE [B, Hq, Nq]` (natural log, as `fa.attention` writes it), and the
    gradient of a loss with respect to `O`, `dO [B, Hq, Nq, Dv]`, writes to
    `outs(dQ, dK, dV)`, for every batch `b` and query head `h` (K/V head
    `h / (Hq / Hkv)`):

    ```
    X = scale * Q K^T,  S = mask(cap(X))        cap(x) = c tanh(x / c), or x
    P = exp(S - LSE)                            (masked entries 0)
    D_i = sum_d dO[i, d] O[i, d]
    dV += P^T dO                                 dP = dO V^T
    dS = P o (dP - D) o cap'(X)                  cap'(x) = 1 - tanh^2(x / c), or 1
    dQ = scale dS K                              dK += scale dS^T Q
    ```

    `dK` and `dV` of a K/V head sum the contributions of its `Hq / Hkv`
    query heads (grouped-query attention). A row with `LSE = -inf` (every
    key masked) has `P = 0` and contributes nothing; its `dQ` is 0. The
    masks are `fa.attention`'s: `causal`, `window`, `bottom_right`,
    `diagonal_offset`. Products accumulate in f32; the gradients are
    rounded once, to their own element type (f16, bf16 or f32, each may
    differ from the inputs'). Inputs are f16, bf16 or f32, one type for Q,
    K, V, O and dO; `LSE` is f32. Memref form only (`outs` are written);
    KV lengths, pages and e4m3 inputs have no backward yet.

    Varlen batches (`flash_attn_varlen_func`'s backward): with the
    forward's `varlen(%cu_q, %cu_k)` (two `[B + 1]` i32 prefix sums) the
    tensors hold the sequences packed along N with a batch of one, and each
    sequence is differentiated on its own (its masks aligned with its own
    lengths). Rows outside every sequence get zero gradients.

    Attention sinks: with the forward's `sinks(%s)` (`[Hq]` f32) the op
    takes them too and writes their gradient to a fourth output
    `dsinks [Hq]` (f32). The LSE already holds each sink, so `P`, `dQ`,
    `dK` and `dV` are computed as above; the sink, a key whose value row
    is zero, has `dP = 0` and `P_sink = exp(s_h - LSE)`, so

    ```
    dsinks[h] = -sum_{b, i} exp(s_h - LSE[b, h, i]) * D[b, h, i]
    ```

    (0 for a sink of `-inf`).

    Score and mask modifications: with the forward's `score_mod` and
    `mask_mod` regions (and their `captures`), written here as they are
    there, `S = score_mod(cap(X), b, h, i, j)` and `mask_mod` hides keys as
    in the forward, and the chain rule takes the score_mod's derivative:

    ```
    dX = P o (dP - D) o score_mod'(cap(X)) o cap'(X)
    ```

    `score_mod'` is the derivative with respect to the score, taken from
    the region's body by forward-mode differentiation (`ScoreModDerivative.h`
    lists the ops it has rules for; the verifier refuses a score_mod using
    another op on the score's path). The captures are constants of the
    backward: they receive no gradient.

    ```mlir
    fa.attention_backward %q, %k, %v, %o, %lse, %do sinks(%s : memref<8xf32>)
        outs(%dq, %dk, %dv, %ds : memref<1x8x77x64xf32>, memref<1x2x131x64xf32>,
                                  memref<1x2x131x64xf32>, memref<8xf32>)
        : memref<1x8x77x64xf32>, memref<1x2x131x64xf32>,
          memref<1x2x131x64xf32>, memref<1x8x77x64xf32>, memref<1x8x77xf32>,
          memref<1x8x77x64xf32>
    ```

    ```mlir
    fa.attention_backward %q, %k, %v, %o, %lse, %do
        outs(%dq, %dk, %dv : memref<1x8x77x64xf32>, memref<1x2x131x64xf32>,
                             memref<1x2x131x64xf32>) {causal}
        : memref<1x8x77x64xf32>, memref<1x2x131x64xf32>,
          memref<1x2x131x64xf32>, memref<1x8x77x64xf32>, memref<1x8x77xf32>,
          memref<1x8x77x64xf32>
    ```
  }];
  let arguments = (ins MemRefOf<[F16, BF16, F32]>:$query,
                       MemRefOf<[F16, BF16, F32]>:$key,
                       MemRefOf<[F16, BF16, F32]>:$value,
                       MemRefOf<[F16, BF16, F32]>:$out,
                       MemRefOf<[F32]>:$lse,
                       MemRefOf<[F16, BF16, F32]>:$grad_out,
                       MemRefOf<[F16, BF16, F32]>:$grad_query,
                       MemRefOf<[F16, BF16, F32]>:$grad_key,
                       MemRefOf<[F16, BF16, F32]>:$grad_value,
                       Optional<MemRefRankOf<[F32], [1]>>:$sinks,
                       Optional<MemRefRankOf<[F32], [1]>>:$grad_sinks,
                       Optional<MemRefRankOf<[I32], [1]>>:$cu_seqlens_q,
                       Optional<MemRefRankOf<[I32], [1]>>:$cu_seqlens_k,
                       Variadic<AnyMemRef>:$captures,
                       OptionalAttr<F32Attr>:$scale,
                       UnitAttr:$causal,
                       OptionalAttr<I64Attr>:$window,
                       OptionalAttr<F32Attr>:$softcap,
                       UnitAttr:$bottom_right,
                       OptionalAttr<I64Attr>:$diagonal_offset,
                       OptionalAttr<I64Attr>:$block_r,
                       OptionalAttr<I64Attr>:$block_c);
  let regions = (region MaxSizedRegion<1>:$score_mod,
                        MaxSizedRegion<1>:$mask_mod);
  let assemblyFormat = [{
    $query `,` $key `,` $value `,` $out `,` $lse `,` $grad_out
    (`sinks` `(` $sinks^ `:` type($sinks) `)`)?
    (`varlen` `(` $cu_seqlens_q^ `,` $cu_seqlens_k `:` type($cu_seqlens_q)
     `,` type($cu_seqlens_k) `)`)?
    (`captures` `(` $captures^ `:` type($captures) `)`)?
    `outs` `(` $grad_query `,` $grad_key `,` $grad_value (`,` $grad_sinks^)? `:`
    type($grad_query) `,` type($grad_key) `,` type($grad_value)
    (`,` type($grad_sinks)^)? `)`
    attr-dict `:` type($query) `,` type($key) `,` type($value) `,`
    type($out) `,` type($lse) `,` type($grad_out)
    (`score_mod` $score_mod^)? (`mask_mod` $mask_mod^)?
  }];
  let extraClassDeclaration = [{
    /// The scale to apply: the attribute, or 1/sqrt(D) when absent.
    float getEffectiveScale();
    ::mlir::MemRefType getQueryType() {
      return ::llvm::cast<::mlir::MemRefType>(getQuery().getType());
    }
    ::mlir::MemRefType getKeyType() {
      return ::llvm::cast<::mlir::MemRefType>(getKey().getType());
    }
    ::mlir::MemRefType getValueType() {
      return ::llvm::cast<::mlir::MemRefType>(getValue().getType());
    }
    /// True with a score_mod or mask_mod region.
    bool hasModifications() {
      return !getScoreMod().empty() || !getMaskMod().empty();
    }
  }];
  let hasVerifier = 1;
}

//===----------------------------------------------------------------------===//
// Tile level: one block pair (B_r query rows, B_c keys) of the backward.
//===----------------------------------------------------------------------===//

def FA_RowDotOp : FA_Op<"row_dot"> {
  let summary = "the backward's preprocess: D[r] = sum_d dO[r, d] * O[r, d]";
  let description = [{
    For `r < rows(grad_out)`: `D[r] = sum_d dO[r, d] * O[r, d]` in f32
    (`rowsum(dO o O)`, which equals `rowsum(P o dP)`: the term every
    `dS` of the row subtracts).

    ```mlir
    fa.row_dot %do, %o -> %d
        : memref<?x64xf16, strided<[64, 1], offset: ?>>,
          memref<?x64xf16, strided<[64, 1], offset: ?>> -> memref<?xf32, strided<[1], offset: ?>>
    ```
  }];
  let arguments = (ins Arg<FA_InputTile, "dO rows", [MemRead]>:$grad_out,
                       Arg<FA_InputTile, "O rows", [MemRead]>:$out,
                       Arg<FA_RowVector, "D", [MemWrite]>:$dot);
  let assemblyFormat = [{
    $grad_out `,` $out `->` $dot attr-dict `:` type($grad_out) `,` type($out)
    `->` type($dot)
  }];
  let hasVerifier = 1;
}

def FA_RecomputeProbsOp : FA_Op<"recompute_probs"> {
  let summary = "the forward's probabilities from its log-sum-exp: P = exp(S - LSE)";
  let description = [{
    `S` holds a score tile in base 2 as `fa.score_tile` writes it
    (`log2(e) * cap(scale * Q K^T)`, `-inf` where masked). For
    `r < size(lse)`, `P[r, c] = exp2(S[r, c] - log2(e) * lse[r])`, written
    in place; masked scores and rows with `lse = -inf` (no visible key) give
    0. Rows past `size(lse)` (a ragged last query block) are set to 0.

    ```mlir
    fa.recompute_probs %s, %lse : memref<64x64xf32>, memref<?xf32, strided<[1], offset: ?>>
    ```
  }];
  let arguments = (ins Arg<FA_F32Tile, "S, then P", [MemRead, MemWrite]>:$scores,
                       Arg<FA_RowVector, "LSE of the rows", [MemRead]>:$lse);
  let assemblyFormat = [{
    $scores `,` $lse attr-dict `:` type($scores) `,` type($lse)
  }];
  let hasVerifier = 1;
}

def FA_GradValuesOp : FA_Op<"grad_values"> {
  let summary = "accumulate the values' gradient: dV += P^T dO";
  let description = [{
    `dV[c, d] += sum_{r < rows(grad_out)} P[r, c] * dO[r, d]` in f32 for
    every row `c` of the `[B_c, Dv]` accumulator.

    ```mlir
    fa.grad_values %p, %do -> %dv
        : memref<64x64xf32>, memref<?x64xf16, strided<[64, 1], offset: ?>> -> memref<64x64xf32>
    ```
  }];
  let arguments = (ins Arg<FA_F32Tile, "P [B_r, B_c]", [MemRead]>:$probs,
                       Arg<FA_InputTile, "dO rows", [MemRead]>:$grad_out,
                       Arg<FA_F32Tile, "dV [B_c, Dv]", [MemRead, MemWrite]>:$acc);
  let assemblyFormat = [{
    $probs `,` $grad_out `->` $acc attr-dict `:` type($probs) `,`
    type($grad_out) `->` type($acc)
  }];
  let hasVerifier = 1;
}

def FA_GradProbsOp : FA_Op<"grad_probs"> {
  let summary = "the probabilities' gradient: dP = dO V^T";
  let description = [{
    `dP[r, c] = sum_d dO[r, d] * V[c, d]` in f32 for `r < rows(grad_out)`,
    `c < rows(value)`; 0 elsewhere in the static `[B_r, B_c]` tile.

    ```mlir
    fa.grad_probs %do, %v -> %dp
        : memref<?x64xf16, strided<[64, 1], offset: ?>>,
          memref<?x64xf16, strided<[64, 1], offset: ?>> -> memref<64x64xf32>
    ```
  }];
  let arguments = (ins Arg<FA_InputTile, "dO rows", [MemRead]>:$grad_out,
                       Arg<FA_InputTile, "value rows", [MemRead]>:$value,
                       Arg<FA_F32Tile, "dP", [MemWrite]>:$grad_probs);
  let assemblyFormat = [{
    $grad_out `,` $value `->` $grad_probs attr-dict `:` type($grad_out) `,`
    type($value) `->` type($grad_probs)
  }];
  let hasVerifier = 1;
}

def FA_GradScoresOp : FA_Op<"grad_scores"> {
  let summary = "the scores' gradient: dS = P o (dP - D) o cap'";
  let description = [{
    For the `[B_r, B_c]` tiles and `r < size(dot)`:

    ```
    dS[r, c] = P[r, c] * (dP[r, c] - D[r]) * cap'
    cap' = 1 - (ln(2) * S[r, c] / softcap)^2     (1 without softcap)
    ```

    written over `dP`. `S` is the score tile in base 2 before
    `fa.recompute_probs` (`log2(e) * softcap * tanh(x / softcap)`), kept
    for the softcap's derivative `1 - tanh^2(x / c)`; it is read only with
    `softcap` (with a score_mod, it is the score tile's `unmodified` tile:
    the capped score before the modification). Where `P = 0` (masked, or
    beyond the ragged tails) `dS = 0`.

    ```mlir
    fa.grad_scores %p, %d -> %dp : memref<64x64xf32>, memref<?xf32, strided<[1], offset: ?>> -> memref<64x64xf32>
    fa.grad_scores %p, %d, %s -> %dp {softcap = 30.0 : f32}
        : memref<64x64xf32>, memref<?xf32, strided<[1], offset: ?>>, memref<64x64xf32> -> memref<64x64xf32>
    ```
  }];
  let arguments = (ins Arg<FA_F32Tile, "P", [MemRead]>:$probs,
                       Arg<FA_RowVector, "D", [MemRead]>:$dot,
                       Arg<Optional<FA_F32Tile>, "S (softcap)", [MemRead]>:$scores,
                       Arg<FA_F32Tile, "dP, then dS", [MemRead, MemWrite]>:$grad,
                       OptionalAttr<F32Attr>:$softcap);
  let assemblyFormat = [{
    $probs `,` $dot (`,` $scores^)? `->` $grad attr-dict `:` type($probs) `,`
    type($dot) (`,` type($scores)^)? `->` type($grad)
  }];
  let hasVerifier = 1;
}

def FA_ChainScoreModOp : FA_Op<"chain_score_mod", [AttrSizedOperandSegments,
    IsolatedFromAbove]> {
  let summary = "the chain rule through score_mod: dS o= score_mod'(x)";
  let description = [{
    `unmodified` holds the scores before `score_mod` in base 2, as
    `fa.score_tile`'s `unmodified` tile writes them
    (`log2(e) * cap(scale * Q K^T)`, `-inf` where masked). At every
    `(r, c)` where it is not `-inf`, with `coordinates(b, h, q0, k0)`,
    `i = q0 + r` and `j = k0 + c`:

    ```
    dS[r, c] = dS[r, c] * d score_mod(x, b, h, i, j) / dx,   x = ln(2) X[r, c]
    ```

    written over `dS` (entries at `-inf` keep theirs: 0 there, since P is).
    The derivative is taken from the region's body by forward-mode
    differentiation (`ScoreModDerivative.h`); the verifier refuses a body
    with an op on the score's path that has no derivative rule.

    ```mlir
    fa.chain_score_mod %x -> %ds coordinates(%b, %h, %q0, %k0)
        captures(%slopes : memref<8xf32>) : memref<64x64xf32> -> memref<64x64xf32>
      score_mod {
      ^bb0(%s: f32, %b: index, %h: index, %i: index, %j: index, %m: tensor<8xf32>):
        ...
      }
    ```
  }];
  let arguments = (ins Arg<FA_F32Tile, "X, the scores before score_mod",
                           [MemRead]>:$unmodified,
                       Arg<FA_F32Tile, "dS", [MemRead, MemWrite]>:$grad,
                       Variadic<Index>:$coordinates,
                       Arg<Variadic<AnyMemRef>, "captures", [MemRead]>:$captures);
  let regions = (region SizedRegion<1>:$score_mod);
  let assemblyFormat = [{
    $unmodified `->` $grad `coordinates` `(` $coordinates `)`
    (`captures` `(` $captures^ `:` type($captures) `)`)?
    attr-dict `:` type($unmodified) `->` type($grad) `score_mod` $score_mod
  }];
  let hasVerifier = 1;
}

def FA_GradKeysOp : FA_Op<"grad_keys"> {
  let summary = "accumulate the keys' gradient: dK += scale dS^T Q";
  let description = [{
    `dK[c, d] += scale * sum_{r < rows(query)} dS[r, c] * Q[r, d]` in f32
    for every row `c` of the `[B_c, D]` accumulator.

    ```mlir
    fa.grad_keys %ds, %q -> %dk {scale = 0.125 : f32}
        : memref<64x64xf32>, memref<?x64xf16, strided<[64, 1], offset: ?>> -> memref<64x64xf32>
    ```
  }];
  let arguments = (ins Arg<FA_F32Tile, "dS [B_r, B_c]", [MemRead]>:$grad_scores,
                       Arg<FA_InputTile, "query rows", [MemRead]>:$query,
                       Arg<FA_F32Tile, "dK [B_c, D]", [MemRead, MemWrite]>:$acc,
                       F32Attr:$scale);
  let assemblyFormat = [{
    $grad_scores `,` $query `->` $acc attr-dict `:` type($grad_scores) `,`
    type($query) `->` type($acc)
  }];
  let hasVerifier = 1;
}

def FA_GradQueriesOp : FA_Op<"grad_queries"> {
  let summary = "accumulate the queries' gradient: dQ += scale dS K";
  let description = [{
    `dQ[r, d] += scale * sum_{c < rows(key)} dS[r, c] * K[c, d]` in f32 for
    `r < rows(acc)` (the query block's rows, which may be fewer than
    `B_r`).

    ```mlir
    fa.grad_queries %ds, %k -> %dq {scale = 0.125 : f32}
        : memref<64x64xf32>, memref<?x64xf16, strided<[64, 1], offset: ?>>
          -> memref<?x64xf32, strided<[64, 1], offset: ?>>
    ```
  }];
  let arguments = (ins Arg<FA_F32Tile, "dS [B_r, B_c]", [MemRead]>:$grad_scores,
                       Arg<FA_InputTile, "key rows", [MemRead]>:$key,
                       Arg<FA_F32Tile, "dQ rows", [MemRead, MemWrite]>:$acc,
                       F32Attr:$scale);
  let assemblyFormat = [{
    $grad_scores `,` $key `->` $acc attr-dict `:` type($grad_scores) `,`
    type($key) `->` type($acc)
  }];
  let hasVerifier = 1;
}

def FA_GradSinkOp : FA_Op<"grad_sink"> {
  let summary = "a query block's part of a sink's gradient: -sum_r exp(s - LSE[r]) D[r]";
  let description = [{
    Returns `-sum_{r < size(lse)} exp(sink - lse[r]) * D[r]` in f32: the
    sink's probability in each row times the row's `D = rowsum(dO o O)`,
    the gradient the loss sends to a sink logit through those rows (its
    value row is zero, so `dP_sink = 0` and `dS_sink = -P_sink D`). A sink
    of `-inf` (none) gives 0.

    ```mlir
    %part = fa.grad_sink %sink, %lse, %d
        : memref<?xf32, strided<[1], offset: ?>>, memref<?xf32, strided<[1], offset: ?>>
    ```
  }];
  let arguments = (ins F32:$sink,
                       Arg<FA_RowVector, "LSE of the rows", [MemRead]>:$lse,
                       Arg<FA_RowVector, "D of the rows", [MemRead]>:$dot);
  let results = (outs F32:$partial);
  let assemblyFormat = [{
    $sink `,` $lse `,` $dot attr-dict `:` type($lse) `,` type($dot)
  }];
  let hasVerifier = 1;
}

#endif // FA_DIALECT_FA_IR_FABACKWARDOPS_TD
