//===- Compile.h - fa.attention to PTX, cubin and launch metadata -*- C++
//-*-===//

#ifndef FA_TARGET_COMPILE_H
#define FA_TARGET_COMPILE_H

#include "mlir/IR/BuiltinOps.h"
#include "mlir/IR/MLIRContext.h"
#include "mlir/IR/OwningOpRef.h"

#include <limits>
#include <string>
#include <vector>

namespace mlir {
namespace fa {

struct KernelOptions;
/// O's element type: the inputs' for f16/bf16, KernelOptions::outDtype (f16
/// or bf16, default bf16) for e4m3.
std::string outputDtype(const KernelOptions &options);

struct KernelOptions {
  std::string arch = "sm_90a"; // sm_80 | sm_90a | sm_100a (compile only)
  int64_t headDim = 128;
  /// V's and O's head dim (0: headDim); below it on sm_90a wgmma only.
  int64_t valueHeadDim = 0;
  std::string dtype = "f16"; // f16 | bf16 | e4m3 (sm_90a wgmma)
  /// K's and V's element type where it is not dtype's: "e4m3" for an e4m3
  /// KV cache beside an f16/bf16 Q (sm_90a wgmma), with K's and V's
  /// descales; empty: dtype.
  std::string kvDtype;
  /// O's element type for e4m3 inputs: f16 or bf16 (empty: bf16, as
  /// FlashAttention-3's FP8 path); 16-bit inputs write O in their own.
  std::string outDtype;
  bool causal = false;
  int64_t window = 0;   // sliding window |i - j| < window (0: none)
  /// Causal/window masks aligned to the last key (query i at key position
  /// i + Nk - Nq, as a KV cache needs); false: top-left.
  bool bottomRight = false;
  /// The causal/window diagonal moved this many keys right (query i at key
  /// position i + diagonalOffset): flash-attention's window_size = (left,
  /// right) is causal, window left + right + 1, offset right.
  int64_t diagonalOffset = 0;
  double softcap = 0.0; // c * tanh(s / c) (0: none)
  double scale = 0.0;   // softmax scale (0: 1/sqrt(D))
  bool lse = true;      // write LSE (false: O only)
  int64_t blockR = 0;   // 0: the backend's default
  int64_t blockC = 0;
  /// Split-KV kernel (sm_90a wgmma): 0 off; N >= 2 chunks by default; -1
  /// auto (the runtimes pick the count per launch; metadata kv_splits 0).
  int64_t kvSplits = 0;
  /// KV cache (sm_90a wgmma): per-sequence key lengths kv_lengths [B]
  /// (i32), and pages of `pageSize` rows addressed by a block table
  /// [B, max_pages] (0: contiguous K/V).
  bool kvLengths = false;
  int64_t pageSize = 0;
  /// Varlen batch (sm_90a wgmma): sequences packed along N, described by
  /// cu_seqlens_q / cu_seqlens_k [B + 1] (i32).
  bool varlen = false;
  /// wgmma: resident CTAs per SM (0: the rule, two for B_r = 64).
  int64_t ctasPerSM = 0;
  bool queryInRegisters = true; // where the registers allow (see the pass)
  /// FA4 conditional rescaling threshold (< 0: off; NaN: the measured
  /// default for the head dim).
  double rescaleThreshold = std::numeric_limits<double>::quiet_NaN();
  /// FA4 software exp2 degree (0: off; < 0: the target's default, 3 on
  /// sm_100a as in FA4, off on Hopper where it measured slower).
  int64_t polyExp2Degree = 0;
  int64_t polyExp2Period = 8;
  /// sm_90a kernel: "wgmma" (FlashAttention-3: TMA, wgmma, warp roles) or
  /// "mma-sync" (the sm_80 kernel, for comparison).
  std::string sm90Kernel = "wgmma";
  int64_t stages = 0;            // wgmma: K/V ring depth (0: the pass's choice)
  bool pingPong = true;          // wgmma: consumer ping-pong
  bool intraOverlap = true;      // wgmma: softmax under the previous P V
  std::string rowSumMma = "auto"; // wgmma e4m3: P's row sums by MMA
  int64_t queryGroup = 0;        // wgmma: pack-GQA beyond one query (G)
  std::string epilogue = "auto"; // wgmma: tma, direct or auto
  int persistent = -1;           // wgmma: CTAs stride over the tiles (-1: auto)
  std::string ptxas; // empty: $CUDA_HOME/bin, /usr/local/cuda/bin, PATH
  bool runPtxas = true;
};

struct CompiledKernel {
  std::string name;
  std::string kernelIR; // the gpu.module as built by convert-fagpu-to-nvvm
  std::string hostIR;   // the host function with its gpu.launch_func
  std::string ptx;
  std::string cubin;    // empty when ptxas was not run
  std::string ptxasLog; // ptxas -v: registers, shared memory, spills
  std::string metadata; // JSON: kernel, grid, block, shared memory, params
  /// One entry per fa.attention of the module, in program order: the kernel
  /// it launches (all in `ptx` / `cubin`) and its launch metadata. `name`
  /// and `metadata` above are the first's.
  struct Launch {
    std::string name, metadata;
  };
  std::vector<Launch> launches;
};

/// The module `fa-compile` starts from: one function holding a memref-form
/// fa.attention with dynamic batch, heads and lengths.
OwningOpRef<ModuleOp> buildAttentionModule(MLIRContext &context,
                                           const KernelOptions &options);

/// fa.attention -> the tile level -> fagpu -> LLVM/NVVM -> PTX (LLVM NVPTX via
/// gpu-module-to-binary) -> cubin (ptxas) + launch metadata. Errors are
/// reported as diagnostics on `context`.
FailureOr<CompiledKernel> compileKernel(MLIRContext &context,
                                        const KernelOptions &options);

/// The same for a caller's module holding any number of memref-form (or
/// tensor-form) fa.attention ops inside func.funcs; each op's head dim,
/// dtype, mask and scale are its own, each becomes a kernel launch (equal
/// kernels are built once) with its own metadata in `launches`. The module
/// is lowered in place.
FailureOr<CompiledKernel> compileModule(ModuleOp module,
                                        const KernelOptions &options);

} // namespace fa
} // namespace mlir

#endif // FA_TARGET_COMPILE_H
