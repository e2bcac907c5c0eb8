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
                           "::mlir::cf::ControlFlowDialect",
                           "::mlir::arith::ArithDialect",
                           "::mlir::math::MathDialect",
                           "::mlir::memref::MemRefDialect",
                           "::mlir::linalg::LinalgDialect"];
}

def FAExpandFP8Casts : Pass<"fa-expand-fp8-casts"> {
  let summary = "Expand arith.extf/truncf on f8E4M3FN into integer bit manipulation";
  let description = [{
    LLVM IR has no 8-bit float type: MLIR's LLVM lowering stores f8E4M3FN
    as i8, and `convert-arith-to-llvm` leaves `arith.extf` / `arith.truncf`
    on it unconverted. This pass rewrites them, one pattern each, into
    integer code on the bits (e4m3: sign, 4 exponent bits with bias 7, 3
    mantissa bits; no infinity; S.1111.111 is NaN):

    ```
    extf:   e = bits[6:3], m = bits[2:0]
            e > 0:   f32 bits = sign | (e + 120) << 23 | m << 20   (exact)
            e = 0:   m * 2^-9                                      (exact)
            |bits| = 0x7f: NaN
    truncf: |x| >= 2^-6: the f32 mantissa rounded to 3 bits, nearest
            even (add 0x7ffff + lsb, shift by 20), exponent rebased by
            120; |x| < 2^-6: |x| * 2^9 rounded to an integer, nearest even
            (+2^23 - 2^23), which is the subnormal's encoding
            (8 -> 2^-6); beyond 448 after rounding, or NaN: NaN (as
            APFloat's conversion; saturate first for the hardware's
            satfinite)
    ```

    Every e4m3 value is exact in f16 and f32, so the widening is exact;
    other source and result widths go through f32 (exactly). Scalar casts
    only (the CPU path's loops are scalar; vector casts are left alone).
    Runs in `fa-cpu-pipeline` before the arith-to-LLVM conversion.
  }];
  let dependentDialects = ["::mlir::arith::ArithDialect"];
}

def FAGPUBuildKernels : Pass<"fagpu-build-kernels", "ModuleOp"> {
  let summary = "Write each fagpu.attention's kernel (sm_80, sm_90a, sm_100a) in fagpu kernel-body ops";
  let description = [{
    For every sm_80 and sm_90a `fagpu.attention`, writes the kernel its
    `#fagpu.schedule` describes into the `fa_kernels` gpu.module (once per
    distinct kernel) and replaces the op by the host side of its launch. The
    kernel body is the schedule made explicit in `fagpu` ops:

    * `fagpu.warp_specialize`: the producer warpgroup and the consumer
      warpgroups with their `setmaxnreg` budgets (`fagpu-warp-specialize`);
    * `fagpu.create_pipeline` / `init_pipelines`: the Q buffers and the K/V
      ring (`stages`, `fagpu-pipeline-kv`) as `!fagpu.pipeline` values; the
      producer's `pipeline_acquire` + `tma_load`, the consumers'
      `pipeline_wait` / `pipeline_tile` / `pipeline_release`;
    * the tile loop: one tile per CTA, or `scf.for` / `scf.while` over a
      static or dynamic scheduler's tiles (`fagpu-persistent`), with the
      previous tile's last P V carried into the next (two Q buffers);
    * `fagpu.mma` (S = Q K^T, O += P V) on `!fagpu.fragment`s,
      `fagpu.mma_wait {pending = 1}` where the softmax of block j runs
      under P V of block j - 1 (`fagpu-overlap-softmax`), `fagpu.pin`;
    * `fagpu.wait_turn` / `pass_turn` around each consumer's MMAs
      (`fagpu-ping-pong`);
    * `fagpu.softmax_step` and `fagpu.rescale` with the mask and FA4 choices
      of the tile ops;
    * the epilogue: `fagpu.row_totals` (each row's l and the factor that
      normalises O), then `fagpu.store_rows` from registers, or
      `fagpu.stage_output` into a staging tile and `fagpu.tma_store_staged`
      (`fagpu-tma-store-epilogue`) or `fagpu.copy_staged_rows`, and
      `fagpu.store_lse`.

    The sm_80 (mma.sync) kernel is one CTA of four warps over B_r rows,
    with fragments of B_r rows (two m16 row tiles per warp at B_r = 128):
    `fagpu.shared_tile` (Q) and a `!fagpu.pipeline` of `row_major` tiles
    (the two-stage K/V ring) filled by `fagpu.copy_async` (cp.async) and
    ordered by `fagpu.copy_commit` / `fagpu.copy_wait`;
    `fagpu.load_fragment` (Q in registers, where they fit); `fagpu.mma` on
    row-major tiles (ldmatrix + mma.sync, synchronous); and the same
    `softmax_step`, `rescale` and epilogue as sm_90a (a 64-row tile at a
    time, `fagpu.row_tile`).

    The sm_100a (tcgen05) kernel has FlashAttention-4's structure:
    `fagpu.tcgen05_roles` (a softmax warpgroup, one TMA thread, one MMA
    thread); `fagpu.tmem_alloc` / `tmem_dealloc` / `tmem_slice` (S/P
    buffers 0 and 1 and O in tensor-memory columns); `fagpu.mma` with a
    `!fagpu.tmem` accumulator (tcgen05.mma), its completion signalled by
    `fagpu.mma_commit` and `fagpu.pipeline_release {commit}`; the softmax on
    `lanes` fragments (`fagpu.tmem_load`, `softmax_step`, `rescale` of O in
    TMEM, P back with `fagpu.tmem_store`), hand-offs on `!fagpu.barriers`
    (`barrier_wait`, `barrier_arrive`), and `store_rows` from TMEM.

    `convert-fagpu-to-nvvm` then lowers each of these ops with one pattern.
  }];
  let dependentDialects = ["::mlir::gpu::GPUDialect",
                           "::mlir::LLVM::LLVMDialect",
                           "::mlir::NVVM::NVVMDialect",
                           "::mlir::scf::SCFDialect",
                           "::mlir::arith::ArithDialect",
                           "::mlir::cf::ControlFlowDialect",
                           "::mlir::fagpu::FAGPUDialect"];
}

def ConvertFAGPUToNVVM : Pass<"convert-fagpu-to-nvvm", "ModuleOp"> {
  let summary = "Lower the fagpu kernel-body ops to NVVM, one pattern per op";
  let description = [{
    Converts the kernels `fagpu-build-kernels` wrote: each kernel-body op
    (`fagpu.warp_specialize`, the pipeline ops and ring positions,
    `fagpu.tma_load`, `fagpu.copy_async`, `fagpu.mma`, `fagpu.softmax_step`,
    `fagpu.store_rows`, the tcgen05 ops, ...) is lowered by its own
    pattern, fragments becoming their registers (a 1:N type conversion that
    the scf loops carrying them follow), shared tiles their (base, offset),
    pipelines their (base, barrier offset, tile offset).

    The pass only converts: an `fagpu.attention` left in the module (its
    kernel not built) is an error that names `fagpu-build-kernels`. The
    numerics (scale, masks, softcap, FA4 rescaling and software exp2) are
    the ops'.
  }];
  let dependentDialects = ["::mlir::gpu::GPUDialect",
                           "::mlir::LLVM::LLVMDialect",
                           "::mlir::NVVM::NVVMDialect",
                           "::mlir::arith::ArithDialect",
                           "::mlir::math::MathDialect",
                           "::mlir::memref::MemRefDialect",
                           "::mlir::scf::SCFDialect",
                           "::mlir::cf::ControlFlowDialect"];
}

#endif // FA_CONVERSION_PASSES_TD
