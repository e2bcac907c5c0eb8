//===- FAGPUBackwardOps.td - the backward kernel's body ops -*- tablegen -*-===//
//
// What the backward kernel adds to a kernel body. Its CTA owns a block of
// keys and visits the query blocks, so its score tiles are transposed: S^T
// has a key per row and a query per column, and what the forward keeps per
// row (the LSE, rowsum(dO o O)) is per column here. P^T and dS^T stay in
// registers as the A operands of dV += P^T dO and dK += dS^T Q (an
// accumulator fragment's two adjacent n8 tiles are one operand_a k-step);
// dS goes through shared memory, transposed, to be the A operand of
// dQ += dS K, whose rows are summed over the CTAs by atomic adds.
//
//===----------------------------------------------------------------------===//

#ifndef FA_DIALECT_FAGPU_IR_FAGPUBACKWARDOPS_TD
#define FA_DIALECT_FAGPU_IR_FAGPUBACKWARDOPS_TD

def FAGPU_BackwardProbsOp : FAGPU_Op<"backward_probs",
    [Pure, AttrSizedOperandSegments, AllTypesMatch<["scores", "probs"]>]> {
  let summary = "P^T = exp(S^T - LSE) of a transposed score tile";
  let description = [{
    `%scores` is S^T for keys `%row0 ..` (the thread's first row, as
    `fagpu.softmax_step` takes it: the warp's 16 rows start at the thread's
    row minus its lane / 4) and queries `%col0 ..` (the fragment's first
    column), unscaled; `%lse` points at the LSE of query 0 of the matrix
    (natural log, f32). Each element becomes

    ```
    P^T[r, c] = exp2(S^T[r, c] * scale_log2 - LSE[c] * log2(e))
    ```

    or 0 where key r >= `%nk`, query c >= `%nq`, LSE[c] = -inf (a row that
    saw no key), with `%shift` (a causal mask, or a window's near edge)
    where r > c + shift, and with `%window_shift` (a window's far edge)
    where r < c + window_shift. The attention's mask gives both: query c
    at key position c' = c + (Nk - Nq bottom-right aligned, else 0) +
    diagonal_offset sees keys r <= c' (causal) and c' - w < r < c' + w
    (window w). LSE values are read from global memory at the thread's
    columns (clamped below `%nq`).

    ```mlir
    %p = fagpu.backward_probs %s lse %lse queries(%q0, %nq) keys(%row0, %nk)
        scale_log2 %sl2 causal_shift %shift window_shift %far
        : !llvm.ptr<1> : !fagpu.fragment<64x64xf32, accumulator>
    ```
  }];
  let arguments = (ins FAGPU_Fragment:$scores, LLVM_AnyPointer:$lse,
                       I32:$col0, I32:$nq, I32:$row0, I32:$nk,
                       F32:$scale_log2, Optional<I32>:$shift,
                       Optional<I32>:$window_shift);
  let results = (outs FAGPU_Fragment:$probs);
  let assemblyFormat = [{
    $scores `lse` $lse `queries` `(` $col0 `,` $nq `)` `keys` `(` $row0 `,`
    $nk `)` `scale_log2` $scale_log2 (`causal_shift` $shift^)?
    (`window_shift` $window_shift^)? `:` type($lse) attr-dict `:`
    type($scores)
  }];
  let hasVerifier = 1;
}

def FAGPU_BackwardGradScoresOp : FAGPU_Op<"backward_grad_scores",
    [Pure, AllTypesMatch<["probs", "grad_probs", "grad_scores"]>]> {
  let summary = "dS^T = P^T o (dP^T - D) with D per column";
  let description = [{
    The softmax's gradient on a transposed tile: `%grad_probs` is dP^T
    (= V dO^T), `%row_dots` points at D of query 0 of the matrix
    (rowsum(dO o O), f32), read at the thread's columns `%col0 ..`
    (clamped below `%nq`; P^T is 0 past it).

    ```mlir
    %ds = fagpu.backward_grad_scores %p, %dp row_dots %d queries(%q0, %nq)
        : !llvm.ptr<1> : !fagpu.fragment<64x64xf32, accumulator>
    ```
  }];
  let arguments = (ins FAGPU_Fragment:$probs, FAGPU_Fragment:$grad_probs,
                       LLVM_AnyPointer:$row_dots, I32:$col0, I32:$nq);
  let results = (outs FAGPU_Fragment:$grad_scores);
  let assemblyFormat = [{
    $probs `,` $grad_probs `row_dots` $row_dots `queries` `(` $col0 `,` $nq
    `)` `:` type($row_dots) attr-dict `:` type($probs)
  }];
  let hasVerifier = 1;
}

def FAGPU_ToOperandAOp : FAGPU_Op<"to_operand_a", [Pure]> {
  let summary = "an f32 accumulator fragment as a 16-bit operand_a one";
  let description = [{
    mma.sync's (and wgmma's) accumulator layout holds, in n8 tiles 2k and
    2k + 1 of a row tile, exactly the elements operand A's k-step k wants
    in each thread: each pair of adjacent columns is rounded to the
    result's element type (f16 or bf16) and packed, no shuffle.

    ```mlir
    %pa = fagpu.to_operand_a %p : !fagpu.fragment<64x64xf32, accumulator>
        -> !fagpu.fragment<64x64xf16, operand_a>
    ```
  }];
  let arguments = (ins FAGPU_Fragment:$acc);
  let results = (outs FAGPU_Fragment:$result);
  let assemblyFormat = "$acc attr-dict `:` type($acc) `->` type($result)";
  let hasVerifier = 1;
}

def FAGPU_StoreTransposedOp : FAGPU_Op<"store_transposed"> {
  let summary = "an accumulator fragment, transposed, into a row_major tile";
  let description = [{
    Element (r, c) of `%acc` (rows x cols, f32) is rounded to the tile's
    element type and stored at (c, r) of `%tile` (cols x rows, `row_major`:
    16-byte chunk k of row c at chunk k ^ (c & 7)), so that the next
    `fagpu.load_fragment` of the tile reads the transpose as an A operand
    (dS for dQ += dS K). The threads must meet at a barrier before it is
    read.

    ```mlir
    fagpu.store_transposed %ds, %tile : !fagpu.fragment<64x64xf32, accumulator>,
        !fagpu.smem_tile<64x64xf16, row_major>
    ```
  }];
  let arguments = (ins FAGPU_Fragment:$acc, FAGPU_SharedTile:$tile);
  let assemblyFormat = "$acc `,` $tile attr-dict `:` type($acc) `,` type($tile)";
  let hasVerifier = 1;
}

def FAGPU_AtomicAddRowsOp : FAGPU_Op<"atomic_add_rows"> {
  let summary = "scale times an accumulator, added to f32 rows in global memory";
  let description = [{
    Adds `%scale` times each of the thread's elements of `%acc` below row
    `%nrows` (rows `%row0 + 16 t` and `+ 8` of each 64-row tile t, as
    `fagpu.store_rows` numbers them) to `%base + row * cols + col` (f32,
    rows of the fragment's columns) with f32 atomic adds: CTAs that own
    different keys sum their parts of one dQ row in any order. With
    `pairs` (sm_90 and later), each thread's two adjacent columns go in one
    vector reduction (`red.global.add.v2.f32`): half the L2 atomic
    operations, which bound the backward on mma.sync.

    ```mlir
    fagpu.atomic_add_rows %dq rows(%row0, %nq) to %base scale %scale
        : !llvm.ptr<1> : !fagpu.fragment<64x64xf32, accumulator>
    ```
  }];
  let arguments = (ins FAGPU_Fragment:$acc, I32:$row0, I32:$nrows,
                       LLVM_AnyPointer:$base, F32:$scale,
                       UnitAttr:$pairs);
  let assemblyFormat = [{
    $acc `rows` `(` $row0 `,` $nrows `)` `to` $base `scale` $scale `:`
    type($base) attr-dict `:` type($acc)
  }];
  let hasVerifier = 1;
}

def FAGPU_SemaphoreWaitOp : FAGPU_Op<"semaphore_wait"> {
  let summary = "wait until a semaphore in global memory holds a value";
  let description = [{
    The CTA's turn: its first thread reads the i32 at `%semaphore` with
    acquire semantics (GPU scope) until it equals `%turn`, then the CTA's
    threads meet at a barrier. With `fagpu.semaphore_signal` after a
    critical section, CTAs that add into one buffer do so in the order of
    their turns (FlashAttention-3's deterministic dQ): a turn is taken only
    after every lower one was signalled, so the grid must dispatch the CTAs
    of lower turns first.

    ```mlir
    fagpu.semaphore_wait %sem equals %turn : !llvm.ptr<1>
    ```
  }];
  let arguments = (ins LLVM_AnyPointer:$semaphore, I32:$turn);
  let assemblyFormat = [{
    $semaphore `equals` $turn `:` type($semaphore) attr-dict
  }];
}

def FAGPU_SemaphoreSignalOp : FAGPU_Op<"semaphore_signal"> {
  let summary = "pass the turn: add one to a semaphore in global memory";
  let description = [{
    Each thread's writes are made visible at GPU scope (a memory barrier:
    its atomic adds included), the CTA's threads meet at a barrier, then its
    first thread adds one to the i32 at `%semaphore`: what the CTA wrote
    before is visible to the CTA that then takes the next turn.

    ```mlir
    fagpu.semaphore_signal %sem : !llvm.ptr<1>
    ```
  }];
  let arguments = (ins LLVM_AnyPointer:$semaphore);
  let assemblyFormat = "$semaphore `:` type($semaphore) attr-dict";
}

#endif // FA_DIALECT_FAGPU_IR_FAGPUBACKWARDOPS_TD
