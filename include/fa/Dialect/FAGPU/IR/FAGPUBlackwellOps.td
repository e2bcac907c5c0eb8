//===- FAGPUBlackwellOps.td - tensor memory and tcgen05 roles -*- tablegen -*-===//
//
// What sm_100a adds to a kernel body (FlashAttention-4's structure): the
// accumulators live in tensor memory (TMEM) instead of registers, one
// thread issues every tcgen05.mma, and completion is signalled on
// mbarriers by tcgen05.commit. The softmax warps own one query row per
// thread: row i of an M = 128 MMA is TMEM lane i, and warp w may only
// access lanes 32 w .. 32 w + 31.
//
//===----------------------------------------------------------------------===//

#ifndef FA_DIALECT_FAGPU_IR_FAGPUBLACKWELLOPS_TD
#define FA_DIALECT_FAGPU_IR_FAGPUBLACKWELLOPS_TD

//===----------------------------------------------------------------------===//
// Warp roles
//===----------------------------------------------------------------------===//

def FAGPU_TcgenRolesOp : FAGPU_Op<"tcgen05_roles",
    [RecursiveMemoryEffects, NoTerminator]> {
  let summary = "softmax warpgroup, TMA thread and MMA thread of a tcgen05 kernel";
  let description = [{
    `%warp` is the thread's warp. Warps 0 .. 3 (one warpgroup, 128 threads:
    one per TMEM lane, so one per query row) run `softmax`; lane 0 of warp
    `load_warp` runs `load` (the TMA loads) and lane 0 of warp `mma_warp`
    runs `mma`: a tcgen05.mma is issued by one thread for the CTA and keeps
    its accumulator in tensor memory, so one thread does all the
    tensor-core work and no warpgroup waits on it. No register budgets:
    the roles' warps need few registers, and the softmax warps hold a row
    of S, not an accumulator.

    ```mlir
    fagpu.tcgen05_roles %warp load_warp 4 mma_warp 5 softmax {
      ...
    } load {
      ...
    } mma {
      ...
    }
    ```
  }];
  let arguments = (ins I32:$warp, I64Attr:$load_warp, I64Attr:$mma_warp);
  let regions = (region SizedRegion<1>:$softmax, SizedRegion<1>:$load,
                        SizedRegion<1>:$mma);
  let assemblyFormat = [{
    $warp `load_warp` $load_warp `mma_warp` $mma_warp `softmax` $softmax
    `load` $load `mma` $mma attr-dict
  }];
  let hasVerifier = 1;
}

//===----------------------------------------------------------------------===//
// Barriers
//===----------------------------------------------------------------------===//

def FAGPU_CreateBarriersOp : FAGPU_Op<"create_barriers", [Pure]> {
  let summary = "mbarriers at a fixed place in shared memory";
  let description = [{
    `count` mbarriers from byte `offset` of the CTA's (1 KiB-aligned)
    shared memory, 8 bytes each.

    ```mlir
    %s_full = fagpu.create_barriers offset 229384 : !fagpu.barriers<2>
    ```
  }];
  let arguments = (ins I64Attr:$offset);
  let results = (outs FAGPU_Barriers:$barriers);
  let assemblyFormat = "`offset` $offset attr-dict `:` type($barriers)";
  let hasVerifier = 1;
}

def FAGPU_InitBarriersOp : FAGPU_Op<"init_barriers"> {
  let summary = "one thread initialises a kernel's mbarriers, each with its arrivals";
  let description = [{
    Thread 0 initialises every barrier of each operand, in the order of
    their offsets, with the operand's arrival count: a pipeline's full and
    empty barriers (sm_100a: one arrival each, the producer's expect_tx or
    a `tcgen05.commit`), a `!fagpu.barriers` group's. Then it fences the
    initialisation for the async proxy (TMA, tcgen05.commit).

    Unlike `fagpu.init_pipelines` it does not synchronise the CTA: the
    kernel's next CTA barrier publishes them (on sm_100a the one after the
    TMEM allocation, `fagpu.tmem_alloc`, which every thread needs anyway).

    ```mlir
    fagpu.init_barriers %q, %kv, %s_full, %p_full, %o_done
        arrivals [1, 1, 1, 128, 1] : ...
    ```
  }];
  let arguments = (ins Variadic<AnyType>:$barriers,
                       DenseI64ArrayAttr:$arrivals);
  let assemblyFormat = [{
    $barriers `arrivals` $arrivals attr-dict `:` type($barriers)
  }];
  let hasVerifier = 1;
}

// A group of N barriers is used round-robin, like the buffers they guard:
// use u is barrier u mod N in its phase (u / N) mod 2, so the ops take the
// use and their lowering owns index and phase.

def FAGPU_BarrierWaitOp : FAGPU_Op<"barrier_wait"> {
  let summary = "wait for a TMEM hand-off, then order later tcgen05 ops after it";
  let description = [{
    Waits for use `%use` of `%barriers` (barrier `%use` mod N to complete
    phase (`%use` / N) mod 2), then `tcgen05.fence::after_thread_sync`: the
    thread's later tcgen05 operations (ld, st, mma) are ordered after the
    wait, so they see the tensor memory the arriving side wrote (S_j, P_j,
    O).

    ```mlir
    fagpu.barrier_wait %s_full use %i : !fagpu.barriers<2>
    ```
  }];
  let arguments = (ins FAGPU_Barriers:$barriers, I32:$use);
  let assemblyFormat = [{
    $barriers `use` $use attr-dict `:` type($barriers)
  }];
}

def FAGPU_BarrierArriveOp : FAGPU_Op<"barrier_arrive"> {
  let summary = "hand tensor memory over: fence earlier tcgen05 ops, then arrive";
  let description = [{
    `tcgen05.fence::before_thread_sync`, then one arrival of this thread on
    the barrier of use `%use` (`%use` mod N): the thread's earlier tcgen05
    operations (P_j stored into TMEM) are ordered before the arrival, so
    the thread that waits on it may issue the MMA reading them.

    ```mlir
    fagpu.barrier_arrive %p_full use %i : !fagpu.barriers<2>
    ```
  }];
  let arguments = (ins FAGPU_Barriers:$barriers, I32:$use);
  let assemblyFormat = [{
    $barriers `use` $use attr-dict `:` type($barriers)
  }];
}

def FAGPU_MmaCommitOp : FAGPU_Op<"mma_commit"> {
  let summary = "arrive on a barrier once the thread's issued MMAs complete";
  let description = [{
    `tcgen05.commit`: the barrier of use `%use` (`%use` mod N) gets one
    arrival when every tcgen05.mma this thread issued so far has completed
    (S_j ready for the softmax, O updated). The issuing thread goes on at
    once.

    ```mlir
    fagpu.mma_commit %s_full use %i : !fagpu.barriers<2>
    ```
  }];
  let arguments = (ins FAGPU_Barriers:$barriers, I32:$use);
  let assemblyFormat = [{
    $barriers `use` $use attr-dict `:` type($barriers)
  }];
}

//===----------------------------------------------------------------------===//
// Tensor memory
//===----------------------------------------------------------------------===//

def FAGPU_TmemAllocOp : FAGPU_Op<"tmem_alloc"> {
  let summary = "allocate the CTA's tensor memory and share its address";
  let description = [{
    Warp `alloc_warp` (`%warp` is the thread's warp) allocates the result's
    columns (`tcgen05.alloc` is warp-wide; a power of two of at least 32)
    and gives up the right to allocate more, so a second CTA on the SM
    cannot deadlock waiting for columns. The allocator writes the TMEM
    address to the 4 bytes at `slot_offset` of shared memory; the CTA
    synchronises (with tcgen05 fences around the barrier) and every thread
    reads the address from there.

    ```mlir
    %tmem = fagpu.tmem_alloc warp %warp alloc_warp 5 slot 229512
        : !fagpu.tmem<128x512xf32>
    ```
  }];
  let arguments = (ins I32:$warp, I64Attr:$alloc_warp, I64Attr:$slot_offset);
  let results = (outs FAGPU_Tmem:$tmem);
  let assemblyFormat = [{
    `warp` $warp `alloc_warp` $alloc_warp `slot` $slot_offset attr-dict `:`
    type($tmem)
  }];
  let hasVerifier = 1;
}

def FAGPU_TmemDeallocOp : FAGPU_Op<"tmem_dealloc"> {
  let summary = "free the CTA's tensor memory once every role is done with it";
  let description = [{
    The CTA synchronises (the epilogue has read O), then warp `alloc_warp`
    frees the allocation. Its lane 0 may have run the MMA role alone, so
    the warp reconverges first: `tcgen05.dealloc` is warp-wide.

    ```mlir
    fagpu.tmem_dealloc %tmem warp %warp alloc_warp 5 : !fagpu.tmem<128x512xf32>
    ```
  }];
  let arguments = (ins FAGPU_Tmem:$tmem, I32:$warp, I64Attr:$alloc_warp);
  let assemblyFormat = [{
    $tmem `warp` $warp `alloc_warp` $alloc_warp attr-dict `:` type($tmem)
  }];
}

def FAGPU_TmemSliceOp : FAGPU_Op<"tmem_slice", [Pure]> {
  let summary = "the TMEM region of a buffer, from a 32-bit column on";
  let description = [{
    The result's columns of `%tmem` from 32-bit column `%column` on: one
    buffer of the allocation (S_j at B_c (j mod 2), O after both S
    buffers). An f16/bf16 result views the same columns as pairs: P_j over
    the first B_c / 2 columns of its S_j.

    ```mlir
    %p = fagpu.tmem_slice %tmem[%column]
        : !fagpu.tmem<128x512xf32> -> !fagpu.tmem<128x128xf16>
    ```
  }];
  let arguments = (ins FAGPU_Tmem:$tmem, I32:$column);
  let results = (outs FAGPU_Tmem:$slice);
  let assemblyFormat = [{
    $tmem `[` $column `]` attr-dict `:` type($tmem) `->` type($slice)
  }];
  let hasVerifier = 1;
}

def FAGPU_TmemLoadOp : FAGPU_Op<"tmem_load"> {
  let summary = "each softmax thread reads its row of a TMEM region";
  let description = [{
    Thread t of the warpgroup reads lane t (its query row) of `%tmem`:
    `tcgen05.ld.32x32b.x32` per 32 columns (warp w addresses its own lanes
    32 w ..), then `tcgen05.wait::ld`.

    ```mlir
    %s = fagpu.tmem_load %s_tmem
        : !fagpu.tmem<128x128xf32> -> !fagpu.fragment<128x128xf32, lanes>
    ```
  }];
  let arguments = (ins FAGPU_Tmem:$tmem);
  let results = (outs FAGPU_Fragment:$result);
  let assemblyFormat = "$tmem attr-dict `:` type($tmem) `->` type($result)";
  let hasVerifier = 1;
}

def FAGPU_TmemStoreOp : FAGPU_Op<"tmem_store"> {
  let summary = "each softmax thread writes its row into a TMEM region";
  let description = [{
    Thread t writes row `%value` into lane t of `%tmem`, packed to f16/bf16
    pairs when the region holds them (P_j as the A operand of O += P V, so
    P never goes through shared memory), with `tcgen05.st.32x32b.x32` per
    32 columns, then waits for the stores (`tcgen05.wait::st`).

    ```mlir
    fagpu.tmem_store %p, %p_tmem
        : !fagpu.fragment<128x128xf32, lanes>, !fagpu.tmem<128x128xf16>
    ```
  }];
  let arguments = (ins FAGPU_Fragment:$value, FAGPU_Tmem:$tmem);
  let assemblyFormat = [{
    $value `,` $tmem attr-dict `:` type($value) `,` type($tmem)
  }];
  let hasVerifier = 1;
}

#endif // FA_DIALECT_FAGPU_IR_FAGPUBLACKWELLOPS_TD
