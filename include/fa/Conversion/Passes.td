//===- Passes.td - fa conversion passes --------------------*- tablegen -*-===//

#ifndef FA_CONVERSION_PASSES_TD
#define FA_CONVERSION_PASSES_TD

include "mlir/Pass/PassBase.td"

def ConvertFAToLoops : Pass<"convert-fa-to-loops"> {
  let summary = "Lower the fa tile ops to scf loops over memref, arith and math";
  let description = [{
    Expands each tile-level op into a loop nest on its buffers: the score
    tile (dot products in f32, scale and log2(e) folded into one multiply,
    softcap, then the bounds/causal/window mask as a select to -inf), the
    online-softmax step with `math.exp2`, the rescale, the P V accumulation,
    the normalisation and the log-sum-exp. This is the host path used to
    execute and check every algorithm variant without a GPU.
  }];
  let dependentDialects = ["::mlir::scf::SCFDialect",
                           "::mlir::arith::ArithDialect",
                           "::mlir::math::MathDialect",
                           "::mlir::memref::MemRefDialect",
                           "::mlir::linalg::LinalgDialect"];
}

def ConvertFAToSM80 : Pass<"convert-fa-to-sm80", "ModuleOp"> {
  let summary = "Lower tiled fa.attention to an mma.sync FlashAttention-2 GPU kernel";
  let description = [{
    For each tiled, buffer-form `fa.attention` (f16 or bf16, D = Dv in
    {64, 128, 256}), builds a kernel in a `gpu.module` (LLVM and NVVM
    dialects) that runs the FlashAttention-2 schedule on tensor cores of
    sm_80 and later, and replaces the op by a `gpu.launch_func` of it.

    Schedule (also printed as the kernel's `fa.schedule` attribute):
    * one CTA per (query block of B_r rows, head, batch); 4 warps, each
      owning 16 * (B_r / 64) query rows;
    * K/V tiles of B_c = 64 rows double-buffered in shared memory and
      filled with `cp.async` (16 B per thread, zero-filled past the end);
      rows are stored with an XOR swizzle of their 16-byte chunks
      (chunk ^ (row mod 8)) so that `ldmatrix` reads are conflict-free;
    * S = Q K^T and O += P V with `mma.sync.m16n8k16` (f16/bf16 in, f32
      accumulate); fragments read with `ldmatrix` (`.trans` for V); the
      S accumulator layout, converted to f16/bf16 pairs, is reused as the
      A operand of P V without going through shared memory;
    * row max and row sum over the 4 threads of a quad with `shfl.sync`;
      `exp2(s * scale * log2 e - m)` as one FMA feeding `ex2.approx`;
      the sum is reduced across the quad once, after the loop;
    * causal: K/V blocks past the diagonal are skipped.

    Kernel parameters: q, k, v, o, lse (global pointers to contiguous
    [B, H, N, D] / [B, H, N] buffers), Nq, Nk, Hq, Hkv (i32), and the scale
    times log2(e) (f32). The grid is (ceil(Nq / B_r), Hq, B).
  }];
  let options = [
    Option<"queryRegisters", "q-in-registers", "bool", /*default=*/"true",
           "Keep the Q fragments in registers for the whole K/V loop "
           "(otherwise they are re-read from shared memory each block; "
           "always re-read for D = 256)">,
    Option<"rescaleThreshold", "rescale-threshold", "double",
           /*default=*/"-1.0",
           "FA4 conditional rescaling in the kernel: move the softmax base "
           "only past this threshold (log2 units) and skip the O rescale "
           "under a warp vote (negative: off)">,
    Option<"polyExp2Degree", "poly-exp2-degree", "int64_t", /*default=*/"0",
           "FA4 software exp2 in the kernel: polynomial degree (0: off)">,
    Option<"polyExp2Period", "poly-exp2-period", "int64_t", /*default=*/"8",
           "Emulate the exp2 of one probability register in this many">
  ];
  let dependentDialects = ["::mlir::gpu::GPUDialect",
                           "::mlir::LLVM::LLVMDialect",
                           "::mlir::NVVM::NVVMDialect",
                           "::mlir::scf::SCFDialect",
                           "::mlir::arith::ArithDialect",
                           "::mlir::math::MathDialect"];
}

def ConvertFAToSM90 : Pass<"convert-fa-to-sm90", "ModuleOp"> {
  let summary = "Lower tiled fa.attention to a FlashAttention-3 kernel for "
                "sm_90a: TMA + mbarrier ring, wgmma, warp specialisation, "
                "ping-pong";
  let description = [{
    For each buffer-form `fa.attention` (f16 or bf16, D = Dv in
    {64, 128, 256}), builds a Hopper kernel in a `gpu.module` (LLVM and
    NVVM dialects) and replaces the op by the host side of its launch.

    Schedule (also printed as the kernel's `fa.schedule` attribute):
    * 3 warpgroups per CTA of B_r = 128 query rows (4 with `block_r = 192`,
      the default for non-causal D = 64; 2 with `block_r = 64`, the default
      for causal D = 64, built for two resident CTAs per SM:
      `nvvm.minctasm = 2`, at most 113 KiB of shared memory, no ping-pong
      partner). Warpgroup 0 is the
      producer: `setmaxnreg.dec`, then one thread issues all TMA loads
      (`cp.async.bulk.tensor` with `mbarrier::complete_tx`) of Q and of a
      ring of `stages` K and V tiles. The other warpgroups are consumers
      (`setmaxnreg.inc`), 64 query rows each;
    * per stage, `k_full`/`v_full` mbarriers (producer
      `arrive.expect_tx` with the tile's bytes, completed by the TMA) and
      `k_empty`/`v_empty` (one arrival per consumer warp after its wgmma
      retired the reads); waits are `try_wait.parity` on the round's phase;
    * S = Q K^T by `wgmma.mma_async` m64nB_ck16 with Q and K in shared
      memory (128-B swizzle, K-major descriptors); O += P V by
      `wgmma.mma_async` m64nDk16 with P in registers (the S accumulators as
      f16 pairs) and V from shared memory (transposed descriptor);
    * intra-warpgroup overlap (`intra-overlap`): iteration j issues S_j and
      P_{j-1} V_{j-1} together, `wgmma.wait_group 1`, runs the softmax of
      S_j under the second GEMM, then `wait_group 0`;
    * ping-pong (`ping-pong`): named barriers 1, 2 (, 3) (`bar.sync` /
      `bar.arrive`, 256 threads) pass the tensor cores from one consumer
      to the next around each GEMM issue;
    * causal: blocks past the diagonal skipped, the mask applied only in the
      second loop over the blocks that need it (ragged end, diagonal).
    * the Q tile is released (`q_empty`) after a tile's last GEMM.
    * wgmma descriptors are built from the shared base read next to each
      use (a side-effecting `mov.u32 %r, fa_smem`): held in one register
      across the loops, ptxas built every descriptor off its uniform
      datapath.

    Kernel parameters: the q, k, v tensor maps (CUtensorMap over the
    [B * H, N, D] view, 64-column boxes of B_r or B_c rows, 128-B swizzle,
    zero fill past N; 128 B each, `byval` + `nvvm.grid_constant`), o (a
    tensor map with 64-row boxes when the epilogue stores by TMA, else a
    pointer), the lse pointer, Nq, Nk, Hq, Hkv (i32), scale * log2(e)
    (f32), B (i32),
    and for the dynamic tile scheduler a u32 counter in global memory
    (`tile_counter`: zero before a launch, left zero by it).
    Grid: one CTA per (query block, head) tile, ceil(Nq / B_r) * Hq * B of
    them (causal: the longest tiles of a head first). With `persistent`
    (`auto`: on for D = 128 and for D = 64 at its default B_r), the CTAs
    loop over the tiles, so the producer loads the next tile's Q and K/V
    while the consumers finish the current one; each tile restarts the K/V
    ring at stage 0 and the loop carries every stage's phase bit.
    Non-causal tiles are equal: CTA x takes tiles x, x + gridDim.x, ...
    Causal tiles are not: a dynamic scheduler deals them in grid order to
    whichever CTA is free. CTA x starts with tile x; its producer fetches
    the next as gridDim.x + atomicAdd(tile_counter, 1) after issuing a
    tile's loads and hands the index to the consumers in shared memory,
    released by the Q buffer's `q_full` arrival; an index past the last
    tile ends the consumers' loop. A launch of T tiles fetches exactly T
    times, so the producer whose fetch returns T - 1 resets the counter.
    Where two Q buffers fit (kernel
    name `_q2`), the consumers run a cross-tile pipeline: the CTA's first
    tile is peeled, and every later tile issues the previous tile's last
    P V behind its own first S, runs its softmax under it, then stores the
    previous tile's rows (no branch between a wgmma and its wait: ptxas
    would serialize every wgmma).
    Epilogue (`epilogue`, auto: TMA for D >= 128): each consumer writes O / l
    as f16 pairs with stmatrix into a 128B-swizzled staging tile (B_r x D
    next to the ring where it fits, else the Q buffer of a one-tile CTA),
    fences the generic proxy against the async one, joins its four warps on
    named barrier 4 + consumer, and one thread stores the rows by TMA; before
    the tile is written again that thread waits until the previous store
    has read it (cp.async.bulk.wait_group.read).
    Any grid size is correct; the runtimes launch min(tiles, SMs *
    ctas_per_sm).
  }];
  let options = [
    Option<"stages", "stages", "int64_t", /*default=*/"0",
           "K/V tiles in flight (shared-memory ring depth, 2 to 4; 0: 3 "
           "where they fit in shared memory, else 2)">,
    Option<"pingPong", "ping-pong", "bool", /*default=*/"true",
           "Alternate the two consumer warpgroups on the tensor cores with "
           "named barriers">,
    Option<"intraOverlap", "intra-overlap", "bool", /*default=*/"true",
           "Run the softmax of block j while P V of block j - 1 is on the "
           "tensor cores (wgmma.wait_group 1)">,
    Option<"persistent", "persistent", "std::string", /*default=*/"\"auto\"",
           "Persistent CTAs looping over the tiles (causal: dynamic "
           "scheduler): true, false or auto (on for D = 128 and for D = 64 "
           "at its default B_r, where the H200 measured +8-13% at N = 1024 "
           "with the cross-tile pipeline; off elsewhere)">,
    Option<"producerRegisters", "producer-registers", "int64_t",
           /*default=*/"24", "setmaxnreg.dec count of the producer">,
    Option<"epilogue", "epilogue", "std::string", /*default=*/"\"auto\"",
           "How O leaves the kernel: tma (stmatrix into swizzled shared "
           "memory, then a TMA store; where no shared memory is left for "
           "it, direct stores), direct (st.global from registers) or auto "
           "(tma for D >= 128, where the H200 measured it faster)">,
    Option<"consumerRegisters", "consumer-registers", "int64_t",
           /*default=*/"0", "setmaxnreg.inc count of the consumers (0: 240 "
           "with two consumer warpgroups, 160 with three)">,
    Option<"rescaleThreshold", "rescale-threshold", "double",
           /*default=*/"-1.0",
           "FA4 conditional rescaling (log2 units; negative: off)">,
    Option<"polyExp2Degree", "poly-exp2-degree", "int64_t", /*default=*/"0",
           "FA4 software exp2: polynomial degree (0: off)">,
    Option<"polyExp2Period", "poly-exp2-period", "int64_t", /*default=*/"8",
           "Emulate the exp2 of one probability register in this many">
  ];
  let dependentDialects = ["::mlir::gpu::GPUDialect",
                           "::mlir::LLVM::LLVMDialect",
                           "::mlir::NVVM::NVVMDialect",
                           "::mlir::scf::SCFDialect",
                           "::mlir::arith::ArithDialect",
                           "::mlir::math::MathDialect",
                           "::mlir::memref::MemRefDialect"];
}

def ConvertFAToSM100 : Pass<"convert-fa-to-sm100", "ModuleOp"> {
  let summary = "Lower tiled fa.attention to a FlashAttention-4 style kernel "
                "for sm_100a: TMA, tcgen05.mma into tensor memory, softmax "
                "warps with conditional rescaling and partial software exp2";
  let description = [{
    For each buffer-form `fa.attention` (f16 or bf16, D = Dv in
    {64, 128, 256}), builds a Blackwell kernel in a `gpu.module` (LLVM and
    NVVM dialects) and replaces the op by the host side of its launch (the
    same tensor-map launch as `convert-fa-to-sm90`).

    COMPILE-VERIFIED ONLY: no Blackwell GPU was available; the PTX is
    checked by ptxas (`--gpu-name sm_100a`), never executed.

    Schedule (also printed as the kernel's `fa.schedule` attribute), one
    CTA of 192 threads per tile of B_r = 128 query rows:
    * warps 0-3, the softmax warpgroup: thread i owns query row i, which is
      TMEM lane i (warp w reads lanes 32w..32w+31 with `tcgen05.ld
      32x32b`). Per K/V block it loads S from TMEM, masks it, moves its
      FA4 base m only when the block max exceeds it by more than the
      threshold (`rescale-threshold`), computes P = exp2(S scale - m) with
      one in `poly-exp2-period` exponentials on the FMA pipe
      (`poly-exp2-degree`), rescales O in TMEM (`tcgen05.ld`/`st`, skipped
      by a warp vote when no row moved its base), and writes P as f16/bf16
      pairs over its S columns (`tcgen05.st`);
    * warp 4, the load warp: one thread issues every TMA load (Q once, a
      ring of `stages` K and V tiles, 128-B swizzle);
    * warp 5, the MMA warp: allocates the 512 TMEM columns
      (`tcgen05.alloc`, two S/P buffers of B_c columns and O of D columns),
      and one thread issues S_j = Q K_j^T (`tcgen05.mma` kind::f16, both
      operands in shared memory) into buffer j mod 2 and O += P_j V_j (A =
      P from tensor memory, B = V transposed), each followed by
      `tcgen05.commit` to the mbarriers that release the K or V stage and
      announce S (`s_full`) or O (`o_done`). S_{j+1} is issued before P_j
      is ready, so the tensor cores compute it under the softmax of S_j.
    * mbarriers: q_full, per stage k_full/v_full (TMA transaction bytes)
      and k_empty/v_empty (tcgen05.commit), s_full[2], p_full[2] (128
      softmax threads), o_done.
  }];
  let options = [
    Option<"stages", "stages", "int64_t", /*default=*/"0",
           "K/V tiles in flight (2 to 4; 0: 3 where they fit, else 2)">,
    Option<"rescaleThreshold", "rescale-threshold", "double",
           /*default=*/"8.0",
           "FA4 conditional rescaling (log2 units; negative: off)">,
    Option<"polyExp2Degree", "poly-exp2-degree", "int64_t", /*default=*/"3",
           "FA4 software exp2: polynomial degree (0: off)">,
    Option<"polyExp2Period", "poly-exp2-period", "int64_t", /*default=*/"8",
           "Emulate one exponential in this many (by column)">
  ];
  let dependentDialects = ["::mlir::gpu::GPUDialect",
                           "::mlir::LLVM::LLVMDialect",
                           "::mlir::NVVM::NVVMDialect",
                           "::mlir::scf::SCFDialect",
                           "::mlir::arith::ArithDialect",
                           "::mlir::math::MathDialect",
                           "::mlir::memref::MemRefDialect"];
}

#endif // FA_CONVERSION_PASSES_TD
