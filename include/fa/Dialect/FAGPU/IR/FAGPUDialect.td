//===- FAGPUDialect.td - The fagpu dialect -----------------*- tablegen -*-===//
//
// The `fagpu` dialect: attention mapped onto a GPU, between the tile level
// (fa tile ops in an FA2 loop nest) and NVVM.
//
//===----------------------------------------------------------------------===//

#ifndef FA_DIALECT_FAGPU_IR_FAGPUDIALECT_TD
#define FA_DIALECT_FAGPU_IR_FAGPUDIALECT_TD

include "mlir/IR/OpBase.td"

def FAGPU_Dialect : Dialect {
  let name = "fagpu";
  let cppNamespace = "::mlir::fagpu";
  let summary = "FlashAttention kernels at warpgroup level: schedule and roles";
  let description = [{
    `fa-map-to-gpu` turns the FA2 loop nest of the tile level (after the FA4
    passes) into one `fagpu.attention` per attention: the kernel that
    computes it, with the numerics the tile ops fixed (scale, mask, softcap,
    FA4 conditional rescaling and software exp2) and a typed
    `#fagpu.schedule` that starts with none of the FlashAttention-3 ideas.
    Each `fagpu-*` pass then brings one idea into the schedule (warp
    specialisation with register budgets, the K/V pipeline depth, ping-pong,
    softmax/GEMM overlap, persistent tiles with a static or dynamic
    scheduler, the TMA-store epilogue), checking that it fits the target,
    and `convert-fagpu-to-nvvm` emits the kernel the schedule describes.
  }];
  let useDefaultAttributePrinterParser = 1;
  let useDefaultTypePrinterParser = 1;
  let extraClassDeclaration = [{
    void registerTypes();
  }];
  let dependentDialects = ["::mlir::memref::MemRefDialect",
                           "::mlir::LLVM::LLVMDialect"];
}

class FAGPU_Op<string mnemonic, list<Trait> traits = []>
    : Op<FAGPU_Dialect, mnemonic, traits>;

#endif // FA_DIALECT_FAGPU_IR_FAGPUDIALECT_TD
