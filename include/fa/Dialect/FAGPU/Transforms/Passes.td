//===- Passes.td - fagpu passes ----------------------------*- tablegen -*-===//
//
// The GPU path, one idea per pass: fa-map-to-gpu takes the tile level's FA2
// loop nest to fagpu; each fagpu-* pass brings one FlashAttention-3 idea
// into the kernel's schedule (checking that it fits the target);
// convert-fagpu-to-nvvm (include/fa/Conversion) emits the kernel.
//
//===----------------------------------------------------------------------===//

#ifndef FA_DIALECT_FAGPU_TRANSFORMS_PASSES_TD
#define FA_DIALECT_FAGPU_TRANSFORMS_PASSES_TD

include "mlir/Pass/PassBase.td"

def FAGPUTile : Pass<"fagpu-tile", "func::FuncOp"> {
  let summary = "Choose each fa.attention's tiles (B_r, B_c) for a GPU target's kernel";
  let description = [{
    The GPU path's `fa-tile`: sets `block_r` and `block_c` on each
    `fa.attention` to the tiles `target`'s kernel runs -- the op's own,
    else `block-r` / `block-c`, else the target's row of the measured
    defaults (`fa/Dialect/FAGPU/IR/Heuristics.h`: split-KV's and an e4m3
    cache's B_r, e4m3's B_c, a paged cache's B_c cut to divide its pages).
    Shared memory is checked later, by the fagpu passes that fill it. The
    tile level (`fa-tile`, FlashAttention-1's rule on an SRAM budget) stays
    target-free.

    Refuses what the target's kernels do not take, before the loop nest
    takes views of it: strided (non-identity) memrefs, varlen batches, key
    lengths, paged or e4m3 K/V off sm_90a, element types the target has no
    kernel for, head dims without a row unless tiles are given, and page
    sizes that are not whole MMA steps.
  }];
  let options = [
    Option<"target", "target", "std::string", "\"sm_90a\"",
           "sm_80, sm_90a or sm_100a">,
    Option<"blockR", "block-r", "int64_t", /*default=*/"0",
           "B_r where the op has none (0: the target's default)">,
    Option<"blockC", "block-c", "int64_t", /*default=*/"0",
           "B_c where the op has none (0: the target's default)">,
  ];
}

def FAMapToGPU : Pass<"fa-map-to-gpu", "func::FuncOp"> {
  let summary = "Map the FA2 loop nest of each attention onto one GPU kernel";
  let description = [{
    Reads each `scf.forall` that `fa-lower-fa2` built (`fa.loop_order =
    "fa2"`) and replaces it with one `fagpu.attention` on the memrefs the
    nest reads and writes. Everything the kernel must compute comes from the
    tile ops: the scale, causal mask, window and softcap of `fa.score_tile`;
    FA4's conditional rescaling (`fa.conditional_softmax_update`'s
    threshold) and software exp2 (`exp2_poly_degree`/`_period` of the
    softmax step); the tiles (`B_r`, `B_c`) from the nest's buffers. So the
    FA4 passes, run once on the tile level, reach every target.

    The schedule starts with the target's fixed structure and none of the
    FlashAttention-3 ideas: no warp roles, no K/V pipeline, no ping-pong or
    overlap, one tile per CTA, O stored from registers.

    A nest that is not `fa-lower-fa2`'s (an op missing, a buffer not traced
    to the function's memrefs) or that the target cannot run (f32, head dims
    other than 64/128/256, D != Dv) is an error naming what is wrong.
  }];
  let options = [
    Option<"target", "target", "std::string", "\"sm_90a\"",
           "sm_80 (mma.sync), sm_90a (wgmma, TMA) or sm_100a (tcgen05)">,
    Option<"queryInRegisters", "q-in-registers", "bool", "true",
           "sm_80: keep Q fragments in registers where they fit">,
    Option<"ctasPerSm", "ctas-per-sm", "int64_t", "0",
           "sm_90a: resident CTAs per SM the kernel is built for (0: two "
           "with one consumer warpgroup, else one)">,
    Option<"deterministicBackward", "deterministic-backward", "bool",
           "false",
           "Backward kernels add into dQ in the order of their key blocks "
           "(semaphores), the same bits every run">,
    Option<"vectorReductions", "vector-reductions", "bool", "false",
           "Backward kernels add into dQ two columns a reduction "
           "(red.global.add.v2.f32: sm_90 and later)">,
  ];
  let dependentDialects = ["::mlir::fagpu::FAGPUDialect"];
}

def FAGPUWarpSpecialize : Pass<"fagpu-warp-specialize", "func::FuncOp"> {
  let summary = "FA3 warp specialisation: a TMA producer warpgroup and "
                "consumer warpgroups with setmaxnreg budgets";
  let description = [{
    sm_90a: warpgroup 0 becomes the producer (one thread issues every TMA
    load) and gives up registers with `setmaxnreg.dec` to
    `producer-registers`; the `consumers` warpgroups of 64 rows take
    `consumer-registers` with `setmaxnreg.inc` (0: what the CTA's registers
    leave them, `(R / 128 - producer) / consumers` rounded down to 8, at
    most 240, where the CTA launches with R = 64K / ctas_per_sm / threads
    rounded down to 8, times its threads: setmaxnreg only moves registers
    within that allocation, and an increase that does not fit waits
    forever). Budgets must be multiples of 8 in [24, 256] and fit R. Other targets are left
    alone (sm_80 has no warp roles; sm_100a's are fixed by tcgen05).
  }];
  let options = [
    Option<"producerRegisters", "producer-registers", "int64_t", "24",
           "setmaxnreg budget of the producer warpgroup">,
    Option<"consumerRegisters", "consumer-registers", "int64_t", "0",
           "setmaxnreg budget of each consumer warpgroup (0: the fair share)">,
  ];
}

def FAGPUPersistent : Pass<"fagpu-persistent", "func::FuncOp"> {
  let summary = "Persistent CTAs with the cross-tile pipeline; causal tiles "
                "by a dynamic tile scheduler";
  let description = [{
    sm_90a: CTAs loop over the (query block, head) tiles. Equal (non-causal)
    tiles are dealt statically (CTA c runs c, c + gridDim, ...); causal
    tiles, whose lengths differ, by a dynamic scheduler (the producer takes
    the next tile from a global counter). Two Q buffers let tile t + 1's Q
    load under tile t and its first S issue with tile t's last P V (the
    cross-tile pipeline); `fagpu-pipeline-kv` drops to one where two do not
    fit. `mode=auto` follows the heuristics table (on for D = 64 and 128).
    Run it before `fagpu-pipeline-kv`.
  }];
  let options = [
    Option<"mode", "mode", "::mlir::fagpu::Switch",
           "::mlir::fagpu::Switch::Auto", "on, off or auto (the heuristics)",
           [{::llvm::cl::values(
               clEnumValN(::mlir::fagpu::Switch::On, "on", "on"),
               clEnumValN(::mlir::fagpu::Switch::Off, "off", "off"),
               clEnumValN(::mlir::fagpu::Switch::Auto, "auto",
                          "the heuristics table's choice"))}]>,
  ];
}

def FAGPUPipelineKV : Pass<"fagpu-pipeline-kv", "func::FuncOp"> {
  let summary = "The K/V ring: depth of the TMA-fed pipeline of K/V tiles";
  let description = [{
    sm_90a and sm_100a: K and V tiles stream through a ring of `stages`
    shared-memory slots, each guarded by a full mbarrier (the TMA's
    transaction bytes) and an empty one (the consumers' release).
    `stages=0` takes 3 where the tiles fit the CTA's shared memory, else 2;
    a persistent kernel whose second Q buffer leaves no room for two stages
    keeps one Q buffer. sm_80's cp.async double buffer is fixed.
  }];
  let options = [
    Option<"stages", "stages", "int64_t", "0", "ring depth, 2 to 4 (0: auto)">,
  ];
}

def FAGPUPingPong : Pass<"fagpu-ping-pong", "func::FuncOp"> {
  let summary = "Consumer warpgroups take turns on the tensor cores";
  let description = [{
    sm_90a: named barriers hand the tensor cores from one consumer
    warpgroup to the next, so one's softmax (on the MUFU) runs under the
    other's GEMMs. Needs two or more consumers; a kernel with one (B_r = 64,
    two CTAs per SM, whose CTAs play the partners) is left alone.
  }];
}

def FAGPUOverlapSoftmax : Pass<"fagpu-overlap-softmax", "func::FuncOp"> {
  let summary = "Intra-warpgroup overlap: softmax of block j under P V of "
                "block j - 1";
  let description = [{
    sm_90a: each K/V step issues S_j = Q K_j^T and O += P_{j-1} V_{j-1}
    back to back and runs the softmax of S_j while the second GEMM is still
    on the tensor cores (wgmma.wait_group 1).
  }];
}

def FAGPUTmemAccumulators : Pass<"fagpu-tmem-accumulators", "func::FuncOp"> {
  let summary = "Blackwell: the accumulators in tensor memory (S/P double buffer, O)";
  let description = [{
    sm_100a (FlashAttention-4): tcgen05.mma accumulates in tensor memory
    (128 lanes, one per query row, x 512 columns of 32 bits). The kernel
    keeps two S/P buffers of `block_c` columns -- S_{j+1} is computed into
    one while the softmax reads S_j from the other and writes P_j over it as
    16-bit pairs, which O += P_j V_j reads from there -- then O's `head_dim`
    columns. Sets `tmem_columns` to the power of two (at least 32) that
    tcgen05.alloc takes for them; tiles whose accumulators exceed 512
    columns are refused. Other targets are left alone.
  }];
}

def FAGPURowSumMma : Pass<"fagpu-row-sum-mma", "func::FuncOp"> {
  let summary = "e4m3: P's row sums on the tensor cores";
  let description = [{
    sm_90a e4m3 kernels: l, the running sum of P, is accumulated by an
    m64n8k32 MMA of P (the registers the P V product reads) against a ones
    column in shared memory, issued just before P V, instead of an FADD per
    score. `mode=on` asks for it on every e4m3 kernel, `mode=auto` follows
    the heuristics table (`fp8RowSumMmaByDefault`); 16-bit kernels are left
    alone (their P is not e4m3), and so are split-KV kernels (refused: their
    partial l is stored per chunk) and attentions that write an LSE
    (refused: the MMA sums the e4m3-rounded P, whose log-sum-exp was up to
    3e-2 off the attention's on the H200). Its tile (8 rows of B_c per
    consumer) takes shared memory: run it before `fagpu-pipeline-kv`, which
    fits the ring around it.
  }];
  let options = [
    Option<"mode", "mode", "::mlir::fagpu::Switch",
           "::mlir::fagpu::Switch::Auto", "on, off or auto (the heuristics)",
           [{::llvm::cl::values(
               clEnumValN(::mlir::fagpu::Switch::On, "on", "on"),
               clEnumValN(::mlir::fagpu::Switch::Off, "off", "off"),
               clEnumValN(::mlir::fagpu::Switch::Auto, "auto",
                          "the heuristics table's choice"))}]>,
  ];
}

def FAGPUPackQueryHeads : Pass<"fagpu-pack-query-heads", "func::FuncOp"> {
  let summary = "pack-GQA beyond one query: G query heads a K/V head per tile";
  let description = [{
    Grouped-query attention with a few queries a sequence (speculative
    decoding's 2-16, a window at decode): a kernel that gives each query
    head a tile of its own reads every K/V block G = Hq / Hkv times and
    fills Nq of its B_r rows. With `query-group=G` the sm_90a kernel takes
    Q, O and the LSE packed, `[B, Hkv, Nq G, D]` with row `r` of matrix `h`
    query `r / G` of query head `h G + r mod G` (FlashAttention-3's
    PackGQA), so each K/V block is read once per K/V head and a tile holds
    B_r / G queries of G heads; the masks and the K/V block range see the
    row's query (`#fagpu.schedule`'s `query_group`). The caller packs Q and
    unpacks O and the LSE (the Python runtime does; the kernel's metadata
    names `query_group`). G is a power of two dividing `block_r`; varlen
    batches and e4m3 inputs are refused. `query-group=0` leaves the
    schedules alone. At one query a sequence without a mask the packing
    needs no kernel of its own (`fa-pack-gqa`'s views).
  }];
  let options = [
    Option<"queryGroup", "query-group", "int64_t", "0",
           "query heads per K/V head packed into the rows (0: no packing)">,
  ];
}

def FAGPUMaxRows : Pass<"fagpu-max-rows", "func::FuncOp"> {
  let summary = "tiles of at most 8 real rows: each thread steps one row";
  let description = [{
    A decode launch fills a tile with at most 8 real rows: the query heads
    of a K/V head (pack-GQA, G <= 8) or G Nq <= 8 packed rows. The rest of
    the tile's B_r rows are padding, yet each consumer thread steps the
    online softmax for its two rows g and g + 8, so half the thread's
    exponentials, maxima and sums go to padding. Where the consumer's
    per-key work, not the bytes, bounds the kernel (an e4m3 cache, whose
    bytes are half a 16-bit one's; bench/results/
    2026-12-07-fp8-decode-profile-h100.md), `max-rows=8` sets the
    schedule's `max_rows`: `fagpu.softmax_step` then steps only the first
    row (`first_row_only`). The kernel is a variant of its own (named
    `_mr8`); its metadata's `max_rows` makes the launchers refuse a launch
    whose tiles would hold more rows. A run-time choice inside one kernel
    is not an option: a branch between the steps makes ptxas serialise the
    wgmmas (C7513). `max-rows=0` leaves the schedules alone; sm_90a only.
  }];
  let options = [
    Option<"maxRows", "max-rows", "int64_t", "0",
           "the most real rows a launch gives a tile (8; 0: any)">,
  ];
}

def FAGPUTmaStoreEpilogue : Pass<"fagpu-tma-store-epilogue", "func::FuncOp"> {
  let summary = "O leaves through shared memory and a TMA store";
  let description = [{
    sm_90a: O / l is written with stmatrix into a 128B-swizzled staging
    tile and stored by one thread with cp.async.bulk.tensor, instead of
    st.global from registers. The staging tile is its own buffer where it
    fits next to the K/V ring, else the tile's Q buffer (dead once its last
    S retired; a persistent kernel hands it back to the producer only after
    the store has read it). In a varlen kernel a box that reaches past its
    sequence's end would write into the next sequence's rows: its whole
    64-row blocks leave by TMA stores and the warpgroup's threads copy a
    sequence's last, partial block up to its end (`staged_copy`, from a
    staging tile of its own); a one-tile CTA without room copies every block
    from the dead Q buffer (`staged_copy_in_q`), and a persistent varlen
    kernel without room keeps the register epilogue. `mode=tma` asks for O
    through shared memory, `mode=direct` for the register epilogue,
    `mode=auto` follows the heuristics table (on for D >= 128). Run it
    after `fagpu-pipeline-kv`.
  }];
  let options = [
    Option<"mode", "mode", "::mlir::fagpu::EpilogueRequest",
           "::mlir::fagpu::EpilogueRequest::Auto",
           "tma, direct or auto (the heuristics)",
           [{::llvm::cl::values(
               clEnumValN(::mlir::fagpu::EpilogueRequest::Tma, "tma",
                          "through shared memory and a TMA store"),
               clEnumValN(::mlir::fagpu::EpilogueRequest::Direct, "direct",
                          "st.global from registers"),
               clEnumValN(::mlir::fagpu::EpilogueRequest::Auto, "auto",
                          "the heuristics table's choice"))}]>,
  ];
}

def FAGPUIOReport : Pass<"fagpu-io-report", "func::FuncOp"> {
  let summary = "Report the global-memory traffic of each attention kernel";
  let description = [{
    For every `fagpu.attention` with static shapes, prints the bytes its
    kernel moves between L2 and the SMs, counted from its tiles and the
    K/V blocks each query tile visits (what the kernels' tile decoder
    visits: causal tiles stop at their last row's diagonal, windows bound
    both sides; TMA kernels move whole boxes, so ragged tails count as full
    tiles, while sm_80's cp.async moves only the tails' rows):

    * L2 -> SM reads: per (batch, query head) and query tile, its Q rows
      once and, for each visited K/V block, its K and V rows (grouped-query
      heads each read their K/V head's blocks: no sharing between CTAs);
    * the dynamic tile scheduler's counter: one 32-byte atomic per tile
      taken and one that resets it;
    * SM -> L2 writes: O once, as payload (every epilogue writes whole
      32-byte sectors), and LSE when the kernel writes it (its 4-byte
      stores in the 32-byte sectors they touch);

    with the FlashAttention-2 model Q + (K + V) T_r beside them. Schedules
    (persistent tiles, ping-pong, ring depth) do not change these counts.

    DRAM reads and writes follow an L2 model (mlir::fa::model::dramTraffic): the
    launch's tiles replayed in the kernel's order on SMs x CTAs per SM
    CTAs, one K/V block per step, over an LRU cache of the part of L2 that
    holds data all SMs share; Q, O and LSE cross once, and the kernel's
    code (`code-bytes`, the metadata's `code_bytes`) is read once. The
    machine (SMs, L2 bytes) is the target's measured GPU
    (fagpu::machineDefaults) unless given.
    The IR is left unchanged.
  }];
  let options = [
    Option<"outputFile", "output", "std::string", /*default=*/"\"-\"",
           "Where to write the report ('-' for stdout)">,
    Option<"sms", "sms", "int64_t", /*default=*/"0",
           "SMs of the GPU for the DRAM model (0: the target's)">,
    Option<"l2Bytes", "l2-bytes", "int64_t", /*default=*/"0",
           "L2 bytes of the GPU for the DRAM model (0: the target's)">,
    Option<"codeBytes", "code-bytes", "int64_t", /*default=*/"0",
           "The kernel's code bytes (fa-compile's code_bytes), read from "
           "DRAM once per launch (0: not counted)">
  ];
}

#endif // FA_DIALECT_FAGPU_TRANSFORMS_PASSES_TD
