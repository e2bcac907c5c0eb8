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

#endif // FA_CONVERSION_PASSES_TD
