//===- FAGPU.h - The fagpu dialect ------------------------------*- C++ -*-===//

#ifndef FA_DIALECT_FAGPU_IR_FAGPU_H
#define FA_DIALECT_FAGPU_IR_FAGPU_H

#include "mlir/Bytecode/BytecodeOpInterface.h"
#include "mlir/Dialect/LLVMIR/LLVMDialect.h"
#include "mlir/Dialect/MemRef/IR/MemRef.h"
#include "mlir/IR/BuiltinTypes.h"
#include "mlir/IR/Dialect.h"
#include "mlir/IR/OpDefinition.h"
#include "mlir/Interfaces/ControlFlowInterfaces.h"
#include "mlir/Interfaces/SideEffectInterfaces.h"

#include "fa/Dialect/FAGPU/IR/FAGPUDialect.h.inc"
#include "fa/Dialect/FAGPU/IR/FAGPUEnums.h.inc"

namespace mlir::fagpu {
/// The widest shared-memory swizzle (CU_TENSOR_MAP_SWIZZLE_128B, wgmma's
/// 128-byte mode): a swizzled row of 128 bytes, an 8-row atom of 1 KiB.
/// Narrower ones (64 and 32 bytes) divide it.
inline constexpr int64_t kMaxSwizzleBytes = 128;

/// The fields of a #fagpu.schedule, for passes that change some of them
/// (ScheduleAttr::with).
struct ScheduleFields {
  int64_t blockR = 0, blockC = 0, consumers = 0, ctasPerSm = 1;
  int64_t producerRegisters = 0, consumerRegisters = 0, stages = 0;
  bool pingPong = false, overlapSoftmax = false;
  TileScheduler scheduler = TileScheduler::Single;
  int64_t qBuffers = 1;
  Epilogue epilogue = Epilogue::Registers;
  bool qInRegisters = false;
  /// Split-KV: 0 for a kernel that attends each query block to all its
  /// keys; otherwise the K/V chunks per tile its IR launch uses (the
  /// kernel takes the count as a parameter).
  int64_t kvSplits = 0;
  /// sm_100a: the tensor-memory columns the kernel allocates for its
  /// accumulators (two S/P buffers of B_c columns, then O); 0 until
  /// fagpu-tmem-accumulators places them, and on other targets.
  int64_t tmemColumns = 0;
  /// sm_90a e4m3: P's row sums by an MMA against a ones column rather
  /// than an FADD per score (fagpu-row-sum-mma).
  bool rowSumMma = false;
  /// Pack-GQA beyond one query (fagpu-pack-query-heads): the G query heads
  /// of a K/V head packed query by query into the tile's rows (row r is
  /// query r / G); 0 when each row is a query of its own head.
  int64_t queryGroup = 0;
  /// The most real rows a launch gives a tile (fagpu-max-rows): 8 makes
  /// each consumer thread step only its first row's softmax (its row g + 8
  /// is padding); 0 for tiles of any rows.
  int64_t maxRows = 0;
};
} // namespace mlir::fagpu

#define GET_ATTRDEF_CLASSES
#include "fa/Dialect/FAGPU/IR/FAGPUAttrs.h.inc"

#define GET_TYPEDEF_CLASSES
#include "fa/Dialect/FAGPU/IR/FAGPUTypes.h.inc"

#define GET_OP_CLASSES
#include "fa/Dialect/FAGPU/IR/FAGPUOps.h.inc"

namespace mlir::fagpu {
/// The first op of a score_mod or mask_mod region that the sm_90a kernel
/// has no lowering for (null when it has one for every op): arith ops but
/// the ceil and floor divisions (expanded before), math's tanh, exp, exp2,
/// log, log2, absf, sqrt and fma of f32, and reads of the captures
/// (tensor.extract, tensor.dim of a constant dim), none holding a region.
Operation *unsupportedModificationOp(Region &region);
/// The names of the math ops unsupportedModificationOp admits, for
/// diagnostics.
StringRef supportedModificationMathOps();
/// Why `type` (a memref or tensor) cannot be a capture the sm_90a kernel
/// reads: a static shape, contiguous, of f32, f16, bf16, i8, i32 or i64.
std::optional<std::string> checkCaptureType(Type type);
/// Checks `op`'s score_mod and mask_mod regions (either may be empty):
/// their block arguments (f32 score, then batch, head, query and key index;
/// the indices alone for the mask; then a tensor per type of `captures`,
/// of its shape), one fagpu.yield of an f32 or i1, and only supported ops
/// on the region's own values.
LogicalResult verifyModificationRegions(Operation *op, Region &scoreMod,
                                        Region &maskMod,
                                        TypeRange captures = {});

/// The fields of `schedule`.
ScheduleFields fieldsOf(ScheduleAttr schedule);
/// The attribute holding `fields`.
ScheduleAttr scheduleOf(MLIRContext *context, const ScheduleFields &fields);
/// Whether O leaves through a shared-memory tile (any epilogue but
/// registers).
inline bool stagesOutput(Epilogue e) { return e != Epilogue::Registers; }
/// Whether O is staged in the tile's Q buffer (dead once its last S
/// retired) rather than a tile of its own.
inline bool stagesOutputInQ(Epilogue e) {
  return e == Epilogue::TmaStoreInQ || e == Epilogue::StagedCopyInQ;
}
/// Whether O leaves by TMA stores, so the kernel takes O as a tensor map.
inline bool storesOutputByTma(Epilogue e) {
  return e == Epilogue::TmaStore || e == Epilogue::TmaStoreInQ;
}
/// Whether the kernel takes O as a tensor map: TMA stores write it, or
/// (StagedCopy) every whole 64-row block of it, the warpgroup's threads
/// copying only a varlen sequence's last, partial block.
inline bool takesOutputMap(Epilogue e) {
  return storesOutputByTma(e) || e == Epilogue::StagedCopy;
}
/// "sm_80", "sm_90a" or "sm_100a".
inline StringRef targetName(Target target) { return stringifyTarget(target); }
} // namespace mlir::fagpu

#endif // FA_DIALECT_FAGPU_IR_FAGPU_H
