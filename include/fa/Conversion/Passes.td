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

def ConvertFAGPUToNVVM : Pass<"convert-fagpu-to-nvvm", "ModuleOp"> {
  let summary = "Emit the kernel of each fagpu.attention in NVVM and launch it";
  let description = [{
    For every `fagpu.attention`, builds the kernel its target and
    `#fagpu.schedule` describe into the `fa_kernels` gpu.module (once per
    distinct kernel) and replaces the op by the host side of its launch:

    * sm_80: an mma.sync FlashAttention-2 kernel (cp.async double buffer,
      ldmatrix, register softmax), launched on the buffers' pointers with
      one CTA per (query block, head, batch).
    * sm_90a: the FlashAttention-3 kernel (TMA + mbarrier K/V ring, wgmma,
      producer/consumer warpgroups with setmaxnreg, and whichever of
      ping-pong, softmax overlap, persistent tiles with the cross-tile
      pipeline and a static or dynamic scheduler, and the TMA-store
      epilogue the schedule holds); q, k, v (and o with a TMA store) as
      tensor maps the runtime encodes (`faEncodeTensorMap`).
    * sm_100a: the tcgen05 kernel (TMEM accumulators, one MMA-issuing
      thread, TMA load warp, softmax warps); compile-verified only.

    The numerics (scale, masks, softcap, FA4 rescaling and software exp2)
    are the op's. The kernel carries its schedule as `fagpu.schedule`, with
    `fagpu.target`, `fagpu.threads` and `fagpu.shared_memory_bytes`, which
    the launch metadata is written from. A schedule the target's kernel
    cannot run (an sm_90a kernel without warp roles or K/V ring, tiles that
    do not fit) is an error naming the pass that sets the missing piece.
  }];
  let dependentDialects = ["::mlir::gpu::GPUDialect",
                           "::mlir::LLVM::LLVMDialect",
                           "::mlir::NVVM::NVVMDialect",
                           "::mlir::arith::ArithDialect",
                           "::mlir::math::MathDialect",
                           "::mlir::memref::MemRefDialect",
                           "::mlir::scf::SCFDialect"];
}

#endif // FA_CONVERSION_PASSES_TD
